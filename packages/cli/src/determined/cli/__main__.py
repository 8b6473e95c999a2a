"""Entry points: ``det`` (:func:`main`) and ``det-cli`` (:func:`main_det_cli`, adds ``launch``)."""

from __future__ import annotations

import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """``det``: run one command; return its exit status."""
    from determined.cli._app import run

    return run(argv, prog="det")


def main_det_cli(argv: Sequence[str] | None = None) -> int:
    """``det-cli``: the same commands as ``det``, plus ``launch`` (the Hydra entry point)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "launch":
        from determined.cli.hydra import launch_main

        return int(launch_main(args[1:]))
    # `det-cli -m HOST -u USER launch ...`: the global flags go along to launch
    index, forwarded = 0, []
    while index + 1 < len(args) and args[index] in ("-m", "--master", "-u", "--user"):
        forwarded += args[index : index + 2]
        index += 2
    if forwarded and index < len(args) and args[index] == "launch":
        from determined.cli.hydra import launch_main

        return int(launch_main([*forwarded, *args[index + 1 :]]))
    from determined.cli._app import LAUNCH, run

    return run(args, prog="det-cli", extra=[LAUNCH])


if __name__ == "__main__":
    sys.exit(main())
