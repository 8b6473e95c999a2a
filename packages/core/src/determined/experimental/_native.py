"""The Native API: one call that trains a Trial class here, or submits it to a master.

Upstream's ``det.experimental.create`` (0.12; removed in 0.18) switched between local and cluster
training with one argument. det keeps that promise and builds it on the pieces that exist anyway:

- ``Mode.LOCAL`` runs the Trial class in this process through the ``det_trial_runner`` hook (the
  same runner the master uses), with hyperparameters drawn from the config the way a searcher would
  and a Core API context that stays off-cluster. ``test=True`` shortens training to one batch,
  followed by the final validation and checkpoint.
- ``Mode.CLUSTER`` uploads the context directory and creates an experiment whose entrypoint is the
  class itself (``module:Class``, run by ``python -m determined.launch.trial``) when its module lives
  in the context directory, or else this script with its arguments; then it prints the experiment id
  and ends the script with ``sys.exit(0)``, as upstream did, so the rest of the script runs only
  where the training runs.
- Inside a trial that the master started from such a script, ``create`` trains the class right there
  (re-executing the script under the runner's distributed launcher for multi-slot trials) and ends
  the script the same way.

:func:`init` does the same for a plain training script (Core API, ``det.pytorch.Trainer``, Keras's
``DeterminedCallback``): it submits the script itself in ``Mode.CLUSTER`` and returns a
:class:`NativeContext` (hyperparameters, config) wherever the script should train.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import logging
import os
import pathlib
import shlex
import sys
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, NoReturn

import yaml

import determined as det

logger = logging.getLogger("determined.experimental")

ConfigArg = Mapping[str, Any] | str | os.PathLike[str] | None


class Mode(enum.Enum):
    """Where :func:`create` and :func:`init` train."""

    CLUSTER = "cluster"
    """Submit an experiment to the master, then end the script."""
    LOCAL = "local"
    """Train in this process, with no master."""


@dataclasses.dataclass(frozen=True)
class NativeContext:
    """What a script learns from :func:`init` where it trains.

    Attributes:
        mode: the mode the script was started in.
        config: the experiment config (with det's defaults filled in).
        hparams: this trial's hyperparameters (drawn from the config off-cluster).
        cluster_info: the trial's ClusterInfo on a master, ``None`` off-cluster.
    """

    mode: Mode
    config: dict[str, Any]
    hparams: dict[str, Any]
    cluster_info: det.ClusterInfo | None


def _mode(mode: Mode | str | bool, local: bool | None) -> Mode:
    if local is not None:  # upstream 0.12.5-0.17: create(..., local=True, test=True)
        return Mode.LOCAL if local else Mode.CLUSTER
    if isinstance(mode, bool):  # the third positional argument was `local` in those versions
        return Mode.LOCAL if mode else Mode.CLUSTER
    try:
        return Mode(mode.value if isinstance(mode, Mode) else str(mode).lower())
    except ValueError:
        raise ValueError(f"mode: expected Mode.LOCAL or Mode.CLUSTER, got {mode!r}") from None


def _load_config(config: ConfigArg) -> dict[str, Any]:
    """A config mapping, YAML file path or YAML text, as a dict."""
    if config is None:
        return {}
    if isinstance(config, Mapping):
        return dict(config)
    text = str(config)
    if os.path.isfile(text):
        text = pathlib.Path(text).read_text()
    loaded = yaml.safe_load(text)
    if not isinstance(loaded, dict):
        raise ValueError(f"config: expected a mapping, a YAML file or YAML text, got {config!r}")
    return loaded


def _trial_info() -> det.ClusterInfo | None:
    info = det.get_cluster_info()
    return info if info is not None and info.task_type == "TRIAL" else None


# ---- local runs -----------------------------------------------------------------------------------


def _test_config(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` shortened to one batch of training, then the final validation and checkpoint."""
    config = dict(config)
    searcher = dict(config.get("searcher") or {})
    searcher["max_length"] = {"batches": 1}
    config["searcher"] = searcher
    config["scheduling_unit"] = 1
    config["min_validation_period"] = {"batches": 0}
    config["min_checkpoint_period"] = {"batches": 0}
    return config


def _local_trial(
    config: Mapping[str, Any], test: bool, latest_checkpoint: str | None = None
) -> tuple[dict[str, Any], det.ClusterInfo]:
    """Validate ``config`` and describe one trial of it, the way the master would."""
    from determined.config import validate_experiment_config
    from determined.core._context import default_local_storage_path
    from determined.searcher import RandomState, new_create, sample_hparams

    defaults = {
        "checkpoint_storage": {"type": "shared_fs", "host_path": str(default_local_storage_path())}
    }
    validated = validate_experiment_config(config, defaults=defaults, require_entrypoint=False)
    full = _test_config(validated.config) if test else validated.config
    seed = int((full.get("reproducibility") or {}).get("experiment_seed") or 0)
    rng = RandomState(seed)
    hparams = sample_hparams(full.get("hyperparameters") or {}, rng)
    trial_seed = new_create(rng, hparams).trial_seed
    info = det.ClusterInfo(
        master_url="http://127.0.0.1:1",  # never contacted: core.init() stays off-cluster
        cluster_id="local",
        agent_id="local",
        slot_ids=[],
        task_id="local",
        allocation_id="local",
        session_token="",
        task_type="TRIAL",
        latest_checkpoint=latest_checkpoint,
        trial_info=det.TrialInfo(
            trial_id=0,
            experiment_id=0,
            trial_seed=trial_seed,
            hparams=hparams,
            config=full,
            steps_completed=0,
            trial_run_id=0,
            debug=bool(full.get("debug")),
            inter_node_network_interface=None,
        ),
    )
    return full, info


@contextlib.contextmanager
def _inside(context_dir: str | os.PathLike[str]) -> Iterator[None]:
    """Run with ``context_dir`` as the working directory and first on ``sys.path``."""
    if not context_dir:
        yield
        return
    path = pathlib.Path(context_dir).resolve()
    if not path.is_dir():
        raise ValueError(f"context_dir: {context_dir!r} is not a directory")
    previous = os.getcwd()
    sys.path.insert(0, str(path))
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(previous)
        with contextlib.suppress(ValueError):
            sys.path.remove(str(path))


def _run_local(
    trial_def: type,
    config: dict[str, Any],
    context_dir: str | os.PathLike[str],
    test: bool,
    latest_checkpoint: str | None,
) -> None:
    from determined.core import _hooks

    runner = _hooks.trial_runner(trial_def)
    _, info = _local_trial(config, test, latest_checkpoint)
    logger.info(
        "training %s locally%s with hyperparameters %s",
        trial_def.__qualname__,
        " (test mode: one batch)" if test else "",
        info.trial.hparams,
    )
    with _inside(context_dir):
        runner.run(trial_def, info)
    if test:
        logger.info("the test run passed; train on a master by changing mode to Mode.CLUSTER")


# ---- on a master ----------------------------------------------------------------------------------


def _run_in_trial(trial_def: type, info: det.ClusterInfo) -> NoReturn:
    """Train ``trial_def`` as the trial this process is (the script was the entrypoint); exit 0."""
    from determined.core import _hooks
    from determined.launch import trial as launch_trial

    runner = _hooks.trial_runner(trial_def)
    under_launcher = os.environ.get(launch_trial.UNDER_LAUNCHER_ENV) == "1" or "RANK" in os.environ
    if runner.launcher and launch_trial._slots(info) > 1 and not under_launcher:
        env = dict(os.environ, **{launch_trial.UNDER_LAUNCHER_ENV: "1"})
        cmd = [sys.executable, "-m", runner.launcher, sys.executable, *sys.argv]
        logger.info("multi-slot trial: running under %s", runner.launcher)
        os.execvpe(cmd[0], cmd, env)
    runner.run(trial_def, info)
    sys.exit(0)


# ---- submission -----------------------------------------------------------------------------------


def _script_command(context: pathlib.Path) -> str:
    """``python3 <this script relative to the context dir> <its arguments>``."""
    script = sys.argv[0] if sys.argv else ""
    if not script or script == "-c" or not os.path.isfile(script):
        raise ValueError(
            "command: required when not running a script (a notebook, python -c): give the "
            "entrypoint, e.g. command=['train.py', '--epochs', '3']"
        )
    path = pathlib.Path(script).resolve()
    try:
        relative = path.relative_to(context)
    except ValueError:
        raise ValueError(
            f"context_dir: the script {path} is not inside the context directory {context}; "
            "the master runs it from there"
        ) from None
    return shlex.join(["python3", relative.as_posix(), *sys.argv[1:]])


def _class_entrypoint(trial_def: type, context: pathlib.Path) -> str | None:
    """``module:Class`` when ``trial_def`` is importable from the context directory; else None."""
    module_name = trial_def.__module__
    module = sys.modules.get(module_name)
    file = getattr(module, "__file__", None)
    if module_name == "__main__" or not file or "<locals>" in trial_def.__qualname__:
        return None
    expected = context.joinpath(*module_name.split("."))
    candidates = (expected.with_suffix(".py"), expected / "__init__.py")
    if pathlib.Path(file).resolve() not in candidates:
        return None
    return f"{module_name}:{trial_def.__qualname__}"


def _command_string(command: str | Sequence[str]) -> str:
    if isinstance(command, str):
        return command
    argv = [str(part) for part in command]
    if not argv:
        raise ValueError("command: must not be empty")
    if argv[0].endswith(".py"):  # upstream's form: the script and its arguments
        argv = ["python3", *argv]
    return shlex.join(argv)


def _submit(
    config: dict[str, Any],
    context_dir: str | os.PathLike[str],
    entrypoint: str,
    master_url: str | None,
) -> NoReturn:
    from determined import client

    config = {**config, "entrypoint": entrypoint}
    session = client.login(master_url)
    created = client.create_experiment(session, config, context_dir)
    for warning in created.config_warnings:
        logger.warning("config: %s", warning)
    print(f"Created experiment {created.id}", flush=True)
    sys.exit(0)


def _context_path(context_dir: str | os.PathLike[str]) -> pathlib.Path:
    if not context_dir:
        raise ValueError(
            "context_dir: required in Mode.CLUSTER (the directory uploaded to the master, "
            "e.g. context_dir='.')"
        )
    path = pathlib.Path(context_dir).resolve()
    if not path.is_dir():
        raise ValueError(f"context_dir: {context_dir!r} is not a directory")
    return path


# ---- the API --------------------------------------------------------------------------------------


def create(
    trial_def: type,
    config: ConfigArg = None,
    mode: Mode | str | bool = Mode.CLUSTER,
    context_dir: str | os.PathLike[str] = "",
    command: str | Sequence[str] | None = None,
    master_url: str | None = None,
    *,
    local: bool | None = None,
    test: bool = False,
    latest_checkpoint: str | None = None,
) -> None:
    """Train a Trial class locally or as an experiment on a master; one argument picks which.

    Args:
        trial_def: a Trial class (PyTorchTrial, TFKerasTrial, EstimatorTrial, ...) of an installed
            det plugin.
        config: the experiment config: a mapping, a YAML file path or YAML text. It needs a
            ``searcher`` with a training length (``max_length``, or ``max_time`` for ASHA).
        mode: ``Mode.LOCAL`` trains here and returns; ``Mode.CLUSTER`` submits and ends the script.
        context_dir: the directory uploaded to the master (required in ``Mode.CLUSTER``); in
            ``Mode.LOCAL`` training runs with it as the working directory.
        command: the entrypoint to submit instead of the default (the class as ``module:Class``
            when its module is in ``context_dir``, else this script with its arguments); a string
            or upstream's list form ``["train.py", "--flag", "value"]``.
        master_url: the master (default ``$DET_MASTER``, else ``localhost:8080``).
        local: upstream 0.12.5-0.17's switch; overrides ``mode`` when given.
        test: train one batch, then validate and checkpoint (a quick check, locally or on a master).
        latest_checkpoint: ``Mode.LOCAL`` only: a checkpoint UUID in the config's checkpoint storage
            to resume from.

    Raises:
        ValueError: a bad argument or config, naming it.
    """
    if not isinstance(trial_def, type):
        raise TypeError(f"trial_def: expected a Trial class, got {trial_def!r}")
    info = _trial_info()
    if info is not None:
        _run_in_trial(trial_def, info)
    chosen = _mode(mode, local)
    loaded = _load_config(config)
    if chosen is Mode.LOCAL:
        _run_local(trial_def, loaded, context_dir, test, latest_checkpoint)
        return
    if latest_checkpoint:
        raise ValueError("latest_checkpoint: only for Mode.LOCAL (a master resumes on its own)")
    from determined.core import _hooks

    _hooks.trial_runner(trial_def)  # fail here, not on the master, when no plugin runs the class
    context = _context_path(context_dir)
    if command is not None:
        entrypoint = _command_string(command)
    else:
        entrypoint = _class_entrypoint(trial_def, context) or _script_command(context)
    _submit(_test_config(loaded) if test else loaded, context, entrypoint, master_url)


def init(
    config: ConfigArg = None,
    mode: Mode | str | bool = Mode.CLUSTER,
    context_dir: str | os.PathLike[str] = "",
    command: str | Sequence[str] | None = None,
    master_url: str | None = None,
    *,
    local: bool | None = None,
) -> NativeContext:
    """Submit this plain training script to a master, or let it train here; one argument picks which.

    In ``Mode.CLUSTER`` (off-cluster) it uploads ``context_dir``, creates an experiment whose
    entrypoint is this script with its arguments (or ``command``), prints the id and ends the script.
    Where the script should train (``Mode.LOCAL``, or inside the trial the master started) it returns
    a :class:`NativeContext`; the script goes on with ``det.core.init()``, ``det.pytorch.init()`` or
    Keras's ``DeterminedCallback`` as usual.

    Raises:
        ValueError: a bad argument or config, naming it.
    """
    chosen = _mode(mode, local)
    info = _trial_info()
    if info is not None:
        trial = info.trial
        return NativeContext(chosen, dict(trial.config), dict(trial.hparams), info)
    loaded = _load_config(config)
    if chosen is Mode.LOCAL:
        full, local_info = _local_trial(loaded, test=False)
        return NativeContext(chosen, full, dict(local_info.trial.hparams), None)
    context = _context_path(context_dir)
    entrypoint = _command_string(command) if command is not None else _script_command(context)
    _submit(loaded, context, entrypoint, master_url)
