"""``det workspace`` (alias ``w``): workspaces, as upstream's CLI names them and their flags.

A workspace is named by its name (``det w describe NAME``); ``det w create`` and ``det w edit`` set
its agent user/group (``--agent-uid/--agent-gid/--agent-user/--agent-group``), its checkpoint
storage (``--checkpoint-storage-config JSON`` or ``--checkpoint-storage-config-file YAML``; ``'{}'``
removes it) and its default pools (``--default-compute-pool``, ``--default-aux-pool``).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import yaml

from determined.cli import _render, _session
from determined.cli._declarative import Arg, Cmd, Group
from determined.cli._errors import CliError

WORKSPACE_HEADERS = [
    "ID",
    "Name",
    "# Projects",
    "Agent Uid",
    "Agent Gid",
    "Agent User",
    "Agent Group",
    "Default Compute Pool",
    "Default Aux Pool",
]
PROJECT_HEADERS = ["ID", "Key", "Name", "Description", "# Experiments", "# Active Experiments"]


def workspace_by_name(args: argparse.Namespace, name: str) -> dict[str, Any]:
    """The workspace called exactly ``name``; a one-line error when there is none."""
    workspace = _session.api(args).workspaces.by_name(name)
    if workspace is None:
        raise CliError(f'workspace "{name}" not found')
    return dict(workspace)


def _row(workspace: dict[str, Any], with_storage: bool) -> list[Any]:
    group = workspace.get("agentUserGroup") or {}
    row = [
        workspace["id"],
        workspace["name"],
        workspace.get("numProjects", 0),
        group.get("agentUid"),
        group.get("agentGid"),
        group.get("agentUser"),
        group.get("agentGroup"),
        workspace.get("defaultComputePool") or None,
        workspace.get("defaultAuxPool") or None,
    ]
    if with_storage:
        storage = workspace.get("checkpointStorageConfig")
        row.append(json.dumps(storage) if storage else None)
    return row


def _render_workspaces(workspaces: list[dict[str, Any]], *, from_list: bool = False) -> None:
    headers = WORKSPACE_HEADERS + ([] if from_list else ["Checkpoint Storage Config"])
    _render.print_table(headers, [_row(w, not from_list) for w in workspaces])


def _show(args: argparse.Namespace, workspace: dict[str, Any]) -> None:
    if args.json:
        _render.print_json(workspace)
    else:
        _render_workspaces([workspace])


def _agent_user_group(args: argparse.Namespace) -> dict[str, Any] | None:
    values = {
        "agentUid": args.agent_uid,
        "agentGid": args.agent_gid,
        "agentUser": args.agent_user,
        "agentGroup": args.agent_group,
    }
    chosen = {k: v for k, v in values.items() if v is not None}
    return chosen or None


def _checkpoint_storage(args: argparse.Namespace) -> dict[str, Any] | None:
    text, path = args.checkpoint_storage_config, args.checkpoint_storage_config_file
    if text is not None and path is not None:
        raise CliError(
            "give only one of --checkpoint-storage-config and --checkpoint-storage-config-file"
        )
    if text is not None:
        try:
            value = json.loads(text)
        except json.JSONDecodeError as e:
            raise CliError(f"--checkpoint-storage-config: invalid JSON: {e}") from None
    elif path is not None:
        try:
            with open(path) as f:
                value = yaml.safe_load(f)
        except (OSError, yaml.YAMLError) as e:
            raise CliError(f"--checkpoint-storage-config-file: {e}") from None
    else:
        return None
    if not isinstance(value, dict):
        raise CliError("the checkpoint storage config must be a mapping")
    return value


def list_workspaces(args: argparse.Namespace) -> None:
    api = _session.api(args).workspaces
    params: dict[str, Any] = {
        "sortBy": f"SORT_BY_{args.sort_by.upper()}",
        "orderBy": f"ORDER_BY_{args.order_by.upper()}",
        "limit": args.limit,
    }
    offset = args.offset or 0
    workspaces: list[dict[str, Any]] = []
    while True:
        page = api.list({**params, "offset": offset}).get("workspaces") or []
        workspaces += page
        offset += len(page)
        if args.offset is not None or len(page) < args.limit or not page:
            break
    if args.json:
        _render.print_json(workspaces)
    else:
        _render_workspaces(workspaces, from_list=True)


def list_workspace_projects(args: argparse.Namespace) -> None:
    workspace = workspace_by_name(args, args.workspace_name)
    answer = _session.api(args).workspaces.projects(int(workspace["id"]))
    projects = list(answer.get("projects") or [])
    projects.sort(key=lambda p: p[args.sort_by], reverse=args.order_by == "desc")
    offset = args.offset or 0
    projects = projects[offset : offset + args.limit]
    if args.json:
        _render.print_json(projects)
        return
    rows = [
        [
            p["id"],
            p.get("key", ""),
            p["name"],
            p.get("description", ""),
            p.get("numExperiments", 0),
            p.get("numActiveExperiments", 0),
        ]
        for p in projects
    ]
    _render.print_table(PROJECT_HEADERS, rows)


def list_pools(args: argparse.Namespace) -> None:
    workspace = workspace_by_name(args, args.workspace_name)
    pools = _session.api(args).workspaces.resource_pools(int(workspace["id"]))
    names = ", ".join(pools.get("resourcePools") or [])
    _render.print_table(["Workspace", "Available Resource Pools"], [[args.workspace_name, names]])


def list_workspace_members(args: argparse.Namespace) -> None:
    """Users and groups holding a role on the workspace, as upstream's ``list-members``."""
    workspace = workspace_by_name(args, args.workspace_name)
    answer = _session.api(args).rbac.roles_on_workspace(int(workspace["id"]))
    if args.json:
        _render.print_json(answer)
        return
    if args.yaml:
        print(_render.dump_yaml(answer), end="")
        return
    groups = {g["groupId"]: g["name"] for g in answer.get("groups") or []}
    users = {u["id"]: u["username"] for u in answer.get("usersAssignedDirectly") or []}
    rows = []
    for assignment in answer.get("assignments") or []:
        role = (assignment.get("role") or {}).get("name", "")
        for g in assignment.get("groupRoleAssignments") or []:
            rows.append([groups.get(g["groupId"], g["groupId"]), "G", role])
        for u in assignment.get("userRoleAssignments") or []:
            rows.append([users.get(u["userId"], u["userId"]), "U", role])
    _render.print_table(["User/Group Name", "User/Group", "Role Name"], rows, as_csv=args.csv)


