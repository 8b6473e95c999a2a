"""A tiny Core API trial for the web UI tests: reports curves, logs, checkpoints; may hold.

hparams: ``lr`` (shapes the curves), ``steps`` (training reports), ``hold`` (after the last step,
keep running and logging a ``tick N`` line every 0.1 s until preempted: pause/activate and the
live log tail have something to watch).
"""

import json
import logging
import math
import pathlib
import time

import determined as det


def checkpoint(core_context: det.core.Context, step: int) -> None:
    with core_context.checkpoint.store_path({"steps_completed": step}) as (path, _):
        (path / "state.json").write_text(json.dumps({"step": step}))
        (path / "weights.bin").write_bytes(b"\0" * 4096)


def main(core_context: det.core.Context) -> None:
    info = core_context.info
    hp = info.trial.hparams
    lr = float(hp["lr"])
    steps = int(hp.get("steps", 30))
    start = 0
    if info.latest_checkpoint:
        with core_context.checkpoint.restore_path(info.latest_checkpoint) as path:
            start = json.loads((pathlib.Path(path) / "state.json").read_text())["step"]
        logging.info("resumed from step %d", start)
    for step in range(start + 1, steps + 1):
        loss = math.exp(-lr * step) + 0.01
        core_context.train.report_training_metrics(
            steps_completed=step, metrics={"loss": loss, "accuracy": 1.0 - loss / 2}
        )
        if step % 10 == 0:
            core_context.train.report_validation_metrics(
                steps_completed=step, metrics={"validation_loss": loss * 1.1}
            )
            logging.info("step %d loss %.4f", step, loss)
    if start < steps:
        logging.warning("finished training at step %d", steps)
        checkpoint(core_context, steps)
    if not hp.get("hold"):
        return
    deadline = time.monotonic() + 300
    tick = 0
    while time.monotonic() < deadline:
        if core_context.preempt.should_preempt():
            logging.info("preempted after %d ticks", tick)
            return
        tick += 1
        logging.info("tick %d", tick)
        time.sleep(0.1)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)
    with det.core.init() as core_context:
        main(core_context)
