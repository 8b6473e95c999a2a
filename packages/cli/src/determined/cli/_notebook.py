"""``det notebook start|list|open|kill|logs|config``: JupyterLab run by the master as a task behind its
authenticated proxy, with upstream's names, flags and messages.

``start`` uploads the context directory (it becomes the notebook's working directory), waits until
JupyterLab answers, prints ``Jupyter Notebook is running at: <url>`` (under the master's
``/proxy/<id>/``) and opens it in a browser unless ``--no-browser``; ``-d`` prints only the id.
The notebook is killed after its config's ``idle_timeout`` (see docs/tasks.md). Ids may be unique
prefixes, as upstream allows.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time
import webbrowser
from typing import Any

from determined import client
from determined.cli import _render, _session
from determined.cli._config_file import CONFIG_HELP, apply_overrides, parse_config, read_config_text
from determined.cli._declarative import Arg, Cmd, Group
from determined.cli._errors import CliError
from determined.cli._task import TASK_LOG_ARGS, expand_ids, list_ntsc, show_task_logs

POLL_SECONDS = 0.25
CONTEXT_HELP = (
    "a directory whose contents become the notebook's working directory (not the directory "
    "itself); at most 95 MB, .detignore leaves files out"
)


def notebook_config(args: argparse.Namespace) -> dict[str, Any]:
    """The notebook config of ``--config-file`` with the ``--config`` overrides (and upstream's
    ``-v`` bind mounts, kept for scripts)."""
    config: dict[str, Any] = {}
    if args.config_file:
        config = parse_config(read_config_text(args.config_file), args.config_file)
    config = apply_overrides(config, args.config)
    for volume in args.volume or []:
        host, sep, container = volume.partition(":")
        if not sep or not host or not container:
            raise CliError(f"--volume {volume!r}: expected <host path>:<container path>")
        config.setdefault("bind_mounts", []).append(
            {"host_path": host, "container_path": container}
        )
    return config


def _ids(args: argparse.Namespace, prefixes: list[str]) -> list[str]:
    api = _session.api(args)
    return expand_ids(prefixes, lambda: [str(n["id"]) for n in api.notebooks.list()["notebooks"]])


def wait_ready(api: client.Client, notebook_id: str) -> dict[str, Any]:
    """Poll until JupyterLab answers through the proxy; CliError if the notebook ends first."""
    said_waiting = False
    while True:
        notebook = api.notebooks.get(notebook_id)["notebook"]
        if notebook.get("isReady"):
            return dict(notebook)
        if notebook.get("state") == "STATE_TERMINATED":
            status = notebook.get("exitStatus") or "it exited"
            raise CliError(
                f"notebook {notebook_id} ended before it was ready: {status} "
                f"(see `det notebook logs {notebook_id}`)"
            )
        if not said_waiting:
            print("Waiting for the notebook to start...", file=sys.stderr, flush=True)
            said_waiting = True
        time.sleep(POLL_SECONDS)


def start(args: argparse.Namespace) -> None:
    config = notebook_config(args)
    try:
        files = client.read_context_dir(args.context, list(args.include or []))
    except client.ContextTooLargeError as exc:
        raise CliError(str(exc)) from None
    except ValueError as exc:
        raise CliError(str(exc)) from None
    api = _session.api(args)
    if args.preview:
        answer = api.notebooks.launch(config=config, files=files, preview=True)
        print(_render.dump_yaml(answer.get("config") or {}), end="")
        return
    notebook = api.notebooks.launch(config=config, files=files)["notebook"]
    if args.detach:
        print(notebook["id"])
        return
    print(f"Launched notebook (id: {notebook['id']}).", flush=True)
    notebook = wait_ready(api, notebook["id"])
    url = _session.master_url(args) + notebook["serviceAddress"]
    if not args.no_browser:
        webbrowser.open(url)
    print(_render.colored(f"Jupyter Notebook is running at: {url}", "green"))


def open_notebook(args: argparse.Namespace) -> None:
    (notebook_id,) = _ids(args, [args.notebook_id])
    notebook = _session.api(args).notebooks.get(notebook_id)["notebook"]
    if notebook.get("state") == "STATE_TERMINATED":
        raise CliError(f"Notebook {notebook_id} has ended")
    url = _session.master_url(args) + notebook["serviceAddress"]
    webbrowser.open(url)
    print(url)


def list_notebooks(args: argparse.Namespace) -> None:
    params: dict[str, Any] = {}
    if not args.all:
        params["users"] = [_session.current_username(args)]
    list_ntsc(args, _session.api(args).notebooks.list(params).get("notebooks") or [])


def show_config(args: argparse.Namespace) -> None:
    (notebook_id,) = _ids(args, [args.notebook_id])
    config = _session.api(args).notebooks.get(notebook_id).get("config") or {}
    print(_render.dump_yaml(config), end="")


def notebook_logs(args: argparse.Namespace) -> None:
    (task_id,) = _ids(args, [args.task_id])
    show_task_logs(_session.setup_session(args), task_id, args)


def kill(args: argparse.Namespace) -> None:
    ids = _ids(args, list(args.notebook_id))
    api = _session.api(args)
    for index, notebook_id in enumerate(ids):
        try:
            api.notebooks.kill(notebook_id)
            print(_render.colored(f"Killed notebook {notebook_id}", "green"))
        except client.APIError as exc:
            if not args.force:
                for ignored in ids[index + 1 :]:
                    print(f"Cowardly not killing {ignored}")
                raise
            print(_render.colored(f"Skipping: {exc} ({type(exc).__name__})", "red"))


COMMANDS: list[Any] = [
    Cmd("notebook", None, "manage notebooks", [
        Cmd("list ls", list_notebooks, "list notebooks", [
            Arg("--sort-by", choices=["id", "username", "description", "state", "startTime"],
                default="startTime", help="sort by the given field"),
            Arg("--order-by", choices=["asc", "desc"], default="asc", help="sort order"),
            Arg("-q", "--quiet", action="store_true", help="only display the IDs"),
            Arg("--all", "-a", action="store_true",
                help="show all notebooks (including other users')"),
            Group(Arg("--json", action="store_true", help="print as JSON"),
                  Arg("--csv", action="store_true", help="print as CSV")),
        ], default=True),
        Cmd("config", show_config, "display notebook config", [
            Arg("notebook_id", help="notebook ID"),
        ]),
        Cmd("start", start, "start a new notebook", [
            Arg("--config-file", default=None, help="command config file (.yaml)"),
            Arg("-v", "--volume", action="append", default=[],
                help="host:container bind mount (kept in the config; no containers in det, so "
                     "it has no effect)"),
            Arg("-c", "--context", default=None, type=pathlib.Path, help=CONTEXT_HELP),
            Arg("-i", "--include", default=[], action="append", type=pathlib.Path,
                help="a file or directory to copy into the working directory under its own name"),
            Arg("--config", action="append", default=[], help=CONFIG_HELP),
            Arg("--no-browser", action="store_true",
                help="don't open the notebook in a browser after startup"),
            Arg("-d", "--detach", action="store_true",
                help="run in the background and print the ID"),
            Arg("--preview", action="store_true", help="preview the notebook configuration"),
        ]),
        Cmd("open", open_notebook, "open an existing notebook", [
            Arg("notebook_id", help="notebook ID"),
        ]),
        Cmd("logs", notebook_logs, "fetch notebook logs", [
            Arg("task_id", help="notebook ID", metavar="notebook_id"), *TASK_LOG_ARGS,
        ]),
        Cmd("kill", kill, "kill a notebook", [
            Arg("notebook_id", help="notebook ID", nargs=argparse.ONE_OR_MORE),
            Arg("-f", "--force", action="store_true", help="ignore errors"),
        ]),
    ]),
]  # fmt: skip
