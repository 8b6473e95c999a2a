"""``python -m determined.launch.trial MODULE:TrialClass``: run a legacy Trial class.

The master turns ``entrypoint: model_def:MyTrial`` into this command. It imports ``MODULE`` from the
working directory (the trial's context directory), asks the installed plugins for a runner of the
class (the ``det_trial_runner`` hook) and hands over. A trial with more than one slot re-executes
this module under the runner's distributed launcher first, so every rank runs the same class.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
from collections.abc import Sequence

import determined as det
from determined.core import _hooks
from determined.launch import _util

USAGE = "usage: python -m determined.launch.trial MODULE:TrialClass"
UNDER_LAUNCHER_ENV = _util.UNDER_LAUNCHER_ENV

logger = logging.getLogger("determined.launch")


def load_trial_class(spec: str) -> type:
    """The class named by ``module:Class`` (``module`` may be dotted), imported from the cwd.

    Raises:
        ValueError: the spec is malformed, the module does not import, or the name is not a class.
    """
    module_name, sep, class_name = spec.partition(":")
    if not sep or not module_name or not class_name:
        raise ValueError(f"entrypoint: expected MODULE:TrialClass, got {spec!r}")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name.split(".")[0] and exc.name != module_name:
            raise
        raise ValueError(f"entrypoint: module {module_name!r} not found in {os.getcwd()}") from exc
    obj: object = module
    for part in class_name.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"entrypoint: {module_name!r} has no attribute {class_name!r}")
        obj = getattr(obj, part)
    if not isinstance(obj, type):
        raise ValueError(f"entrypoint: {spec!r} is not a class")
    return obj


def _slots(info: det.ClusterInfo | None) -> int:
    if info is None:
        return 1
    return sum(info.container_slot_counts) or max(len(info.slot_ids), 1)


def main(argv: Sequence[str]) -> int:
    """Run the Trial class named by ``argv[0]``; the process's exit status."""
    if len(argv) != 1:
        print(USAGE, file=sys.stderr)
        return 2
    try:
        trial_class = load_trial_class(argv[0])
        runner = _hooks.trial_runner(trial_class)
    except ValueError as exc:
        print(f"determined.launch.trial: {exc}", file=sys.stderr)
        return 1
    info = det.get_cluster_info()
    under_launcher = os.environ.get(UNDER_LAUNCHER_ENV) == "1" or "RANK" in os.environ
    if runner.launcher and _slots(info) > 1 and not under_launcher:
        env = dict(os.environ, **{UNDER_LAUNCHER_ENV: "1"})
        # not __name__: run as ``python -m determined.launch.trial`` that is "__main__"
        module = "determined.launch.trial"
        cmd = [sys.executable, "-m", runner.launcher, sys.executable, "-m", module, argv[0]]
        logger.info("multi-slot trial: running under %s", runner.launcher)
        os.execvpe(cmd[0], cmd, env)
    runner.run(trial_class, info)
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    sys.exit(main(sys.argv[1:]))
