"""Run TensorBoard's own ``main`` without TensorFlow: ``python -m determined.tensorboard._tensorboard_main
--logdir ...``.

TensorBoard imports TensorFlow when it is installed, only to read remote filesystems (det syncs the
files to a local directory first) and at a cost of seconds and hundreds of MB; marking its ``notf``
stub module present makes it use its own TensorFlow-free readers.
"""

from __future__ import annotations

import sys
import types


def main() -> None:
    """Start TensorBoard with ``sys.argv[1:]``."""
    sys.modules.setdefault("tensorboard.compat.notf", types.ModuleType("notf"))
    from tensorboard import main as tensorboard_main

    sys.argv[0] = "tensorboard"
    tensorboard_main.run_main()


if __name__ == "__main__":
    main()
