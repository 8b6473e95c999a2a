"""``det user-group ...`` and ``det rbac ...``: user groups, the built-in roles and role
assignments, with upstream Determined's command names, arguments and messages."""

from __future__ import annotations

import argparse
from typing import Any

from determined import client
from determined.cli import _render, _session
from determined.cli._declarative import Arg, Cmd
from determined.cli._errors import CliError

_PAGE = [
    Arg("--limit", type=int, default=200, help="maximum items per page of results"),
    Arg("--offset", type=int, default=0, help="number of items to skip"),
]


# ---- name lookups ---------------------------------------------------------------------------------


def usernames_to_user_ids(api: client.Client, usernames: list[str]) -> list[int]:
    """User ids of usernames, in order; one error naming every unknown username."""
    by_name = {u["username"]: int(u["id"]) for u in api.users.list().get("users") or []}
    missing = [n for n in usernames if n not in by_name]
    if missing:
        raise CliError(f"could not find users for usernames {', '.join(missing)}")
    return [by_name[n] for n in usernames]


def group_name_to_group_id(api: client.Client, group_name: str) -> int:
    groups = api.groups.search(name=group_name, limit=1).get("groups") or []
    if len(groups) != 1:
        raise CliError(f"could not find user group name {group_name}")
    return int(groups[0]["group"]["groupId"])


def role_name_to_role_id(api: client.Client, role_name: str) -> int:
    for role in api.rbac.list_roles().get("roles") or []:
        if role["name"] == role_name:
            return int(role["roleId"])
    raise CliError(f"could not find role name {role_name}")


def _workspaces(api: client.Client) -> dict[int, str]:
    workspaces = getattr(api, "workspaces", None)
    if workspaces is None:
        return {}
    try:
        answer = workspaces.list()
    except client.NotFoundError:
        return {}
    return {int(w["id"]): str(w["name"]) for w in answer.get("workspaces") or []}


def workspace_name_to_id(api: client.Client, name: str) -> int:
    for workspace_id, workspace_name in _workspaces(api).items():
        if workspace_name == name:
            return workspace_id
    raise CliError(f'workspace "{name}" not found')


# ---- det user-group -------------------------------------------------------------------------------


def create_group(args: argparse.Namespace) -> None:
    api = _session.api(args)
    members = usernames_to_user_ids(api, args.add_user)
    group = api.groups.create(args.group_name, members)["group"]
    print(f"user group with name {group['name']} and ID {group['groupId']} created")
    if group.get("users"):
        print(f"{', '.join(u['username'] for u in group['users'])} was added to the group")


def list_groups(args: argparse.Namespace) -> None:
    api = _session.api(args)
    user_id = None
    if args.groups_user_belongs_to:
        user_id = usernames_to_user_ids(api, [args.groups_user_belongs_to])[0]
    answer = api.groups.search(user_id=user_id, offset=args.offset, limit=args.limit)
    if args.json:
        _render.print_json(answer)
        return
    rows = [
        [g["group"]["groupId"], g["group"]["name"], g.get("numMembers", 0)]
        for g in answer.get("groups") or []
    ]
    _render.print_table(["Group ID", "Name", "Num Members"], rows)


def describe_group(args: argparse.Namespace) -> None:
    api = _session.api(args)
    group = api.groups.get(group_name_to_group_id(api, args.group_name))["group"]
    if args.json:
        _render.print_json(group)
        return
    print(f"group ID {group['groupId']} group name {group['name']} with users added")
    rows = [
        [u["id"], u["username"], u.get("displayName", ""), u["admin"], u["active"]]
        for u in group.get("users") or []
    ]
    _render.print_table(["ID", "Username", "Display Name", "Admin", "Active"], rows)


def _change_members(args: argparse.Namespace, adding: bool) -> None:
    api = _session.api(args)
    usernames = [u for u in args.usernames.split(",") if u]
    group_id = group_name_to_group_id(api, args.group_name)
    user_ids = usernames_to_user_ids(api, usernames)
    if adding:
        group = api.groups.update(group_id, add_users=user_ids)["group"]
    else:
        group = api.groups.update(group_id, remove_users=user_ids)["group"]
    print(f"user group with ID {group['groupId']} name {group['name']}")
    verb = "added to group" if adding else "removed from the group"
    for user_id, username in zip(user_ids, usernames, strict=True):
        print(f"user {verb} with username {username} and ID {user_id}")


def add_user(args: argparse.Namespace) -> None:
    _change_members(args, adding=True)


def remove_user(args: argparse.Namespace) -> None:
    _change_members(args, adding=False)


def change_group_name(args: argparse.Namespace) -> None:
    api = _session.api(args)
    group_id = group_name_to_group_id(api, args.old_group_name)
    group = api.groups.update(group_id, name=args.new_group_name)["group"]
    print(
        f"user group with ID {group['groupId']} name changed from "
        f"{args.old_group_name} to {group['name']}"
    )


