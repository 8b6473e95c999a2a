"""``det agent list|enable|disable`` and ``det slot list|enable|disable``: the machines the master
schedules on and their slots, and the admins' switches on them.

With the local resource manager there is one agent, this machine (its host name), with one slot
per GPU (or per CPU slot); with Ray, one agent per resource pool. ``det slot list`` shows each
slot's allocation and task, ``FREE`` when nothing holds it. A disabled agent or slot takes no new
work; disabling kills what runs there unless ``--drain`` lets it finish (docs/agents.md).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any

from determined.cli import _errors, _render, _session
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


def patch_agent(enabled: bool) -> Callable[[argparse.Namespace], None]:
    """``det agent enable|disable AGENT_ID|--all``; ``--drain`` lets running work finish and
    lists the tasks still running on the drained agents."""

    def patch(args: argparse.Namespace) -> None:
        action = "enable" if enabled else "disable"
        if args.all == bool(args.agent_id):
            raise _errors.CliError(
                f"give an agent id or --all (not both); see `det agent {action} --help`"
            )
        cluster = _session.api(args).cluster
        agent_ids = [args.agent_id] if args.agent_id else [str(a["id"]) for a in _agents(args)]
        drain = bool(getattr(args, "drain", False)) and not enabled
        for agent_id in agent_ids:
            if enabled:
                cluster.enable_agent(agent_id)
            else:
                cluster.disable_agent(agent_id, drain=drain)
            print(f"{'Enabled' if enabled else 'Disabled'} agent {agent_id}.", file=sys.stderr)
        if drain:
            _print_tasks_on(args, agent_ids)

    return patch


def _print_tasks_on(args: argparse.Namespace, agent_ids: list[str]) -> None:
    """The tasks still running on ``agent_ids`` (after a drain)."""
    summaries = _session.api(args).cluster.tasks().get("allocationIdToSummary") or {}
    on_agents = {
        aid: s
        for aid, s in summaries.items()
        if any(
            a in agent_ids for r in s.get("resources") or [] for a in r.get("agentDevices") or {}
        )
    }
    if args.json:
        _render.print_json(on_agents)
        return
    if not args.csv:
        print(
            "Tasks still in progress on draining nodes."
            if on_agents
            else "No tasks in progress on draining nodes."
        )
    rows = [
        [s.get("taskId"), aid, s.get("name"), s.get("slotsNeeded")] for aid, s in on_agents.items()
    ]
    if rows or args.csv:
        headers = ["Task ID", "Allocation ID", "Name", "Slots Needed"]
        _render.print_table(headers, rows, as_csv=args.csv)


def patch_slot(enabled: bool) -> Callable[[argparse.Namespace], None]:
    """``det slot enable|disable AGENT_ID SLOT_ID``."""

    def patch(args: argparse.Namespace) -> None:
        cluster = _session.api(args).cluster
        slot_id = str(args.slot_id)
        if enabled:
            cluster.enable_slot(args.agent_id, slot_id)
        else:
            cluster.disable_slot(args.agent_id, slot_id)
        print(f"{'Enabled' if enabled else 'Disabled'} slot {slot_id} of agent {args.agent_id}")

    return patch


def _format_args() -> list[Any]:
    return [
        Group(
            Arg("--csv", action="store_true", help="print as CSV"),
            Arg("--json", action="store_true", help="print as JSON"),
        )
    ]


def _agent_args(action: str) -> list[Any]:
    return [
        Group(
            Arg("agent_id", help="agent ID", nargs="?"),
            Arg("--all", action="store_true", help=f"{action} all agents"),
        )
    ]


def _slot_args() -> list[Any]:
    return [Arg("agent_id", help="agent ID"), Arg("slot_id", type=int, help="slot ID")]


COMMANDS = [
    Cmd(
        "a|gent",
        None,
        "manage agents",
        [
            Cmd("list ls", list_agents, "list agents", _format_args(), default=True),
            Cmd("enable", patch_agent(True), "enable agent", _agent_args("enable")),
            Cmd(
                "disable",
                patch_agent(False),
                "disable agent",
                [
                    *_agent_args("disable"),
                    Arg(
                        "--drain",
                        action="store_true",
                        help="let the tasks running on the agents finish (and list them);"
                        " without it they are killed (trials run again once enabled)",
                    ),
                    *_format_args(),
                ],
            ),
        ],
    ),
    Cmd(
        "s|lot",
        None,
        "manage slots",
        [
            Cmd("list ls", list_slots, "list slots in cluster", _format_args(), default=True),
            Cmd("enable", patch_slot(True), "enable slot on agent", _slot_args()),
            Cmd("disable", patch_slot(False), "disable slot on agent", _slot_args()),
        ],
    ),
]
