"""``det experiment create`` and ``continue``: submit an experiment and follow its first trial."""

from __future__ import annotations

import argparse
import pathlib
import sys
import time
from typing import Any

from determined import client
from determined.cli import _experiment_test_mode, _local_master, _render, _session, _tunnel
from determined.cli._config_file import (
    CONFIG_HELP,
    apply_overrides,
    parse_config,
    read_config_text,
)
from determined.cli._declarative import Arg, Cmd, Group
from determined.cli._errors import CliError
from determined.cli._experiment_common import (
    TERMINAL,
    experiment_id_arg,
    get_experiment,
    get_trials,
)
from determined.cli._logs import show_trial_logs

WARNING_MESSAGES = {
    "LAUNCH_WARNING_CURRENT_SLOTS_EXCEEDED": (
        "Warning: The requested job requires more slots than currently available. "
        "You may need to increase cluster resources in order for the job to run."
    ),
}


def _context_files(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The context directory and includes as upstream's File list, refused when too large."""
    model_def = args.model_def
    includes = list(args.include)
    if model_def is not None and not pathlib.Path(model_def).exists():
        raise CliError(f"model definition directory '{model_def}' does not exist")
    if model_def is not None and not pathlib.Path(model_def).is_dir():
        # a single file is a context of that one file, as upstream allows
        includes.insert(0, model_def)
        model_def = None
    for include in includes:
        if not pathlib.Path(include).exists():
            raise CliError(f"include '{include}' does not exist")
    try:
        files = client.read_context_dir(model_def, includes)
    except client.ContextTooLargeError as exc:
        named = ", ".join(f"{path} ({_render.sizeof_fmt(size)})" for path, size in exc.sizes[:5])
        raise CliError(
            f"the context is {_render.sizeof_fmt(exc.size)}, over the "
            f"{_render.sizeof_fmt(exc.limit)} limit; biggest files: {named}. "
            "List files to leave out in a .detignore file"
        ) from None
    except ValueError as exc:
        raise CliError(str(exc)) from None
    total = sum(len(f.get("content") or "") * 3 // 4 for f in files)
    count = sum(1 for f in files if f.get("type") == ord("0"))
    print(f"Preparing files to send to master... {_render.sizeof_fmt(total)} and {count} files")
    return files


def _print_warnings(created: client.CreatedExperiment) -> None:
    for warning in created.warnings:
        text = WARNING_MESSAGES.get(str(warning), f"Warning: {warning}")
        print(_render.colored(text, "yellow", sys.stderr), file=sys.stderr)
    for warning in created.config_warnings:
        print(_render.colored(f"Warning: {warning}", "yellow", sys.stderr), file=sys.stderr)


def follow_first_trial(args: argparse.Namespace, experiment_id: int) -> None:
    """Wait for the experiment's first trial and stream its logs until it ends."""
    print("Waiting for first trial to begin...")
    sys.stdout.flush()
    delay = 0.1
    while True:
        trials = get_trials(args, experiment_id)
        if trials:
            break
        state = get_experiment(args, experiment_id)["experiment"]["state"]
        if state in TERMINAL:
            raise CliError(
                f"experiment {experiment_id} ended ({_render.state_name(state)}) "
                "before any trial started"
            )
        time.sleep(delay)
        delay = min(delay * 1.5, 1.0)
    first = int(trials[0]["id"])
    print(f"Following first trial with ID {first}")
    sys.stdout.flush()
    follow = argparse.Namespace(follow=True, json=False)
    show_trial_logs(_session.setup_session(args), first, follow)


def create(args: argparse.Namespace) -> None:
    text = read_config_text(args.config_file)
    config = parse_config(text, args.config_file)
    if args.config:
        # Re-serialising drops the file's comments, so only do it when there are overrides.
        config = apply_overrides(config, args.config)
        text = _render.dump_yaml(config)
    if args.local and args.paused:
        raise CliError("--local runs the experiment now: --paused cannot be used with it")
    files = _context_files(args)
    if args.local:
        with _local_master.local_master() as session:
            args._session = session
            args.master = session.master_url
            _submit(args, text, config, files)
    else:
        _submit(args, text, config, files)


def _submit(
    args: argparse.Namespace, text: str, config: dict[str, Any], files: list[dict[str, Any]]
) -> None:
    if args.test_mode:
        _experiment_test_mode.run_test(args, config, files)
        return
    created = client.create_experiment(
        _session.setup_session(args),
        text,
        files,
        activate=not args.paused,
        project_id=args.project_id,
        template=args.template,
    )
    assert created.id is not None
    experiment_id = created.id
    print(f"Created experiment {experiment_id}")
    sys.stdout.flush()
    _print_warnings(created)
    if args.local:
        # Nothing outlives this command's master: follow the trial, then wait for the end.
        follow_first_trial(args, experiment_id)
        _wait_local_end(args, experiment_id)
    elif args.follow_first_trial and not args.paused and getattr(args, "publish", None):
        _follow_published(args, experiment_id)
    elif args.follow_first_trial and not args.paused:
        follow_first_trial(args, experiment_id)


def _follow_published(args: argparse.Namespace, experiment_id: int) -> None:
    """``-f -p PORT``: follow the first trial with its proxy ports served on local ports."""
    try:
        ports = _tunnel.parse_publish(args.publish)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    session = _session.setup_session(args)
    task_id = _tunnel.first_trial_task(lambda: get_trials(args, experiment_id))
    listeners = [_tunnel.Listener(f"{task_id}:{remote}", local) for local, remote in ports.items()]
    with _tunnel.listening(session.master_url, session.token, listeners, session.cert):
        follow_first_trial(args, experiment_id)


def _wait_local_end(args: argparse.Namespace, experiment_id: int) -> None:
    """Wait until the local experiment ends; an error unless it completed."""
    delay = 0.1
    while True:
        state = get_experiment(args, experiment_id)["experiment"]["state"]
        if state in TERMINAL:
            break
        time.sleep(delay)
        delay = min(delay * 1.5, 1.0)
    print(f"Experiment {experiment_id} ended {_render.state_name(state)}")
    if state != "STATE_COMPLETED":
        raise CliError(f"the local experiment {experiment_id} ended {_render.state_name(state)}")


def continue_experiment(args: argparse.Namespace) -> None:
    if args.config_file:
        config = parse_config(read_config_text(args.config_file), args.config_file)
        config = apply_overrides(config, args.config)
    else:
        config = apply_overrides({}, args.config)
    override = _render.dump_yaml(config) if config else ""
    _session.api(args).experiments.continue_experiment(args.experiment_id, override)
    print(f"Continued experiment {args.experiment_id}")
    if args.follow_first_trial:
        follow_first_trial(args, args.experiment_id)


CREATE = Cmd(
    "create",
    create,
    "create experiment",
    [
        Arg("config_file", help="experiment config file (.yaml)"),
        Arg(
            "model_def",
            nargs="?",
            default=None,
            help="directory containing the model definition (the context)",
        ),
        Arg(
            "-i",
            "--include",
            action="append",
            default=[],
            help="additional files or directories to copy into the context",
        ),
        Arg(
            "--local",
            action="store_true",
            help="run the experiment on this machine instead of submitting it to a master: "
            "a det master is started for this command (needs det-master installed) and stopped "
            "when the experiment ends; with --test, runs the test experiment there",
        ),
        Arg("--project_id", type=int, help="place this experiment inside this project"),
        Arg("--template", help="name of template to apply to the experiment configuration"),
        Arg("--config", action="append", default=[], help=CONFIG_HELP),
        Arg(
            "-p",
            "--publish",
            action="append",
            default=[],
            help="with -f: serve a proxy port of the first trial on a local port "
            "(PORT or LOCAL:TRIAL; environment.proxy_ports with proxy_tcp)",
        ),
        Group(
            Arg(
                "-f",
                "--follow-first-trial",
                action="store_true",
                help="follow the logs of the first trial that is created",
            ),
            Arg("--paused", action="store_true", help="do not activate the experiment"),
            Arg(
                "-t",
                "--test-mode",
                "--test",
                dest="test_mode",
                action="store_true",
                help="test the experiment configuration and model definition with a very small "
                "experiment: one trial trains (one batch where the config sets the searcher's "
                "length), validates and checkpoints, then restarts from its checkpoint; the test "
                "experiment is archived when it passes",
            ),
        ),
    ],
)

CONTINUE = Cmd(
    "continue",
    continue_experiment,
    "resume or recover training for a single-searcher experiment",
    [
        experiment_id_arg("experiment ID to continue"),
        Arg("--config-file", help="experiment config file (.yaml) with overrides"),
        Arg("--config", action="append", default=[], help=CONFIG_HELP),
        Arg(
            "-f",
            "--follow-first-trial",
            action="store_true",
            help="follow logs of the trial that is being continued",
        ),
    ],
)
