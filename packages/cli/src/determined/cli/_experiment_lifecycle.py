"""``det experiment`` lifecycle commands: activate, pause, cancel, kill, (un)archive, delete, wait."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable

from determined.cli import _render, _session
from determined.cli._declarative import Arg, Cmd
from determined.cli._errors import CliError
from determined.cli._experiment_common import (
    TERMINAL,
    experiment_id_arg,
    get_experiment,
)


def _lifecycle(action: str, past: str) -> Callable[[argparse.Namespace], None]:
    def run(args: argparse.Namespace) -> None:
        _session.api(args).experiments.act(args.experiment_id, action, retry=False)
        print(f"{past} experiment {args.experiment_id}")

    run.__name__ = action
    return run


def delete(args: argparse.Namespace) -> None:
    if args.yes or _render.yes_or_no(
        "Deleting an experiment will result in the unrecoverable \n"
        "deletion of all associated logs, checkpoints, and other \n"
        "metadata associated with the experiment. For a recoverable \n"
        "alternative, see the 'det archive' command. Do you still \n"
        "wish to proceed?"
    ):
        _session.api(args).experiments.delete(args.experiment_id)
        print(f"Deletion of experiment {args.experiment_id} is in progress")
    else:
        print("Aborting experiment deletion.")


def delete_tensorboard_files(args: argparse.Namespace) -> None:
    _session.api(args).experiments.delete_tensorboard_files(args.experiment_id)


def wait(args: argparse.Namespace) -> int:
    if args.polling_interval <= 0:
        raise CliError("--polling-interval: must be > 0")
    started = time.monotonic()
    tty = sys.stderr.isatty()
    while True:
        experiment = get_experiment(args, args.experiment_id)["experiment"]
        state = experiment["state"]
        if tty:
            elapsed = int(time.monotonic() - started)
            progress = _render.format_percent(experiment.get("progress")) or "-"
            sys.stderr.write(
                f"\rExperiment {args.experiment_id}: {_render.state_name(state)} "
                f"{progress} ({elapsed // 60}m{elapsed % 60:02d}s)   "
            )
            sys.stderr.flush()
        if state in TERMINAL:
            break
        time.sleep(args.polling_interval)
    if tty:
        sys.stderr.write("\n")
    print(f"Experiment {args.experiment_id} is {_render.state_name(state)}")
    return 0 if state == "STATE_COMPLETED" else 1


ACTIVATE = Cmd(
    "activate unpause",
    _lifecycle("activate", "Activated"),
    "activate experiment, i.e., unpause a paused experiment",
    [experiment_id_arg("experiment ID to activate")],
)

CANCEL = Cmd(
    "cancel",
    _lifecycle("cancel", "Canceled"),
    "cancel experiment",
    [experiment_id_arg("experiment ID to cancel")],
)

PAUSE = Cmd(
    "pause",
    _lifecycle("pause", "Paused"),
    "pause experiment",
    [experiment_id_arg("experiment ID to pause")],
)

KILL = Cmd(
    "kill",
    _lifecycle("kill", "Killed"),
    "kill experiment",
    [experiment_id_arg()],
)

ARCHIVE = Cmd(
    "archive",
    _lifecycle("archive", "Archived"),
    "archive experiment",
    [experiment_id_arg("experiment ID to archive")],
)

UNARCHIVE = Cmd(
    "unarchive",
    _lifecycle("unarchive", "Unarchived"),
    "unarchive experiment",
    [experiment_id_arg("experiment ID to unarchive")],
)

DELETE = Cmd(
    "delete",
    delete,
    "delete experiment",
    [
        experiment_id_arg("experiment ID to delete"),
        Arg("--yes", action="store_true", help="automatically answer yes to prompts"),
    ],
)

DELETE_TB_FILES = Cmd(
    "delete-tb-files",
    delete_tensorboard_files,
    "delete TensorBoard files associated with the provided experiment ID",
    [experiment_id_arg("Experiment ID")],
)

WAIT = Cmd(
    "wait",
    wait,
    "wait for experiment to reach terminal state (exit 1 unless COMPLETED)",
    [
        experiment_id_arg(),
        Arg(
            "--polling-interval",
            type=float,
            default=5,
            help="the interval (in seconds) to poll for updated state",
        ),
    ],
)