def create_workspace(args: argparse.Namespace) -> None:
    storage = _checkpoint_storage(args)
    answer = _session.api(args).workspaces.create(
        args.name,
        agent_user_group=_agent_user_group(args),
        checkpoint_storage_config=storage or None,
        default_compute_pool=args.default_compute_pool,
        default_aux_pool=args.default_aux_pool,
    )
    _show(args, answer["workspace"])


def describe_workspace(args: argparse.Namespace) -> None:
    workspace = workspace_by_name(args, args.workspace_name)
    _show(args, _session.api(args).workspaces.get(int(workspace["id"]))["workspace"])


def edit_workspace(args: argparse.Namespace) -> None:
    storage = _checkpoint_storage(args)
    workspace = workspace_by_name(args, args.workspace_name)
    answer = _session.api(args).workspaces.patch(
        int(workspace["id"]),
        name=args.name,
        agent_user_group=_agent_user_group(args),
        checkpoint_storage_config=storage,
        default_compute_pool=args.default_compute_pool,
        default_aux_pool=args.default_aux_pool,
    )
    _show(args, answer["workspace"])


def delete_workspace(args: argparse.Namespace) -> None:
    workspace = workspace_by_name(args, args.workspace_name)
    prompt = (
        f'Deleting workspace "{args.workspace_name}" will result\n'
        "in the unrecoverable deletion of all associated projects, experiments,\n"
        "Notebooks, shells, commands, Tensorboards, and Templates.\n"
        "For a recoverable alternative, see the 'archive' command. Do you still\n"
        "wish to proceed?"
    )
    if not (args.yes or _render.yes_or_no(prompt)):
        print("Aborting workspace deletion.")
        return
    _session.api(args).workspaces.delete(int(workspace["id"]))
    print(f"Successfully deleted workspace {args.workspace_name}.")


