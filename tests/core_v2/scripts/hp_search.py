"""One trial of a hyperparameter search run outside the master (the shape of upstream's
examples/features/unmanaged/ray/ray_hp_search.py without Ray): every trial names the same external
experiment, its own external trial id and its hyperparameters; the searcher section only names the
metric the trials are ranked by.

Usage: python hp_search.py EXPERIMENT_ID TRIAL_ID HP
"""

import sys

from determined.experimental import core_v2


def main() -> None:
    experiment, trial, hp = sys.argv[1], sys.argv[2], float(sys.argv[3])
    core_v2.init(
        config=core_v2.Config(
            name=experiment,
            hparams={"hp": hp},
            searcher={
                "name": "random",
                "metric": "loss",
                "smaller_is_better": True,
                "max_trials": 3,
            },
            external_experiment_id=experiment,
            external_trial_id=trial,
        ),
    )
    try:
        hparams = core_v2.info.trial.hparams
        for i in range(10):
            if (i + 1) % 5 == 0:
                loss = hparams["hp"] + 1.0 / (i + 1)
                core_v2.train.report_validation_metrics(steps_completed=i, metrics={"loss": loss})
    finally:
        core_v2.close()


if __name__ == "__main__":
    main()
