"""``det agent list`` and ``det slot list``: the machines the master schedules on and their slots.

With the local resource manager there is one agent, this machine (its host name), with one slot
per GPU (or per CPU slot); with Ray, one agent per resource pool. ``det slot list`` shows each
slot's allocation and task, ``FREE`` when nothing holds it.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from determined.cli import _render, _session
from determined.cli._declarative import Arg, Cmd, Group

_DEVICE_TYPES = {"TYPE_CUDA": "cuda", "TYPE_ROCM": "rocm", "TYPE_CPU": "cpu"}


def local_id(address: str) -> str:
    """The last path component of an id (upstream's agent and slot ids may be paths)."""
    return os.path.basename(address)


def _agents(args: argparse.Namespace) -> list[dict[str, Any]]:
    agents = _session.api(args).cluster.agents().get("agents") or []
    return sorted(agents, key=lambda a: str(a.get("id")))


def list_agents(args: argparse.Namespace) -> None:
    agents = [
        {
            "id": local_id(str(a.get("id"))),
            "version": a.get("version") or "",
            "registered_time": _render.format_time(a.get("registeredTime")),
            "num_slots": len(a.get("slots") or {}),
            "num_containers": len(a.get("containers") or {}),
            "resource_pools": ", ".join(a.get("resourcePools") or []),
            "enabled": a.get("enabled"),
            "draining": a.get("draining"),
            "addresses": ", ".join(a.get("addresses") or []),
        }
        for a in _agents(args)
    ]
    if args.json:
        _render.print_json(agents)
        return
    headers = [
        "Agent ID",
        "Version",
        "Registered Time",
        "Slots",
        "Containers",
        "Resource Pool",
        "Enabled",
        "Draining",
        "Addresses",
    ]
    _render.print_table(headers, [list(a.values()) for a in agents], as_csv=args.csv)


def _task_name(slot: dict[str, Any], names: dict[str, str]) -> str:
    container = slot.get("container")
    if not container:
        return "FREE"
    if container.get("permissionDenied"):
        return "NO PERMISSIONS"
    container_id = str(container.get("id"))
    return names.get(container_id, f"Non-Determined Task: {container_id}")


def list_slots(args: argparse.Namespace) -> None:
    api = _session.api(args)
    summaries = api.cluster.tasks().get("allocationIdToSummary") or {}
    owners = {
        str(r.get("containerId")): {"name": s.get("name"), "allocation_id": s.get("allocationId")}
        for s in summaries.values()
        for r in s.get("resources") or []
        if r.get("containerId")
    }
    names = {k: str(v["name"]) for k, v in owners.items()}
    slots = []
    for agent in _agents(args):
        for slot in (agent.get("slots") or {}).values():
            container = slot.get("container") or {}
            device = slot.get("device") or {}
            container_id = str(container.get("id")) if container else None
            if container_id in owners:
                allocation = owners[container_id]["allocation_id"]
            else:
                allocation = "OCCUPIED" if container else "FREE"
            slots.append(
                {
                    "agent_id": local_id(str(agent.get("id"))),
                    "resource_pools": ", ".join(agent.get("resourcePools") or []),
                    "slot_id": local_id(str(slot.get("id") or "")),
                    "enabled": slot.get("enabled"),
                    "draining": slot.get("draining"),
                    "allocation_id": allocation,
                    "task_name": _task_name(slot, names),
                    "type": _DEVICE_TYPES.get(str(device.get("type")), "unknown"),
                    "device": device.get("brand") or "",
                }
            )
    if args.json:
        _render.print_json(slots)
        return
    headers = [
        "Agent ID",
        "Resource Pool",
        "Slot ID",
        "Enabled",
        "Draining",
        "Allocation ID",
        "Task Name",
        "Type",
        "Device",
    ]
    _render.print_table(headers, [list(s.values()) for s in slots], as_csv=args.csv)


def _format_args() -> list[Any]:
    return [
        Group(
            Arg("--csv", action="store_true", help="print as CSV"),
            Arg("--json", action="store_true", help="print as JSON"),
        )
    ]


COMMANDS = [
    Cmd(
        "a|gent",
        None,
        "manage agents",
        [Cmd("list ls", list_agents, "list agents", _format_args(), default=True)],
    ),
    Cmd(
        "s|lot",
        None,
        "manage slots",
        [Cmd("list ls", list_slots, "list slots in cluster", _format_args(), default=True)],
    ),
]
