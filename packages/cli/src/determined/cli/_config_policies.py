"""``det config-policies`` (alias ``cp``): admins' invariant configs and constraints of
experiments and tasks, global or per workspace (docs/config_policies.md). Output as upstream's."""

from __future__ import annotations

import argparse

from determined.cli import _render, _session
from determined.cli._declarative import Arg, Cmd, Group
from determined.cli._errors import CliError


def _kind(args: argparse.Namespace) -> str:
    return "NTSC" if args.workload_type.lower() == "tasks" else "EXPERIMENT"


def _workspace_id(args: argparse.Namespace) -> int | None:
    name = args.workspace_name
    if not name:
        return None
    workspace = _session.api(args).workspaces.by_name(name)
    if workspace is None:
        raise CliError(f"workspace '{name}' not found")
    return int(workspace["id"])


def describe_config_policies(args: argparse.Namespace) -> None:
    answer = _session.api(args).config_policies.get(_kind(args), _workspace_id(args))
    policies = answer.get("configPolicies") or {}
    if args.json:
        _render.print_json(policies)
    else:
        print(_render.dump_yaml(_sorted(policies)))


def set_config_policies(args: argparse.Namespace) -> None:
    try:
        with open(args.config_file) as f:
            text = f.read()
    except OSError as e:
        raise CliError(f"Error opening file: {e}") from None
    workspace_id = _workspace_id(args)
    answer = _session.api(args).config_policies.put(_kind(args), text, workspace_id)
    if workspace_id is None:
        print(f"Set global {args.workload_type} config policies:")
    else:
        print(f"Set {args.workload_type} config policies for workspace {args.workspace_name}:")
    print(_render.dump_yaml(_sorted(answer.get("configPolicies") or {})))


def delete_config_policies(args: argparse.Namespace) -> None:
    kind = _kind(args)
    workspace_id = _workspace_id(args)
    _session.api(args).config_policies.delete(kind, workspace_id)
    if workspace_id is None:
        print(f"Successfully deleted global {kind} config policies")
    else:
        print(f"Successfully deleted {kind} config policies for workspace {args.workspace_name}")


def _sorted(value: object) -> object:
    """Mappings with sorted keys (upstream prints them so)."""
    if isinstance(value, dict):
        return {k: _sorted(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_sorted(v) for v in value]
    return value


def _workload() -> Arg:
    return Arg(
        "workload_type",
        choices=["experiment", "tasks"],
        help="the type (experiment or tasks) of config policies",
    )


def _workspace(doing: str) -> Arg:
    return Arg(
        "-w",
        "--workspace-name",
        help=f"{doing} the policies of this workspace (default: the global policies)",
    )


COMMANDS = [
    Cmd(
        "config-policies cp",
        None,
        "manage config policies",
        [
            Cmd(
                "describe",
                describe_config_policies,
                "display config policies",
                [
                    _workload(),
                    _workspace("show"),
                    Group(
                        Arg("--json", action="store_true", help="print as JSON"),
                        Arg("--yaml", action="store_true", help="print as YAML (the default)"),
                    ),
                ],
                default=True,
            ),
            Cmd(
                "set",
                set_config_policies,
                "set config policies",
                [
                    _workload(),
                    Arg(
                        "config_file",
                        help="YAML or JSON file with invariant_config and/or constraints",
                    ),
                    _workspace("set"),
                ],
            ),
            Cmd(
                "delete",
                delete_config_policies,
                "delete config policies",
                [_workload(), _workspace("delete")],
            ),
        ],
    )
]
