"""A Core API trial that checkpoints every few steps and resumes from the latest checkpoint.

Each step waits a little, so a test can pause the trial or cancel its Slurm job mid-run; the
step count comes from the checkpoint's metadata, so a restarted trial continues where it stopped.
It honours preemption (a pause) by checkpointing and exiting. Hyperparameter ``steps``: how many
steps (default 40).
"""

import json
import logging
import time

import determined as det

EVERY = 5


def main() -> None:
    info = det.get_cluster_info()
    steps = int(info.trial.hparams.get("steps", 40)) if info else 40
    with det.core.init() as core_context:
        step = 0
        latest = core_context.info.latest_checkpoint if core_context.info else None
        if latest is not None:
            step = int(core_context.checkpoint.get_metadata(latest)["steps_completed"])
            logging.info("resumed from checkpoint %s at step %d", latest, step)
        while step < steps:
            step += 1
            time.sleep(0.25)
            if step % EVERY == 0:
                with core_context.checkpoint.store_path({"steps_completed": step}) as (path, _):
                    (path / "state.json").write_text(json.dumps({"step": step}))
                core_context.train.report_training_metrics(
                    steps_completed=step, metrics={"loss": 1.0 / step}
                )
                if core_context.preempt.should_preempt():
                    logging.info("preempted at step %d", step)
                    return
        core_context.train.report_validation_metrics(
            steps_completed=steps, metrics={"validation_loss": 1.0 / steps}
        )


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)
    main()
