"""Agent and slot routes: list and read them, enable and disable them (upstream's ``GetAgents``,
``GetAgent``, ``GetSlots``, ``GetSlot``, ``EnableAgent``, ``DisableAgent``, ``EnableSlot``,
``DisableSlot``; paths and JSON shapes are upstream's). Switching needs ``UPDATE_AGENTS`` (admins);
the work is done by ``_core/_agent_states``.
"""

from __future__ import annotations

from typing import Any

from fastapi import Depends, Request

from determined.master import __version__
from determined.master._api._access import P, on_cluster
from determined.master._api._deps import Principal, authenticate, json_body, master_of
from determined.master._api._json_route import api_router
from determined.master._core._agent_states import AgentStates
from determined.master._core._cluster_view import Agent, Slot
from determined.master._wire import APIError, pagination, ts

router = api_router(tags=["Cluster"])

_DEVICE_TYPES = {"cuda": "TYPE_CUDA", "rocm": "TYPE_ROCM", "cpu": "TYPE_CPU"}


def _states(request: Request) -> AgentStates:
    return master_of(request).manager.agent_states


def slot_json(slot: Slot) -> dict[str, Any]:
    """Upstream's ``agentv1.Slot``; ``container`` is null on a free slot, as upstream sends it."""
    entry: dict[str, Any] = {
        "id": str(slot.slot_id),
        "device": {
            "id": slot.slot_id,
            "brand": slot.brand,
            "uuid": slot.uuid,
            "type": _DEVICE_TYPES.get(slot.device_type, "TYPE_UNSPECIFIED"),
        },
        "enabled": slot.enabled,
        "draining": slot.draining,
        "container": None,
    }
    if slot.allocation_id is not None:
        entry["container"] = {
            "id": slot.allocation_id,
            "state": "STATE_RUNNING",
            "devices": [entry["device"]],
            "permissionDenied": False,
        }
    return entry


def agent_json(agent: Agent) -> dict[str, Any]:
    """Upstream's ``agentv1.Agent``: its slots by id, the containers on them, its switches."""
    slots = {str(slot.slot_id): slot_json(slot) for slot in agent.slots}
    containers = {
        entry["container"]["id"]: entry["container"]
        for entry in slots.values()
        if entry["container"] is not None
    }
    return {
        "id": agent.agent_id,
        "registeredTime": ts(agent.registered_time),
        "slotStats": _slot_stats(list(slots.values())),
        "slots": slots,
        "containers": containers,
        "resourcePools": [agent.resource_pool],
        "addresses": [agent.address],
        "enabled": agent.enabled,
        "draining": agent.draining,
        "version": __version__,  # the master's own agents
    }


def _slot_stats(slots: list[dict[str, Any]]) -> dict[str, Any]:
    """Upstream's ``v1SlotStats``: slot counts by device type and by brand, with container states."""
    by_type: dict[str, dict[str, Any]] = {}
    by_brand: dict[str, dict[str, Any]] = {}
    for slot in slots:
        device = slot["device"]
        for table, key in ((by_type, device["type"]), (by_brand, device["brand"] or "")):
            stats = table.setdefault(key, {"disabled": 0, "draining": 0, "total": 0, "states": {}})
            stats["total"] += 1
            stats["disabled"] += 0 if slot["enabled"] else 1
            stats["draining"] += 1 if slot["draining"] else 0
            if slot.get("container"):
                state = slot["container"]["state"]
                stats["states"][state] = stats["states"].get(state, 0) + 1
    return {"typeStats": by_type, "brandStats": by_brand}


def _drain(body: dict[str, Any]) -> bool:
    drain = body.get("drain", False)
    if drain is None:
        return False
    if not isinstance(drain, bool):
        raise APIError(400, f"drain: must be a boolean, got {drain!r}")
    return drain


# ---- reads -----------------------------------------------------------------------------------------


@router.get("/api/v1/agents")
def get_agents(request: Request, p: Principal = Depends(authenticate)) -> dict[str, Any]:
    """The machines (or Ray pools) with their slots, the allocations holding them, their switches."""
    agents = [agent_json(a) for a in _states(request).agents()]
    return {"agents": agents, "pagination": pagination(0, 0, len(agents), len(agents))}


@router.get("/api/v1/agents/{agentId}")
def get_agent(agentId: str, request: Request, p: Principal = Depends(authenticate)) -> Any:
    """One agent (404 naming it when there is none)."""
    return {"agent": agent_json(_states(request).agent(agentId))}


@router.get("/api/v1/agents/{agentId}/slots")
def get_slots(agentId: str, request: Request, p: Principal = Depends(authenticate)) -> Any:
    """The slots of one agent."""
    return {"slots": [slot_json(s) for s in _states(request).agent(agentId).slots]}


@router.get("/api/v1/agents/{agentId}/slots/{slotId}")
def get_slot(
    agentId: str, slotId: str, request: Request, p: Principal = Depends(authenticate)
) -> Any:
    """One slot of an agent (404 naming the agent or the slot)."""
    return {"slot": slot_json(_states(request).slot(agentId, slotId))}


# ---- switches --------------------------------------------------------------------------------------

_UPDATE_AGENTS = [on_cluster(P.UPDATE_AGENTS)]


@router.post("/api/v1/agents/{agentId}/enable", dependencies=_UPDATE_AGENTS)
def enable_agent(agentId: str, request: Request) -> dict[str, Any]:
    """Let the agent and each of its slots take new work again."""
    return {"agent": agent_json(_states(request).set_agent(agentId, True))}


@router.post("/api/v1/agents/{agentId}/disable", dependencies=_UPDATE_AGENTS)
def disable_agent(
    agentId: str, request: Request, body: dict[str, Any] = Depends(json_body)
) -> dict[str, Any]:
    """No new work on the agent; its running work is killed (trials run again later) unless
    ``drain`` lets it finish."""
    return {"agent": agent_json(_states(request).set_agent(agentId, False, _drain(body)))}


@router.post("/api/v1/agents/{agentId}/slots/{slotId}/enable", dependencies=_UPDATE_AGENTS)
def enable_slot(agentId: str, slotId: str, request: Request) -> dict[str, Any]:
    """Let one slot take new work again."""
    return {"slot": slot_json(_states(request).set_slot(agentId, slotId, True))}


@router.post("/api/v1/agents/{agentId}/slots/{slotId}/disable", dependencies=_UPDATE_AGENTS)
def disable_slot(
    agentId: str, slotId: str, request: Request, body: dict[str, Any] = Depends(json_body)
) -> dict[str, Any]:
    """No new work on one slot; what runs on it is killed unless ``drain``."""
    return {"slot": slot_json(_states(request).set_slot(agentId, slotId, False, _drain(body)))}
