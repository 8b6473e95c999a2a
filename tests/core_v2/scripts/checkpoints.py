"""Upstream's examples/features/unmanaged/2_checkpoints.py, det's own copy: external ids make a
re-run find its experiment and trial; it resumes from the latest checkpoint.

Usage: python checkpoints.py EXTERNAL_ID STEPS [CHECKPOINT_DIR]
"""

import random
import sys

from determined.experimental import core_v2


def main() -> None:
    external_id, steps = sys.argv[1], int(sys.argv[2])
    storage = sys.argv[3] if len(sys.argv) > 3 else None
    core_v2.init(
        config=core_v2.Config(
            name="unmanaged-checkpoints",
            checkpoint_storage=storage,
            external_experiment_id=external_id,
            external_trial_id=external_id,
        ),
    )
    latest_checkpoint = core_v2.info.latest_checkpoint
    initial_i = 0
    if latest_checkpoint is not None:
        with core_v2.checkpoint.restore_path(latest_checkpoint) as path:
            i_str, _ = (path / "state").read_text().split(",")
            initial_i = int(i_str)
    print("experiment id:", core_v2.info._trial_info.experiment_id, flush=True)
    print("trial id:", core_v2.info.trial.trial_id, flush=True)
    print("initial step:", initial_i, flush=True)
    for i in range(initial_i, initial_i + steps):
        core_v2.train.report_training_metrics(steps_completed=i, metrics={"loss": random.random()})
        if (i + 1) % 5 == 0:
            loss = random.random()
            core_v2.train.report_validation_metrics(steps_completed=i, metrics={"loss": loss})
            core_v2.train.report_progress((i - initial_i) / float(steps))
            with core_v2.checkpoint.store_path({"steps_completed": i}) as (path, _uuid):
                (path / "state").write_text(f"{i},{loss}")
    core_v2.close()


if __name__ == "__main__":
    main()
