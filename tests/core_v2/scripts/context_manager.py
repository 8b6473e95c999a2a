"""Upstream's examples/features/unmanaged/advanced/context_manager.py, det's own copy:
``core_v2.init_context`` used as a context manager. With FAIL=1 it raises inside the block.

Usage: python context_manager.py NAME [FAIL]
"""

import sys

from determined.experimental import core_v2


def main() -> None:
    name = sys.argv[1]
    fail = len(sys.argv) > 2 and sys.argv[2] == "1"
    with core_v2.init_context(config=core_v2.Config(name=name)) as core_context:
        print("experiment id:", core_context.info.trial.experiment_id, flush=True)
        for i in range(10):
            core_context.train.report_training_metrics(steps_completed=i, metrics={"loss": 1.0})
            if fail and i == 4:
                raise RuntimeError("the training loop failed on purpose")


if __name__ == "__main__":
    main()
