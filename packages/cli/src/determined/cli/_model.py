"""``det model`` (alias ``m``): the model registry (models and their checkpoint versions)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from determined.cli import _render, _session
from determined.cli._declarative import Arg, Cmd
from determined.cli._errors import CliError

SORT_BY = {
    "name": "SORT_BY_NAME",
    "description": "SORT_BY_DESCRIPTION",
    "creation_time": "SORT_BY_CREATION_TIME",
    "last_updated_time": "SORT_BY_LAST_UPDATED_TIME",
}


def model_to_json(model: dict[str, Any]) -> dict[str, Any]:
    """The model fields upstream's ``--json`` output shows (snake_case, as its SDK renders them)."""
    return {
        "name": model.get("name"),
        "id": model.get("id"),
        "description": model.get("description"),
        "creation_time": model.get("creationTime"),
        "last_updated_time": model.get("lastUpdatedTime"),
        "metadata": model.get("metadata") or {},
        "archived": model.get("archived"),
    }


def render_model(model: dict[str, Any]) -> None:
    rows = [
        ("ID", model.get("id")),
        ("Name", model.get("name")),
        ("Description", model.get("description")),
        ("Workspace ID", model.get("workspaceId")),
        ("Creation Time", model.get("creationTime")),
        ("Last Updated Time", model.get("lastUpdatedTime")),
        ("Metadata", json.dumps(model.get("metadata") or {}, indent=4)),
    ]
    _render.print_table([r[0] for r in rows], [[r[1] for r in rows]])


def render_versions(versions: list[dict[str, Any]]) -> None:
    rows = []
    for version in versions:
        checkpoint = version.get("checkpoint") or {}
        training = checkpoint.get("training") or {}
        metadata = checkpoint.get("metadata") or {}
        rows.append(
            [
                version.get("version"),
                training.get("trialId"),
                metadata.get("steps_completed"),
                checkpoint.get("uuid"),
                json.dumps(training.get("validationMetrics") or {}, indent=2) if training else "",
                json.dumps(metadata, indent=2),
            ]
        )
    _render.print_table(
        [
            "Version #",
            "Trial ID",
            "Batch #",
            "Checkpoint UUID",
            "Validation Metrics",
            "Metadata",
        ],
        rows,
    )


def get_model(args: argparse.Namespace, name: str) -> dict[str, Any]:
    return dict(_session.api(args).models.get(name).get("model") or {})


def _versions(args: argparse.Namespace, name: str) -> dict[str, Any]:
    return _session.api(args).models.versions(name)


def list_models(args: argparse.Namespace) -> None:
    params: dict[str, Any] = {
        "sortBy": SORT_BY[args.sort_by],
        "orderBy": "ORDER_BY_DESC" if args.order_by == "desc" else "ORDER_BY_ASC",
    }
    if args.workspace_names:
        params["workspaceNames"] = [w for w in args.workspace_names.split(",") if w]
    models = _session.api(args).models.list(params).get("models") or []
    if args.json:
        _render.print_json([model_to_json(m) for m in models])
        return
    _render.print_table(
        ["ID", "Name", "Workspace ID", "Creation Time", "Last Updated Time", "Metadata"],
        [
            [
                m.get("id"),
                m.get("name"),
                m.get("workspaceId"),
                m.get("creationTime"),
                m.get("lastUpdatedTime"),
                json.dumps(m.get("metadata") or {}, indent=2),
            ]
            for m in models
        ],
    )


def create(args: argparse.Namespace) -> None:
    body: dict[str, Any] = {"name": args.name}
    if args.description is not None:
        body["description"] = args.description
    if args.workspace_name:
        body["workspaceName"] = args.workspace_name
    model = dict(_session.api(args).models.create(body).get("model") or {})
    if args.json:
        _render.print_json(model_to_json(model))
    else:
        render_model(model)


def describe(args: argparse.Namespace) -> None:
    model = get_model(args, args.name)
    versions = _versions(args, args.name).get("modelVersions") or []
    chosen: dict[str, Any] | None = None
    if versions:
        if args.version == -1:
            chosen = max(versions, key=lambda v: int(v.get("version") or 0))
        else:
            chosen = next((v for v in versions if int(v.get("version") or 0) == args.version), None)
            if chosen is None:
                raise CliError(f"model '{args.name}' has no version {args.version}")
    elif args.version != -1:
        raise CliError(f"model '{args.name}' has no version {args.version}")
    if args.json:
        _render.print_json(model_to_json(model))
        return
    render_model(model)
    if chosen is not None:
        print("\n")
        render_versions([chosen])


def list_versions(args: argparse.Namespace) -> None:
    answer = _versions(args, args.name)
    if args.json:
        _render.print_json(answer)
        return
    render_model(answer.get("model") or get_model(args, args.name))
    print("\n")
    render_versions(answer.get("modelVersions") or [])


def register_version(args: argparse.Namespace) -> None:
    body = {"modelName": args.name, "checkpointUuid": args.uuid}
    answer = _session.api(args).models.create_version(args.name, body)
    if args.json:
        _render.print_json(answer)
        return
    version = dict(answer.get("modelVersion") or {})
    render_model(version.get("model") or get_model(args, args.name))
    print("\n")
    render_versions([version])


def delete(args: argparse.Namespace) -> None:
    _session.api(args).models.delete(args.name)
    print(f"Deleted model '{args.name}'")


COMMANDS = [
    Cmd(
        "m|odel",
        None,
        "manage models",
        [
            Cmd(
                "list ls",
                list_models,
                "list all models in the registry",
                [
                    Arg(
                        "-w",
                        "--workspace-names",
                        help="list models in these comma-separated workspaces",
                    ),
                    Arg(
                        "--sort-by",
                        choices=list(SORT_BY),
                        default="last_updated_time",
                        help="sort models by the given field",
                    ),
                    Arg(
                        "--order-by",
                        choices=["asc", "desc"],
                        default="asc",
                        help="ascending or descending order",
                    ),
                    Arg("--json", action="store_true", help="print as JSON"),
                ],
                default=True,
            ),
            Cmd(
                "register-version",
                register_version,
                "register a checkpoint as the next version of a model",
                [
                    Arg("name", help="name of the model"),
                    Arg("uuid", help="uuid of the checkpoint to register"),
                    Arg("--json", action="store_true", help="print as JSON"),
                ],
            ),
            Cmd(
                "describe",
                describe,
                "describe model",
                [
                    Arg("name", help="name of model to describe"),
                    Arg("--json", action="store_true", help="print as JSON"),
                    Arg(
                        "--version",
                        type=int,
                        default=-1,
                        help="model version to include in the output (-1: the latest)",
                    ),
                ],
            ),
            Cmd(
                "list-versions",
                list_versions,
                "list the versions of a model",
                [
                    Arg("name", help="unique name of the model"),
                    Arg("--json", action="store_true", help="print as JSON"),
                ],
            ),
            Cmd("delete", delete, "delete model", [Arg("name", help="unique name of the model")]),
            Cmd(
                "create",
                create,
                "create model",
                [
                    Arg("name", help="unique name of the model"),
                    Arg("-w", "--workspace-name", help="workspace to create the model in"),
                    Arg("--description", help="description of the model"),
                    Arg("--json", action="store_true", help="print as JSON"),
                ],
            ),
        ],
    )
]
