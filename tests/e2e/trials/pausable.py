"""A Core API trial for lifecycle tests: checkpoints at step 50, then waits there for a preemption.

data.mode: "pause" waits at step 50 until preempted (pause/activate); "crash_once" exits 3 at step 50 on
its first run (restart from the checkpoint); "crash_always" exits 3 every time.
"""

import json
import logging
import pathlib
import sys
import time

import determined as det


def main(core_context: det.core.Context) -> None:
    info = core_context.info
    mode = info.user_data.get("mode", "pause")
    step, value = 0, 0.0
    if info.latest_checkpoint:
        with core_context.checkpoint.restore_path(info.latest_checkpoint) as path:
            state = json.loads((pathlib.Path(path) / "state.json").read_text())
        step, value = state["step"], state["value"]
        logging.info("resumed from step %d", step)
    while step < 100:
        step += 1
        value += 1.0
        if step % 10 == 0:
            core_context.train.report_training_metrics(
                steps_completed=step, metrics={"value": value}
            )
        if step == 50 and not info.latest_checkpoint:
            with core_context.checkpoint.store_path({"steps_completed": step}) as (path, _):
                (path / "state.json").write_text(json.dumps({"step": step, "value": value}))
            if mode.startswith("crash"):
                logging.error("crashing on purpose at step %d", step)
                sys.exit(3)
            deadline = time.monotonic() + 120
            while not core_context.preempt.should_preempt():
                if time.monotonic() > deadline:
                    sys.exit("never preempted")
                time.sleep(0.02)
            logging.info("preempted at step %d", step)
            return
    if mode == "crash_always":
        sys.exit(3)
    core_context.train.report_validation_metrics(steps_completed=step, metrics={"value": value})


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)
    with det.core.init() as core_context:
        main(core_context)