def archive_workspace(args: argparse.Namespace) -> None:
    workspace = workspace_by_name(args, args.workspace_name)
    _session.api(args).workspaces.archive(int(workspace["id"]))
    print(f"Successfully archived workspace {args.workspace_name}.")


def unarchive_workspace(args: argparse.Namespace) -> None:
    workspace = workspace_by_name(args, args.workspace_name)
    _session.api(args).workspaces.unarchive(int(workspace["id"]))
    print(f"Successfully un-archived workspace {args.workspace_name}.")


AGENT_USER_GROUP_ARGS = [
    Arg("--agent-uid", type=int, help="UID on the agent to run tasks as"),
    Arg("--agent-user", help="user on the agent to run tasks as"),
    Arg("--agent-gid", type=int, help="GID on agent to run tasks as"),
    Arg("--agent-group", help="group on the agent to run tasks as"),
]
CHECKPOINT_STORAGE_ARGS = [
    Arg(
        "--checkpoint-storage-config",
        type=str,
        help="storage config (JSON-formatted string); '{}' removes it",
    ),
    Arg(
        "--checkpoint-storage-config-file",
        type=str,
        help="storage config (path to a YAML or JSON file)",
    ),
]
DEFAULT_POOL_ARGS = [
    Arg("--default-compute-pool", type=str, help="the workspace's default compute pool"),
    Arg("--default-aux-pool", type=str, help="the workspace's default auxiliary pool"),
]
PAGINATION = [
    Arg("--limit", type=int, default=200, help="maximum items per page of results"),
    Arg("--offset", type=int, default=None, help="number of items to skip"),
]
SORT_ORDER = [
    Arg("--sort-by", type=str, choices=["id", "name"], default="id", help="sort by this field"),
    Arg(
        "--order-by",
        type=str,
        choices=["asc", "desc"],
        default="asc",
        help="ascending or descending order",
    ),
]
JSON = Arg("--json", action="store_true", help="print as JSON")
NAME = Arg("workspace_name", type=str, help="name of the workspace")

COMMANDS = [
    Cmd(
        "w|orkspace",
        None,
        "manage workspaces",
        [
            Cmd(
                "list ls",
                list_workspaces,
                "list all workspaces",
                [*SORT_ORDER, *PAGINATION, JSON],
                default=True,
            ),
            Cmd(
                "list-projects",
                list_workspace_projects,
                "list the projects associated with a workspace",
                [NAME, *SORT_ORDER, *PAGINATION, JSON],
            ),
            Cmd(
                "list-pools",
                list_pools,
                "list the resource pools available to a workspace",
                [NAME],
            ),
            Cmd(
                "list-members",
                list_workspace_members,
                "list users/user-groups members of a workspace and their roles",
                [
                    NAME,
                    Group(
                        JSON,
                        Arg("--yaml", action="store_true", help="print as YAML"),
                        Arg("--csv", action="store_true", help="print as CSV"),
                    ),
                ],
            ),
            Cmd(
                "create",
                create_workspace,
                "create workspace",
                [
                    Arg("name", type=str, help="unique name of the workspace"),
                    *AGENT_USER_GROUP_ARGS,
                    *CHECKPOINT_STORAGE_ARGS,
                    *DEFAULT_POOL_ARGS,
                    JSON,
                ],
            ),
            Cmd(
                "delete",
                delete_workspace,
                "delete workspace",
                [
                    NAME,
                    Arg(
                        "--yes",
                        action="store_true",
                        default=False,
                        help="automatically answer yes to prompts",
                    ),
                ],
            ),
            Cmd("describe", describe_workspace, "describe workspace", [NAME, JSON]),
            Cmd(
                "edit",
                edit_workspace,
                "edit workspace",
                [
                    Arg("workspace_name", type=str, help="current name of the workspace"),
                    Arg("--name", type=str, help="new name of the workspace"),
                    *AGENT_USER_GROUP_ARGS,
                    *CHECKPOINT_STORAGE_ARGS,
                    *DEFAULT_POOL_ARGS,
                    JSON,
                ],
            ),
            Cmd("archive", archive_workspace, "archive workspace", [NAME]),
            Cmd("unarchive", unarchive_workspace, "unarchive workspace", [NAME]),
        ],
    )
]
