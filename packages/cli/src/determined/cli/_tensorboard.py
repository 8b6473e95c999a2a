"""``det tensorboard start|list|open|kill|logs|config|set priority``: TensorBoard over experiments' and trials'
event files, run by the master as a task behind its proxy (upstream's commands and messages).

``start`` waits until TensorBoard answers, prints ``Tensorboard is running at: <url>`` (the master's
``/proxy/<id>/``) and opens it in a browser unless ``--no-browser``; ``-d`` prints only the id.
Ids may be given as unique prefixes, as upstream allows.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
import webbrowser
from typing import Any

from determined import client
from determined.cli import _logs, _render, _session
from determined.cli._config_file import CONFIG_HELP, apply_overrides, parse_config, read_config_text
from determined.cli._declarative import Arg, Cmd, Group
from determined.cli._errors import CliError

HEADERS = ["ID", "Owner", "Description", "State", "Experiment IDs", "Trial IDs", "Exit Status",
           "Resource Pool"]  # fmt: skip
FIELDS = ["id", "username", "description", "state", "experimentIds", "trialIds", "exitStatus",
          "resourcePool"]  # fmt: skip
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
POLL_SECONDS = 0.25


def _config(args: argparse.Namespace) -> dict[str, Any]:
    config: dict[str, Any] = {}
    if args.config_file:
        config = parse_config(read_config_text(args.config_file), args.config_file)
    return apply_overrides(config, args.config)


def _expand(args: argparse.Namespace, prefix: str) -> str:
    """The full id of the TensorBoard whose id starts with ``prefix`` (CliError otherwise)."""
    if _UUID.match(prefix):
        return prefix
    rows = _session.api(args).tensorboards.list().get("tensorboards") or []
    ids = [str(row["id"]) for row in rows if str(row["id"]).startswith(prefix)]
    if len(ids) > 1:
        raise CliError(f"partial UUID '{prefix}' not unique")
    if not ids:
        raise CliError(f"partial UUID '{prefix}' not found")
    return ids[0]


def wait_ready(api: client.Client, tensorboard_id: str, stream: Any = None) -> dict[str, Any]:
    """Poll until the TensorBoard answers through the proxy; CliError if it ends first."""
    said_waiting = False
    while True:
        tensorboard = api.tensorboards.get(tensorboard_id)["tensorboard"]
        if tensorboard.get("isReady"):
            return dict(tensorboard)
        if tensorboard.get("state") == "STATE_TERMINATED":
            status = tensorboard.get("exitStatus") or "it exited"
            raise CliError(
                f"TensorBoard {tensorboard_id} ended before it was ready: {status} "
                f"(see `det tensorboard logs {tensorboard_id}`)"
            )
        if not said_waiting:
            print("Waiting for TensorBoard to start...", file=stream or sys.stderr, flush=True)
            said_waiting = True
        time.sleep(POLL_SECONDS)


def start(args: argparse.Namespace) -> None:
    if not (args.experiment_ids or args.trial_ids):
        raise CliError("Either experiment_ids or trial_ids must be specified.")
    files = client.read_context_dir(args.context) if args.context else None
    api = _session.api(args)
    answer = api.tensorboards.launch(
        experiment_ids=args.experiment_ids or [],
        trial_ids=args.trial_ids or [],
        config=_config(args),
        files=files,
    )
    tensorboard = answer["tensorboard"]
    if args.detach:
        print(tensorboard["id"])
        return
    print(f"Launched tensorboard (id: {tensorboard['id']}).", flush=True)
    tensorboard = wait_ready(api, tensorboard["id"])
    url = _session.master_url(args) + tensorboard["serviceAddress"]
    if not args.no_browser:
        webbrowser.open(url)
    print(_render.colored(f"Tensorboard is running at: {url}", "green"))


def open_tensorboard(args: argparse.Namespace) -> None:
    api = _session.api(args)
    tensorboard_id = _expand(args, args.tensorboard_id)
    tensorboard = api.tensorboards.get(tensorboard_id)["tensorboard"]
    if tensorboard.get("state") == "STATE_TERMINATED":
        raise CliError(f"Tensorboard {tensorboard_id} has ended")
    url = _session.master_url(args) + tensorboard["serviceAddress"]
    webbrowser.open(url)
    print(url)


def list_tensorboards(args: argparse.Namespace) -> None:
    params: dict[str, Any] = {}
    if not args.all:
        params["users"] = [_session.current_username(args)]
    rows = _session.api(args).tensorboards.list(params).get("tensorboards") or []
    if args.quiet:
        for row in rows:
            print(row["id"])
        return
    for row in rows:
        row["state"] = str(row.get("state") or "").removeprefix("STATE_")
    rows.sort(key=lambda row: str(row.get(args.sort_by) or ""), reverse=args.order_by == "desc")
    if args.json:
        _render.print_json(rows)
        return
    values = [
        [",".join(map(str, v)) if isinstance(v, list) else v for v in (r.get(f) for f in FIELDS)]
        for r in rows
    ]
    _render.print_table(HEADERS, values, as_csv=args.csv)


def kill(args: argparse.Namespace) -> None:
    api = _session.api(args)
    ids = [_expand(args, prefix) for prefix in args.tensorboard_id]
    for index, tensorboard_id in enumerate(ids):
        try:
            api.tensorboards.kill(tensorboard_id)
            print(_render.colored(f"Killed tensorboard {tensorboard_id}", "green"))
        except client.APIError as exc:
            if not args.force:
                for ignored in ids[index + 1 :]:
                    print(f"Cowardly not killing {ignored}")
                raise
            print(_render.colored(f"Skipping: {exc.message} ({type(exc).__name__})", "red"))


def set_priority(args: argparse.Namespace) -> None:
    tensorboard_id = _expand(args, args.tensorboard_id)
    _session.api(args).tensorboards.set_priority(tensorboard_id, args.priority)
    print(f"Set priority of tensorboard {tensorboard_id} to {args.priority}")


def show_config(args: argparse.Namespace) -> None:
    answer = _session.api(args).tensorboards.get(_expand(args, args.tensorboard_id))
    print(_render.dump_yaml(answer.get("config") or {}), end="")


def logs(args: argparse.Namespace) -> None:
    if args.follow and (args.head is not None or args.tail is not None):
        raise CliError("--follow cannot be combined with --head or --tail")
    limit = args.head if args.head is not None else args.tail
    if limit is not None and limit <= 0:
        return  # --head 0 / --tail 0: nothing (a limit of 0 means "all" on the wire)
    params = {
        "follow": "true" if args.follow else None,
        "limit": limit,
        "orderBy": "ORDER_BY_DESC" if args.tail is not None else None,
    }
    entries = _session.api(args).tasks.logs(_expand(args, args.task_id), params)
    if args.tail is not None:
        entries = iter(list(entries)[::-1])
    _logs.print_logs(entries, as_json=args.json)


COMMANDS = [
    Cmd("tensorboard", None, "manage TensorBoard instances", [
        Cmd("list ls", list_tensorboards, "list TensorBoard instances", [
            Arg("--sort-by", choices=[*FIELDS, "startTime"], default="startTime",
                help="sort by the given field"),
            Arg("--order-by", choices=["asc", "desc"], default="asc",
                help="order in either ascending or descending order"),
            Arg("-q", "--quiet", action="store_true", help="only display the IDs"),
            Arg("--all", "-a", action="store_true",
                help="show all TensorBoards (including other users')"),
            Group(Arg("--json", action="store_true", help="print as JSON"),
                  Arg("--csv", action="store_true", help="print as CSV")),
        ], default=True),
        Cmd("start", start, "start new TensorBoard instance", [
            Arg("experiment_ids", type=int, nargs="*",
                help="experiment IDs to load into TensorBoard (every trial of each)"),
            Arg("-t", "--trial-ids", nargs=argparse.ONE_OR_MORE, type=int,
                help="trial IDs to load into TensorBoard; at most 100 trials are allowed per "
                     "TensorBoard instance"),
            Arg("--config-file", default=None, help="command config file (.yaml)"),
            Arg("-c", "--context", default=None,
                help="context directory to upload (its startup-hook.sh runs first)"),
            Arg("--config", action="append", default=[], help=CONFIG_HELP),
            Arg("--no-browser", action="store_true",
                help="don't open TensorBoard in a browser after startup"),
            Arg("-d", "--detach", action="store_true",
                help="run in the background and print the ID"),
        ]),
        Cmd("config", show_config, "display TensorBoard config", [
            Arg("tensorboard_id", help="TensorBoard ID"),
        ]),
        Cmd("open", open_tensorboard, "open existing TensorBoard instance", [
            Arg("tensorboard_id", help="TensorBoard ID"),
        ]),
        Cmd("logs", logs, "fetch TensorBoard instance logs", [
            Arg("task_id", help="TensorBoard ID", metavar="tensorboard_id"),
            Arg("-f", "--follow", action="store_true",
                help="follow the logs of a running task, similar to tail -f"),
            Arg("--json", action="store_true", help="print the log entries as JSON"),
            Group(Arg("--head", type=int, help="number of lines to show, from the beginning"),
                  Arg("--tail", type=int, help="number of lines to show, from the end")),
        ]),
        Cmd("kill", kill, "kill TensorBoard instance", [
            Arg("tensorboard_id", help="TensorBoard ID", nargs=argparse.ONE_OR_MORE),
            Arg("-f", "--force", action="store_true", help="ignore errors"),
        ]),
        Cmd("set", None, "set TensorBoard attributes", [
            Cmd("priority", set_priority, "set TensorBoard priority", [
                Arg("tensorboard_id", help="TensorBoard ID"),
                Arg("priority", type=int, help="priority"),
            ]),
        ]),
    ]),
]  # fmt: skip
