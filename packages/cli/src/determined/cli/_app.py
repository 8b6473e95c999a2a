"""The ``det`` program: global flags, the command tree, and turning failures into one line.

Every command handler takes the parsed arguments and returns ``None`` (exit 0) or an exit code.
Errors never reach the user as a traceback: a user mistake raises ``CliError``; the master's
refusals (``APIError``), an unreachable master and a refused login are each printed as one line on
stderr with exit status 1. ``DET_DEBUG=1`` adds the traceback for unexpected failures.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Sequence
from typing import Any

from determined import client
from determined.cli import (
    _agent,
    _checkpoint,
    _command,
    _config_policies,
    _deploy,
    _experiment,
    _job,
    _master,
    _model,
    _notebook,
    _project,
    _rbac,
    _render,
    _resources,
    _session,
    _task,
    _template,
    _tensorboard,
    _token,
    _trial,
    _user,
    _webhook,
    _workspace,
)
from determined.cli._config_file import parse_config, read_config_text
from determined.cli._declarative import Arg, Cmd, Node, add_nodes
from determined.cli._errors import CliError
from determined.cli._version import COMMANDS as VERSION_COMMANDS


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("det-cli")
    except Exception:
        import determined

        return str(determined.__version__)


def _render_search_summary(answer: dict[str, Any]) -> str:
    summary = answer.get("summary") or {}
    searcher = {k: v for k, v in (summary.get("config") or {}).items() if v is not None}
    lines = [_render.colored("Using search configuration:", "green"), _render.dump_yaml(searcher)]
    rows = []
    for item in summary.get("trials") or []:
        unit = item.get("unit") or {}
        if unit.get("maxLength"):
            text = "train to completion"
        elif unit.get("upTo"):  # pbt, plugin searchers: the search decides how far
            text = f"train for up to {unit.get('value')} {unit.get('name')}"
        else:
            text = f"train for {unit.get('value')} {unit.get('name')}"
        rows.append([item.get("count"), text])
    lines.append(_render.table(["Trials", "Training Time"], rows))
    return "\n".join(lines)


def preview_search(args: argparse.Namespace) -> None:
    config = parse_config(read_config_text(args.config_file), args.config_file)
    if "searcher" not in config:
        raise CliError("Missing 'searcher' config section in experiment config.")
    answer = _session.api(args).experiments.preview_hp_search(config)
    print(_render_search_summary(answer))


GLOBAL_ARGS: list[Node] = [
    Arg("-u", "--user", metavar="username", default=None, help="run as the given user"),
    Arg(
        "-m",
        "--master",
        metavar="address",
        default=None,
        help="master address ($DET_MASTER, else localhost:8080)",
    ),
    Arg(
        "-v",
        "--version",
        action="version",
        version=f"%(prog)s {_version()}",
        help="print CLI version and exit",
    ),
    Cmd(
        "preview-search",
        preview_search,
        "preview search",
        [Arg("config_file", help="experiment config file (.yaml)")],
    ),
]

COMMANDS: list[Node] = [
    *GLOBAL_ARGS,
    *_experiment.COMMANDS,
    *_trial.COMMANDS,
    *_checkpoint.COMMANDS,
    *_model.COMMANDS,
    *_user.COMMANDS,
    *_master.COMMANDS,
    *_token.COMMANDS,
    *_deploy.COMMANDS,
    *VERSION_COMMANDS,
    *_job.COMMANDS,
    *_agent.COMMANDS,
    *_resources.COMMANDS,
    *_task.COMMANDS,
    *_command.COMMANDS,
    *_tensorboard.COMMANDS,
    *_notebook.COMMANDS,
    *_project.COMMANDS,
    *_template.COMMANDS,
    *_config_policies.COMMANDS,
    *_rbac.COMMANDS,
    *_workspace.COMMANDS,
    *_webhook.COMMANDS,
]


def make_parser(prog: str = "det", extra: Sequence[Node] = ()) -> argparse.ArgumentParser:
    """The full ``det`` argument parser (``extra`` adds commands, e.g. ``det-cli``'s)."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description="det command-line client (Determined-compatible)",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    add_nodes(parser, [*COMMANDS, *extra])
    return parser


def _fail(message: str, code: int = 1) -> int:
    print(_render.colored(message, "red", sys.stderr), file=sys.stderr)
    return code


def _launch(args: argparse.Namespace) -> int:
    """``det-cli [-m M] [-u U] launch ...``: hand over to the Hydra entry point."""
    from determined.cli.hydra import launch_main

    forwarded = []
    if args.master:
        forwarded += ["-m", args.master]
    if args.user:
        forwarded += ["-u", args.user]
    return int(launch_main([*forwarded, *args.launch_args]))


LAUNCH = Cmd(
    "launch",
    _launch,
    "compose an experiment from a Hydra config directory and submit it (det-cli launch --help)",
    [Arg("launch_args", nargs=argparse.REMAINDER, help="det-cli launch's own arguments")],
)
"""``det-cli``'s extra command (``det-cli launch ...`` itself goes straight to Hydra)."""


def run(argv: Sequence[str] | None = None, prog: str = "det", extra: Sequence[Node] = ()) -> int:
    """Parse ``argv`` and run the command; return the exit status (never raises for user errors)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = make_parser(prog, extra)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version and usage errors
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_usage(sys.stderr)
        return _fail(f"{prog}: no subcommand specified", 2)
    action = getattr(args, "action_help", None) or "run the command"
    try:
        result = func(args)
    except CliError as exc:
        return _fail(exc.message, exc.exit_code)
    except client.MasterNotFoundError:
        url = _session.master_url(args)
        return _fail(
            f"no master at {url} — start one with `det-master up` or `det deploy local cluster-up`"
        )
    except client.UnauthenticatedError as exc:
        return _fail(
            f"Failed to {action}: not logged in ({exc.message}); log in with `det user login`"
        )
    except client.ForbiddenError as exc:
        return _fail(f"Failed to {action}: forbidden: {exc.message}")
    except client.APIError as exc:
        return _fail(f"Failed to {action}: {exc.message}")
    except KeyboardInterrupt:
        return _fail("Interrupting...", 3)
    except BrokenPipeError:
        # the reader went away (`det e list | head`): stop quietly
        try:
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - keep interpreter shutdown quiet
        except OSError:
            pass
        return 0
    except Exception as exc:
        if os.environ.get("DET_DEBUG", "").lower() in ("1", "true", "yes"):
            traceback.print_exc()
        return _fail(
            f"Failed to {action}: {type(exc).__name__}: {exc} (DET_DEBUG=1 shows the traceback)"
        )
    finally:
        session = getattr(args, "_session", None)
        if session is not None:
            session.close()
    return int(result) if isinstance(result, int) else 0
