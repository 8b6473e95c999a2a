"""``det template`` (alias ``tpl``): config templates kept by the master, merged under an
experiment's config by ``det experiment create --template NAME``."""

from __future__ import annotations

import argparse
from typing import Any

import yaml

from determined import client
from determined.cli import _render, _session
from determined.cli._declarative import Arg, Cmd
from determined.cli._errors import CliError


def _workspace_names(args: argparse.Namespace) -> dict[int, str]:
    """Workspace id -> name, for the template listing."""
    answer = _session.api(args).workspaces.list()
    return {int(w["id"]): str(w["name"]) for w in answer.get("workspaces") or []}


def _workspace_id(args: argparse.Namespace) -> int | None:
    """The id of ``--workspace-name`` (None when not given); archived workspaces are refused."""
    name = getattr(args, "workspace_name", None)
    if not name:
        return None
    workspace = _session.api(args).workspaces.by_name(name)
    if workspace is None:
        raise CliError(f"workspace '{name}' not found")
    if workspace.get("archived"):
        raise CliError(f'Workspace "{name}" is archived.')
    return int(workspace["id"])


def _read_config(args: argparse.Namespace) -> dict[str, Any]:
    with args.template_file as f:
        text = f.read()
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise CliError(f"{args.template_file.name}: invalid YAML: {e}") from None
    if config is None:
        config = {}
    if not isinstance(config, dict):
        raise CliError(f"{args.template_file.name}: a template must be a YAML mapping")
    return config


def _dump(config: Any) -> str:
    return str(yaml.safe_dump(config, default_flow_style=False))


def list_templates(args: argparse.Namespace) -> None:
    templates = _session.api(args).templates.list().get("templates") or []
    names = _workspace_names(args)
    rows = []
    for template in templates:
        workspace = names.get(int(template.get("workspaceId") or 0), "missing workspace")
        row = [template["name"], workspace]
        if args.details:
            row.append(_dump(template.get("config") or {}))
        rows.append(row)
    headers = ["Name", "Workspace"] + (["Config"] if args.details else [])
    _render.print_table(headers, rows)


def describe_template(args: argparse.Namespace) -> None:
    template = _session.api(args).templates.get(args.template_name)["template"]
    print(_dump(template.get("config") or {}), end="")


def set_template(args: argparse.Namespace) -> None:
    """Create the template, or replace the config of the one with that name (upstream's ``set``)."""
    config = _read_config(args)
    templates = _session.api(args).templates
    try:
        templates.get(args.template_name)
    except client.NotFoundError:
        templates.create(args.template_name, config)
    else:
        templates.set_config(args.template_name, config)
    print(_render.colored(f"Set template {args.template_name}", "green"))


def create_template(args: argparse.Namespace) -> None:
    config = _read_config(args)
    _session.api(args).templates.create(args.template_name, config, _workspace_id(args))
    print(_render.colored(f"Created template {args.template_name}", "green"))


def set_template_config(args: argparse.Namespace) -> None:
    config = _read_config(args)
    _session.api(args).templates.set_config(args.template_name, config)
    print(_render.colored(f"Updated template {args.template_name}", "green"))


def remove_template(args: argparse.Namespace) -> None:
    _session.api(args).templates.delete(args.template_name)
    print(_render.colored(f"Removed template {args.template_name}", "green"))


def _name_and_file() -> list[Arg]:
    return [
        Arg("template_name", help="template name"),
        Arg("template_file", type=argparse.FileType("r"), help="config template file (.yaml)"),
    ]


COMMANDS = [
    Cmd(
        "template tpl",
        None,
        "manage config templates",
        [
            Cmd(
                "list ls",
                list_templates,
                "list config templates",
                [
                    Arg(
                        "-d",
                        "--details",
                        action="store_true",
                        help="show the configs of the templates",
                    )
                ],
                default=True,
            ),
            Cmd("set", set_template, "set config template", _name_and_file()),
            Cmd(
                "set-value",
                None,
                "set template attributes",
                [Cmd("config", set_template_config, "update config template", _name_and_file())],
            ),
            Cmd(
                "describe",
                describe_template,
                "describe config template",
                [Arg("template_name", help="template name")],
            ),
            Cmd(
                "create",
                create_template,
                "create config template",
                [
                    *_name_and_file(),
                    Arg("-w", "--workspace-name", help="workspace name"),
                ],
            ),
            Cmd(
                "remove rm",
                remove_template,
                "remove config template",
                [Arg("template_name", help="template name")],
            ),
        ],
    )
]
