"""``det project`` (alias ``p``): projects of a workspace, as upstream's CLI names them.

Every subcommand names a project by its workspace's name and its own (``det p describe WS NAME``);
``det experiment move EXP WS NAME`` moves an experiment into one.
"""

from __future__ import annotations

import argparse
from typing import Any

from determined.cli import _render, _session
from determined.cli._declarative import Arg, Cmd
from determined.cli._errors import CliError
from determined.cli._experiment_common import experiment_id_arg

PROJECT_HEADERS = ["ID", "Key", "Name", "Description", "# Experiments", "# Active Experiments"]
EXPERIMENT_HEADERS = [
    "ID",
    "Owner",
    "Name",
    "Parent ID",
    "State",
    "Progress",
    "Started",
    "Ended",
    "Resource Pool",
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
NAMES = [
    Arg("workspace_name", type=str, help="name of the workspace"),
    Arg("project_name", type=str, help="name of the project"),
]
JSON = Arg("--json", action="store_true", help="print as JSON")
ALL = Arg(
    "--all",
    "-a",
    action="store_true",
    default=False,
    help="show all experiments (including archived and other users')",
)


def workspace_by_name(args: argparse.Namespace, name: str) -> dict[str, Any]:
    """The workspace called ``name``; a one-line error when there is none."""
    found = _session.api(args).workspaces.list({"name": name}).get("workspaces") or []
    matching = [w for w in found if w.get("name") == name]
    if not matching:
        raise CliError(f'Failed to get workspace "{name}": not found')
    return dict(matching[0])


def project_by_name(
    args: argparse.Namespace, workspace_name: str, project_name: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(workspace, project) named so; a one-line error when either is missing."""
    workspace = workspace_by_name(args, workspace_name)
    answer = _session.api(args).workspaces.projects(int(workspace["id"]), {"name": project_name})
    matching = [p for p in answer.get("projects") or [] if p.get("name") == project_name]
    if not matching:
        raise CliError(
            f'Failed to get project "{project_name}" in workspace "{workspace_name}": not found'
        )
    return workspace, dict(matching[0])


def _project_row(project: dict[str, Any]) -> list[Any]:
    return [
        project.get("id"),
        project.get("key"),
        project.get("name"),
        project.get("description"),
        project.get("numExperiments"),
        project.get("numActiveExperiments"),
    ]


def render_project(project: dict[str, Any]) -> None:
    _render.print_table(PROJECT_HEADERS, [_project_row(project)])


def list_projects(args: argparse.Namespace) -> None:
    workspace = workspace_by_name(args, args.workspace_name)
    answer = _session.api(args).workspaces.projects(
        int(workspace["id"]),
        {
            "sortBy": f"SORT_BY_{args.sort_by.upper()}",
            "orderBy": f"ORDER_BY_{args.order_by.upper()}",
        },
    )
    projects = list(answer.get("projects") or [])
    offset = args.offset or 0
    projects = projects[offset : offset + args.limit]
    if args.json:
        _render.print_json(projects)
    else:
        _render.print_table(PROJECT_HEADERS, [_project_row(p) for p in projects])


def _experiments(args: argparse.Namespace, project_id: int) -> list[dict[str, Any]]:
    params: dict[str, Any] = {
        "projectId": project_id,
        "orderBy": f"ORDER_BY_{getattr(args, 'order_by', 'asc').upper()}",
        "sortBy": f"SORT_BY_{getattr(args, 'sort_by', 'id').upper()}",
    }
    if not args.all:
        params["users"] = [_session.current_username(args)]
        params["archived"] = "false"
    offset = getattr(args, "offset", None) or 0
    limit = getattr(args, "limit", 200)
    found: list[dict[str, Any]] = []
    while True:
        page = (
            _session.api(args)
            .experiments.list({**params, "offset": offset, "limit": limit})
            .get("experiments")
            or []
        )
        found.extend(page)
        offset += len(page)
        if getattr(args, "offset", None) or len(page) < limit:
            return found


def render_experiments(args: argparse.Namespace, experiments: list[dict[str, Any]]) -> None:
    headers = list(EXPERIMENT_HEADERS) + (["Archived"] if args.all else [])
    rows = []
    for e in experiments:
        row = [
            e.get("id"),
            e.get("username"),
            e.get("name"),
            e.get("forkedFrom"),
            _render.state_name(e.get("state")),
            _render.format_percent(e.get("progress")),
            _render.format_time(e.get("startTime")),
            _render.format_time(e.get("endTime")),
            e.get("resourcePool"),
        ]
        if args.all:
            row.append(e.get("archived"))
        rows.append(row)
    _render.print_table(headers, rows)


def list_experiments(args: argparse.Namespace) -> None:
    _, project = project_by_name(args, args.workspace_name, args.project_name)
    experiments = _experiments(args, int(project["id"]))
    if args.json:
        _render.print_json(experiments)
    else:
        render_experiments(args, experiments)


def create(args: argparse.Namespace) -> None:
    workspace = workspace_by_name(args, args.workspace_name)
    project = _session.api(args).projects.create(
        int(workspace["id"]), args.name, description=args.description, key=args.key
    )["project"]
    if args.json:
        _render.print_json(project)
    else:
        render_project(project)


def describe(args: argparse.Namespace) -> None:
    _, project = project_by_name(args, args.workspace_name, args.project_name)
    if args.json:
        _render.print_json(project)
        return
    render_project(project)
    print("\nAssociated Experiments")
    render_experiments(args, _experiments(args, int(project["id"])))


def delete(args: argparse.Namespace) -> None:
    _, project = project_by_name(args, args.workspace_name, args.project_name)
    if args.yes or _render.yes_or_no(
        f'Deleting project "{args.project_name}" will result in the \n'
        "unrecoverable deletion of this project and all of its experiments and notes.\n"
        "For a recoverable alternative, see the 'archive' command. Do you still \n"
        "wish to proceed?"
    ):
        _session.api(args).projects.delete(int(project["id"]))
        print(f"Successfully deleted project {args.project_name}.")
    else:
        print("Aborting project deletion.")


def edit(args: argparse.Namespace) -> None:
    _, project = project_by_name(args, args.workspace_name, args.project_name)
    if args.new_name is None and args.description is None and args.key is None:
        raise CliError("nothing to change: pass --new_name, --description or --key")
    updated = _session.api(args).projects.patch(
        int(project["id"]), name=args.new_name, description=args.description, key=args.key
    )["project"]
    if args.json:
        _render.print_json(updated)
    else:
        render_project(updated)


def archive(args: argparse.Namespace) -> None:
    _, project = project_by_name(args, args.workspace_name, args.project_name)
    _session.api(args).projects.archive(int(project["id"]))
    print(f"Successfully archived project {args.project_name}.")


def unarchive(args: argparse.Namespace) -> None:
    _, project = project_by_name(args, args.workspace_name, args.project_name)
    _session.api(args).projects.unarchive(int(project["id"]))
    print(f"Successfully un-archived project {args.project_name}.")


def move_experiment(args: argparse.Namespace) -> None:
    """``det experiment move EXP_ID WORKSPACE PROJECT``."""
    _, project = project_by_name(args, args.workspace_name, args.project_name)
    _session.api(args).projects.move_experiment(args.experiment_id, int(project["id"]))
    print(f'Moved experiment {args.experiment_id} to project "{args.project_name}"')


MOVE_EXPERIMENT = Cmd(
    "move",
    move_experiment,
    "move experiment to another project",
    [
        experiment_id_arg("experiment ID to move"),
        Arg("workspace_name", help="name of destination workspace"),
        Arg("project_name", help="name of destination project"),
    ],
)
"""``det experiment move`` (listed under ``det experiment``)."""

COMMANDS = [
    Cmd(
        "p|roject",
        None,
        "manage projects",
        [
            Cmd(
                "list ls",
                list_projects,
                "list the projects associated with a workspace",
                [NAMES[0], *SORT_ORDER, *PAGINATION, JSON],
            ),
            Cmd(
                "list-experiments",
                list_experiments,
                "list the experiments associated with a project",
                [*NAMES, ALL, *SORT_ORDER, *PAGINATION, JSON],
            ),
            Cmd(
                "create",
                create,
                "create project",
                [
                    NAMES[0],
                    Arg("name", type=str, help="name of the project"),
                    Arg("--description", type=str, help="description of the project"),
                    Arg("--key", type=str, help="key of the project"),
                    JSON,
                ],
            ),
            Cmd(
                "delete",
                delete,
                "delete project",
                [
                    *NAMES,
                    Arg(
                        "--yes",
                        action="store_true",
                        default=False,
                        help="automatically answer yes to prompts",
                    ),
                ],
            ),
            Cmd("archive", archive, "archive project", NAMES),
            Cmd("unarchive", unarchive, "unarchive project", NAMES),
            Cmd("describe", describe, "describe project", [*NAMES, ALL, JSON]),
            Cmd(
                "edit",
                edit,
                "edit project",
                [
                    Arg("workspace_name", type=str, help="current name of the workspace"),
                    NAMES[1],
                    Arg("--new_name", type=str, help="new name of the project"),
                    Arg("--description", type=str, help="description of the project"),
                    Arg("--key", type=str, help="key of the project"),
                    JSON,
                ],
            ),
        ],
    )
]
"""``det project`` and its subcommands."""
