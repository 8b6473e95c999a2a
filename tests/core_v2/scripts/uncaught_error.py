"""A singleton run that dies of an uncaught exception: close() runs at exit and the trial ends
in ERROR.

Usage: python uncaught_error.py NAME
"""

import sys

from determined.experimental import core_v2


def main() -> None:
    core_v2.init(config=core_v2.Config(name=sys.argv[1]))
    print("experiment id:", core_v2.info.trial.experiment_id, flush=True)
    core_v2.train.report_training_metrics(steps_completed=1, metrics={"loss": 1.0})
    raise ValueError("boom")


if __name__ == "__main__":
    main()
