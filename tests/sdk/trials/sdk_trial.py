"""A tiny Core API trial for the SDK tests.

Each step reports training and validation metrics and saves a checkpoint holding the step;
``losses`` (a list) sets each step's validation loss, ``step_seconds`` slows a step down so a test
can pause or kill the trial mid-run, and a resumed run continues from its latest checkpoint.
"""

import json
import logging
import pathlib
import time

import determined as det


def main(core_context: det.core.Context) -> None:
    info = core_context.info
    hparams = info.trial.hparams if info and info.trial else {}
    steps = int(hparams.get("steps", 3))
    losses = hparams.get("losses") or [1.0 / (s + 1) for s in range(steps)]
    if "last_loss" in hparams:  # a decreasing curve ending at last_loss
        losses = [float(hparams["last_loss"]) + 0.5 * (steps - s - 1) for s in range(steps)]
    start = 0
    latest = info.latest_checkpoint if info else None
    if latest:
        with core_context.checkpoint.restore_path(latest) as path:
            start = json.loads((pathlib.Path(path) / "state.json").read_text())["step"]
        print(f"resumed from {latest} at step {start}", flush=True)
    for step in range(start + 1, steps + 1):
        core_context.train.report_training_metrics(
            steps_completed=step, metrics={"loss": 1.0 / step}
        )
        core_context.train.report_validation_metrics(
            steps_completed=step, metrics={"val_loss": float(losses[step - 1])}
        )
        metadata = {"steps_completed": step, "framework": "none"}
        with core_context.checkpoint.store_path(metadata) as (path, _storage_id):
            (path / "state.json").write_text(json.dumps({"step": step}))
            (path / "weights.bin").write_bytes(bytes(range(16)) * step)
        print(f"step {step} done", flush=True)
        if hparams.get("step_seconds"):
            time.sleep(float(hparams["step_seconds"]))
        if core_context.preempt.should_preempt():
            print("preempted", flush=True)
            return
    print("trial finished", flush=True)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)
    with det.core.init() as core_context:
        main(core_context)