def delete_group(args: argparse.Namespace) -> None:
    if not args.yes and not _render.yes_or_no(
        "Deleting a group will result in an unrecoverable \n"
        "deletion of the group along with all the membership  \n"
        "information of the group. Do you still wish to proceed? \n"
    ):
        print("Skipping group deletion.")
        return
    api = _session.api(args)
    group_id = group_name_to_group_id(api, args.group_name)
    api.groups.delete(group_id)
    print(f"user group with name {args.group_name} and ID {group_id} deleted")


# ---- det rbac -------------------------------------------------------------------------------------


def _permission_rows(permissions: list[dict[str, Any]]) -> list[list[Any]]:
    return [
        [p["id"], p["name"], not (p.get("scopeTypeMask") or {}).get("workspace", True)]
        for p in permissions
    ]


_PERMISSION_HEADERS = ["ID", "Name", "Is Global"]


def my_permissions(args: argparse.Namespace) -> None:
    api = _session.api(args)
    answer = api.rbac.permissions_summary()
    if args.json:
        _render.print_json(answer)
        return
    perms_of = {r["roleId"]: r.get("permissions") or [] for r in answer.get("roles") or []}
    scopes: dict[int, dict[str, dict[str, Any]]] = {}
    for a in answer.get("assignments") or []:
        targets = ([0] if a.get("scopeCluster") else []) + list(a.get("scopeWorkspaceIds") or [])
        for wid in targets:
            for p in perms_of.get(a["roleId"], []):
                scopes.setdefault(wid, {})[p["id"]] = p
    if not scopes:
        print("no permissions assigned")
        return
    names = _workspaces(api) if any(scopes) else {}
    for wid in sorted(scopes):
        if wid == 0:
            print("global permissions assigned")
        else:
            name = names.get(wid, str(wid))
            print(f"permissions assigned over workspace '{name}' with ID '{wid}'")
        _render.print_table(_PERMISSION_HEADERS, _permission_rows(list(scopes[wid].values())))
        print()


def list_roles(args: argparse.Namespace) -> None:
    api = _session.api(args)
    workspace_id = 1 if args.exclude_global_roles else None
    answer = api.rbac.roles_assignable(workspace_id, offset=args.offset, limit=args.limit)
    if args.json:
        _render.print_json(answer)
        return
    roles = answer.get("roles") or []
    if not roles:
        print("no roles found")
        return
    for role in roles:
        print(f"role '{role['name']}' with ID {role['roleId']} with permissions")
        _render.print_table(_PERMISSION_HEADERS, _permission_rows(role.get("permissions") or []))
        print()


def list_users_roles(args: argparse.Namespace) -> None:
    api = _session.api(args)
    user_id = usernames_to_user_ids(api, [args.username])[0]
    answer = api.rbac.roles_of_user(user_id)
    if args.json:
        _render.print_json(answer)
        return
    roles = answer.get("roles") or []
    if not roles:
        print("user has no role assignments")
        return
    _render.print_table(
        ["Role ID", "Name"], [[r["role"]["roleId"], r["role"]["name"]] for r in roles]
    )


def list_groups_roles(args: argparse.Namespace) -> None:
    api = _session.api(args)
    answer = api.rbac.roles_of_group(group_name_to_group_id(api, args.group_name))
    if args.json:
        _render.print_json(answer)
        return
    roles = answer.get("roles") or []
    if not roles:
        print("group has no role assignments")
        return
    _render.print_table(["Role ID", "Name"], [[r["roleId"], r["name"]] for r in roles])


def describe_role(args: argparse.Namespace) -> None:
    api = _session.api(args)
    found = api.rbac.roles_by_ids([role_name_to_role_id(api, args.role_name)])["roles"][0]
    if args.json:
        _render.print_json(found)
        return
    role = found["role"]
    print(f"role '{role['name']}' with ID {role['roleId']} with permissions")
    _render.print_table(_PERMISSION_HEADERS, _permission_rows(role.get("permissions") or []))
    print()
    names = _workspaces(api)
    groups = found.get("groupRoleAssignments") or []
    if not groups:
        print("role is not assigned to any group")
    else:
        print("role is assigned to groups")
        rows = []
        for g in groups:
            wid = g["roleAssignment"].get("scopeWorkspaceId")
            name = api.groups.get(g["groupId"])["group"]["name"]
            rows.append([g["groupId"], name, wid, names.get(wid) if wid else None, wid is None])
        headers = ["Group ID", "Group Name", "Workspace ID", "Workspace Name", "Assigned Globally"]
        _render.print_table(headers, rows)
        print()
    users = found.get("userRoleAssignments") or []
    if not users:
        print("role is not assigned to any users")
    else:
        print("role is assigned to users")
        rows = []
        for u in users:
            wid = u["roleAssignment"].get("scopeWorkspaceId")
            name = api.users.get(u["userId"])["user"]["username"]
            rows.append([u["userId"], name, wid, names.get(wid) if wid else None, wid is None])
        headers = ["User ID", "Username", "Workspace ID", "Workspace Name", "Assigned Globally"]
        _render.print_table(headers, rows)
        print()


