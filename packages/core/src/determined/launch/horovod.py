"""``python -m determined.launch.horovod [[HVD_OVERRIDES...] --] (--trial MODULE:Class | SCRIPT...)``

Upstream's Horovod launcher (horovodrun over MPI, with an sshd in every other container). det does
not run Horovod: it is not installed with det, and horovodrun, MPI and the sshd containers it
needs are not part of det's runtime. This module keeps upstream's command line so configs that
name it fail at once with a message that says so and what to use instead, rather than with an
ImportError deep inside a worker.

One case needs no Horovod and runs as upstream ran it: ``--autohorovod`` (the flag upstream's own
legacy entrypoints passed) on a single slot, or off-cluster, runs SCRIPT (or the Trial class,
through ``python -m determined.launch.trial``) directly, as one process.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import determined as det
from determined.launch import _util

USAGE = (
    "usage: python -m determined.launch.horovod [[HVD_OVERRIDES...] --] "
    "(--trial MODULE:TrialClass | SCRIPT...)"
)
UNSUPPORTED_EXIT = 3
ALTERNATIVES = (
    "Use another launcher: python3 -m determined.launch.torch_distributed (PyTorch, and "
    "--trial MODULE:Class for a PyTorchTrial), python3 -m determined.launch.deepspeed, or "
    "python3 -m determined.launch.tensorflow (Keras/TensorFlow); or give the Trial class alone "
    "(entrypoint: MODULE:Class), which picks the launcher that fits it."
)


@dataclass(frozen=True)
class HorovodArgs:
    """A parsed command line: what would have been passed to horovodrun, and what to run."""

    overrides: list[str]
    script: list[str]
    autohorovod: bool


def parse_args(args: Sequence[str]) -> HorovodArgs:
    """Upstream's command line: overrides before ``--``, then ``--autohorovod``, then ``--trial
    MODULE:Class`` or a script. ValueError for a malformed one."""
    args = list(args)
    overrides: list[str] = []
    if "--" in args:
        index = args.index("--")
        overrides, args = args[:index], args[index + 1 :]
    autohorovod = False
    while args and args[0] == "--autohorovod":
        autohorovod = True
        args = args[1:]
    script = _util.trial_script(args)
    if script is None:
        script = args
    if not script:
        raise ValueError("empty script is not allowed")
    return HorovodArgs(overrides, script, autohorovod)


def _slot_count(info: det.ClusterInfo | None) -> int:
    if info is None:
        return 1
    return sum(info.container_slot_counts) or len(info.slot_ids)


def unsupported_message() -> str:
    """Why this launcher cannot run a Horovod job here, and what to use instead."""
    installed = importlib.util.find_spec("horovod") is not None
    why = (
        "Horovod is installed, but det does not launch Horovod jobs"
        if installed
        else "Horovod is not installed, and det does not support it"
    )
    return (
        f"determined.launch.horovod: {why} (horovodrun, MPI and the sshd containers it needs "
        f"are not part of det). {ALTERNATIVES}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if list(args[:1]) in (["-h"], ["--help"]):
        print(f"{USAGE}\n\n{__doc__}")
        return 0
    try:
        parsed = parse_args(args)
    except ValueError as exc:
        print(f"determined.launch.horovod: {exc}\n{USAGE}", file=sys.stderr)
        return 2
    if parsed.autohorovod and _slot_count(det.get_cluster_info()) <= 1:
        # Upstream ran single-slot trials without horovodrun: nothing here needs Horovod.
        return _util.exit_code(_util.run_forwarding_signals(parsed.script).returncode)
    print(unsupported_message(), file=sys.stderr)
    return UNSUPPORTED_EXIT


if __name__ == "__main__":
    sys.exit(main())
