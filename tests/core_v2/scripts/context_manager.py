"""Upstream's examples/features/unmanaged/advanced/context_manager.py, det's own copy:
``core_v2.init_context`` used as a context manager. MODE 1 raises inside the block; exit0 and
exit3 call sys.exit(0) and sys.exit(3) there.

Usage: python context_manager.py NAME [MODE]
"""

import sys

from determined.experimental import core_v2


def main() -> None:
    name = sys.argv[1]
    mode = sys.argv[2] if len(sys.argv) > 2 else ""
    with core_v2.init_context(config=core_v2.Config(name=name)) as core_context:
        print("experiment id:", core_context.info.trial.experiment_id, flush=True)
        for i in range(10):
            core_context.train.report_training_metrics(steps_completed=i, metrics={"loss": 1.0})
            if mode == "1" and i == 4:
                raise RuntimeError("the training loop failed on purpose")
            if mode.startswith("exit") and i == 4:
                sys.exit(int(mode[len("exit") :]))


if __name__ == "__main__":
    main()