def _assignment_target(args: argparse.Namespace) -> tuple[client.Client, dict[str, Any], str]:
    if (args.username_to_assign is None) == (args.group_name_to_assign is None):
        raise CliError("must provide exactly one of --username-to-assign or --group-name-to-assign")
    api = _session.api(args)
    role_id = role_name_to_role_id(api, args.role_name)
    workspace_id = None
    if args.workspace_name is not None:
        workspace_id = workspace_name_to_id(api, args.workspace_name)
    target: dict[str, Any] = {"workspace_id": workspace_id}
    if args.username_to_assign is not None:
        target["user_id"] = usernames_to_user_ids(api, [args.username_to_assign])[0]
        who = f"user '{args.username_to_assign}' with ID {target['user_id']}"
    else:
        target["group_id"] = group_name_to_group_id(api, args.group_name_to_assign)
        who = f"group '{args.group_name_to_assign}' with ID {target['group_id']}"
    return api, {"role_id": role_id, **target}, who


def assign_role(args: argparse.Namespace) -> None:
    api, target, who = _assignment_target(args)
    role_id = target.pop("role_id")
    api.rbac.assign(role_id, **target)
    scope = f" to workspace {args.workspace_name}" if args.workspace_name else " globally"
    print(f"assigned role '{args.role_name}' with ID {role_id} to {who}{scope}")


def unassign_role(args: argparse.Namespace) -> None:
    api, target, who = _assignment_target(args)
    role_id = target.pop("role_id")
    api.rbac.unassign(role_id, **target)
    scope = f" to workspace {args.workspace_name}" if args.workspace_name else " globally"
    print(f"removed role '{args.role_name}' with ID {role_id} from {who}{scope}")


_JSON = Arg("--json", action="store_true", help="print as JSON")


def _assign_args(verb: str) -> list[Arg]:
    return [
        Arg("role_name", help=f"name of role to {verb}"),
        Arg("--workspace-name", default=None, help="name of the workspace of the assignment"),
        Arg("--username-to-assign", default=None, help="username of the assignment"),
        Arg("--group-name-to-assign", default=None, help="name of the group of the assignment"),
    ]


COMMANDS = [
    Cmd(
        "user-group",
        None,
        "manage user groups",
        [
            Cmd(
                "create",
                create_group,
                "create a user group",
                [
                    Arg("group_name", help="name of user group to be created"),
                    Arg("--add-user", action="append", default=[], help="username to add"),
                ],
            ),
            Cmd(
                "delete",
                delete_group,
                "delete a user group",
                [
                    Arg("group_name", help="name of user group to be deleted"),
                    Arg("--yes", action="store_true", help="skip prompt asking for confirmation"),
                ],
            ),
            Cmd(
                "list ls",
                list_groups,
                "list user groups",
                [
                    *_PAGE,
                    Arg("--groups-user-belongs-to", help="list groups that the username is in"),
                    _JSON,
                ],
                default=True,
            ),
            Cmd(
                "describe",
                describe_group,
                "describe a user group",
                [Arg("group_name", help="name of user group to describe"), _JSON],
            ),
            Cmd(
                "add-user",
                add_user,
                "add users to a group",
                [
                    Arg("group_name", help="name of user group to add users to"),
                    Arg("usernames", help="a comma separated list of usernames"),
                ],
            ),
            Cmd(
                "remove-user",
                remove_user,
                "remove user from a group",
                [
                    Arg("group_name", help="name of user group to remove users from"),
                    Arg("usernames", help="a comma separated list of usernames"),
                ],
            ),
            Cmd(
                "change-name",
                change_group_name,
                "change name of a user group",
                [
                    Arg("old_group_name", help="name of user group to be updated"),
                    Arg("new_group_name", help="name of user group to change to"),
                ],
            ),
        ],
    ),
    Cmd(
        "rbac",
        None,
        "manage roles based access controls",
        [
            Cmd("my-permissions", my_permissions, "list permissions the current user has", [_JSON]),
            Cmd(
                "list-roles",
                list_roles,
                "list roles",
                [
                    Arg(
                        "--exclude-global-roles",
                        action="store_true",
                        help="Ignore roles with global permissions",
                    ),
                    _JSON,
                    *_PAGE,
                ],
                default=True,
            ),
            Cmd(
                "list-users-roles",
                list_users_roles,
                "list user's roles",
                [Arg("username", help="username of user to list role's assigned to"), _JSON],
            ),
            Cmd(
                "list-groups-roles",
                list_groups_roles,
                "list group's roles",
                [Arg("group_name", help="name of the group to list assigned roles of"), _JSON],
            ),
            Cmd(
                "describe-role",
                describe_role,
                "describe a role",
                [Arg("role_name", help="name of role to describe"), _JSON],
            ),
            Cmd(
                "assign-role",
                assign_role,
                "assign a role to a user or group",
                _assign_args("assign"),
            ),
            Cmd(
                "unassign-role",
                unassign_role,
                "unassign a role from a user or group",
                _assign_args("unassign"),
            ),
        ],
    ),
]
