"""Upstream's examples/features/unmanaged/1_singleton.py, det's own copy: a run the master did not
start reports training and validation metrics and its progress, then closes.

Usage: python singleton.py NAME STEPS
"""

import random
import sys

from determined.experimental import core_v2


def main() -> None:
    name, steps = sys.argv[1], int(sys.argv[2])
    core_v2.init(config=core_v2.Config(name=name, labels=["unmanaged", "singleton"]))
    print("experiment id:", core_v2.info.trial.experiment_id, flush=True)
    print("url:", core_v2.url_reverse_webui_exp_view(), flush=True)
    for i in range(steps):
        core_v2.train.report_training_metrics(steps_completed=i, metrics={"loss": random.random()})
        if (i + 1) % 5 == 0:
            core_v2.train.report_validation_metrics(
                steps_completed=i, metrics={"loss": 1.0 / (i + 1)}
            )
            core_v2.train.report_progress(i / float(steps))
    core_v2.close()


if __name__ == "__main__":
    main()
