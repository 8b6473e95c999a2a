"""Stage 2: checkpoints, preemption and resume.

Saves a checkpoint every ``checkpoint_every`` steps and whenever the trial is asked to stop (pause,
graceful kill, a searcher decision, SIGTERM off-cluster). On-cluster a resumed trial starts from
``core_context.info.latest_checkpoint``, with its step count continuing where it stopped.
"""

import json
import logging
import pathlib

from model import LinearModel

import determined as det


def save(core_context: det.core.Context, model: LinearModel, steps_completed: int) -> str:
    metadata = {"steps_completed": steps_completed}
    with core_context.checkpoint.store_path(metadata) as (path, storage_id):
        (path / "model.json").write_text(json.dumps(model.state()))
    return storage_id


def load(core_context: det.core.Context, model: LinearModel, storage_id: str) -> int:
    with core_context.checkpoint.restore_path(storage_id) as path:
        model.load(json.loads((pathlib.Path(path) / "model.json").read_text()))
    return int(core_context.checkpoint.get_metadata(storage_id)["steps_completed"])


def main(core_context: det.core.Context, steps: int = 100, checkpoint_every: int = 25) -> None:
    model = LinearModel()
    start = 0
    latest = core_context.info.latest_checkpoint if core_context.info else None
    if latest is not None:
        start = load(core_context, model, latest)
        logging.info("resumed from checkpoint %s at step %d", latest, start)
    for step in range(start + 1, steps + 1):
        loss = model.train_batch()
        if step % 10 == 0:
            core_context.train.report_training_metrics(steps_completed=step, metrics={"loss": loss})
        if step % checkpoint_every == 0 or step == steps:
            save(core_context, model, step)
            if core_context.preempt.should_preempt():
                logging.info("preempted at step %d: checkpoint saved, exiting", step)
                return
    core_context.train.report_validation_metrics(
        steps_completed=steps, metrics={"validation_loss": model.validate()}
    )


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)
    with det.core.init() as core_context:
        main(core_context)
