"""A Core API trial across nodes that checkpoints every few steps and resumes from the latest.

Run under ``python -m determined.launch.torch_distributed``. Each step waits a little (so a test
can lose a node mid-trial) and synchronises the ranks with an allgather; the chief checkpoints.
"""

import json
import logging
import time

import determined as det

STEPS = 40
EVERY = 5


def main() -> None:
    distributed = det.core.DistributedContext.from_torch_distributed()
    with det.core.init(distributed=distributed) as core_context:
        step = 0
        latest = core_context.info.latest_checkpoint if core_context.info else None
        if latest is not None:
            step = int(core_context.checkpoint.get_metadata(latest)["steps_completed"])
            logging.info("resumed from checkpoint %s at step %d", latest, step)
        while step < STEPS:
            step += 1
            time.sleep(0.25)
            distributed.allgather(step)
            if step % EVERY == 0 and distributed.rank == 0:
                with core_context.checkpoint.store_path({"steps_completed": step}) as (path, _):
                    (path / "state.json").write_text(json.dumps({"step": step}))
                core_context.train.report_training_metrics(
                    steps_completed=step, metrics={"loss": 1.0 / step}
                )
        if distributed.rank == 0:
            core_context.train.report_validation_metrics(
                steps_completed=STEPS, metrics={"validation_loss": 1.0 / STEPS}
            )


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)
    main()
