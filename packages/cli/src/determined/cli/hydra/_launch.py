"""``det-cli launch``: compose an experiment config with Hydra and submit it to the master.

``det-cli launch --config-dir conf searcher=adaptive hyperparameters.lr.maxval=0.1`` composes
``conf/config.yaml`` with the overrides (see :mod:`determined.cli.hydra._compose`), uploads the
context directory and creates the experiment. The context directory defaults to the parent of the
config directory: an app keeps ``conf/`` next to its training script, so ``--config-dir app/conf``
uploads ``app/``.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time
from collections.abc import Sequence
from typing import Any

import yaml

from determined.cli.hydra._compose import (
    DEFAULT_CONFIG_NAME,
    ComposeError,
    compose_experiment_config,
)

PROG = "det-cli launch"
DEFAULT_CONFIG_DIR = "conf"
POLL_S = 0.2


class LaunchError(Exception):
    """A user-facing failure: printed as one line, exit status 1."""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``det-cli launch``."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description=(
            "Compose an experiment config from a Hydra config directory and create the "
            "experiment. Overrides work as in any Hydra app: key=value, group=option, "
            "+new.key=value, ~key."
        ),
    )
    parser.add_argument(
        "overrides", nargs="*", metavar="OVERRIDE", help="Hydra overrides of the composed config"
    )
    parser.add_argument(
        "-cd",
        "--config-dir",
        default=DEFAULT_CONFIG_DIR,
        help="the Hydra config directory (default: ./conf)",
    )
    parser.add_argument(
        "-cn",
        "--config-name",
        default=DEFAULT_CONFIG_NAME,
        help="the primary config in the config directory (default: config)",
    )
    parser.add_argument(
        "--context",
        default=None,
        help="the model definition directory to upload (default: the config directory's parent)",
    )
    parser.add_argument(
        "-i",
        "--include",
        action="append",
        default=[],
        help="a file or directory to add to the context (repeatable)",
    )
    parser.add_argument("-m", "--master", default=None, help="master address (or $DET_MASTER)")
    parser.add_argument("-u", "--user", default=None, help="user to act as (or $DET_USER)")
    parser.add_argument(
        "--project_id", "--project-id", dest="project_id", type=int, help="project to create in"
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print the composed experiment config as YAML and submit nothing",
    )
    parser.add_argument(
        "--paused", action="store_true", help="create the experiment without starting it"
    )
    parser.add_argument(
        "-f", "--follow", action="store_true", help="stream the first trial's logs until it ends"
    )
    return parser


def _submit(args: argparse.Namespace, config: dict[str, Any], context: pathlib.Path) -> int:
    from determined import client

    url = client.master_address(args.master)
    try:
        session = client.login(url, args.user)
        created = client.create_experiment(
            session,
            config,
            context,
            includes=args.include,
            activate=not args.paused,
            project_id=args.project_id,
        )
    except client.MasterNotFoundError:
        raise LaunchError(
            f"no master at {url} — start one with `det-master up` or `det deploy local cluster-up`"
        ) from None
    except client.UnauthenticatedError as exc:
        raise LaunchError(
            f"cannot log in to {url} ({exc.message}): log in with `det -m {url} user login`"
        ) from None
    except client.APIError as exc:
        message = " ".join(line.strip() for line in exc.message.splitlines() if line.strip())
        raise LaunchError(f"the master refused the experiment: {message}") from None
    except ValueError as exc:  # the context directory: missing, too large, clashing includes
        raise LaunchError(str(exc)) from None
    for warning in created.config_warnings:
        print(f"warning: {warning}", file=sys.stderr)
    print(f"Created experiment {created.id}")
    sys.stdout.flush()
    if args.follow and created.id is not None:
        follow_first_trial(session, created.id)
    return 0


def follow_first_trial(session: Any, experiment_id: int) -> None:
    """Print the first trial's logs as they arrive, until the trial ends (as ``det e create -f``)."""
    from determined import client

    api = client.Client(session)
    print("Waiting for first trial to begin...")
    sys.stdout.flush()
    while True:
        trials = api.experiments.trials(experiment_id).get("trials") or []
        if trials:
            break
        time.sleep(POLL_S)
    trial_id = min(int(trial["id"]) for trial in trials)
    print(f"Following first trial with ID {trial_id}")
    sys.stdout.flush()
    try:
        for entry in api.trials.logs(trial_id, {"follow": "true"}):
            message = str(entry.get("message") or entry.get("log") or "")
            sys.stdout.write(message if message.endswith("\n") else message + "\n")
            sys.stdout.flush()
    finally:
        print(
            f"Trial log stream ended. To reopen log stream, run: det trial logs -f {trial_id}",
            file=sys.stderr,
        )


def launch_main(argv: Sequence[str]) -> int:
    """Run ``det-cli launch ARGV``; return the exit status (user errors: one line, status 1)."""
    parser = build_parser()
    try:
        args = parser.parse_intermixed_args(list(argv))
    except SystemExit as exc:  # --help, or argparse's own usage error (status 2)
        return int(exc.code or 0)
    try:
        config_dir = pathlib.Path(args.config_dir).expanduser()
        if not config_dir.is_dir():
            raise LaunchError(
                f"--config-dir: {args.config_dir!r} is not a directory (a Hydra config directory "
                f"with {args.config_name}.yaml)"
            )
        config = compose_experiment_config(config_dir, args.config_name, args.overrides)
        if args.dry_run:
            sys.stdout.write(yaml.safe_dump(config, sort_keys=False))
            return 0
        context = pathlib.Path(args.context) if args.context else config_dir.resolve().parent
        if not context.is_dir():
            raise LaunchError(f"--context: {args.context!r} is not a directory")
        return _submit(args, config, context)
    except (ComposeError, LaunchError) as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
