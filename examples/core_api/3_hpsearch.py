"""Stage 3: hyperparameter search.

Hyperparameters come from the trial (``core_context.info.trial.hparams``); the searcher's operations say
how long to train; the searcher metric is reported as a validation metric with the ``batches`` time
metric so ASHA searchers can stop weak trials early.
"""

import json
import logging
import pathlib

from model import LinearModel

import determined as det

DEFAULT_HPARAMS = {"lr": 0.05, "seed": 0}


def main(core_context: det.core.Context) -> None:
    hparams = core_context.info.trial.hparams if core_context.info else DEFAULT_HPARAMS
    model = LinearModel(lr=float(hparams["lr"]), seed=int(hparams.get("seed", 0)))
    step = 0
    latest = core_context.info.latest_checkpoint if core_context.info else None
    if latest is not None:
        with core_context.checkpoint.restore_path(latest) as path:
            model.load(json.loads((pathlib.Path(path) / "model.json").read_text()))
        step = int(core_context.checkpoint.get_metadata(latest)["steps_completed"])

    for op in core_context.searcher.operations():
        while step < op.length:
            step += 1
            loss = model.train_batch()
            if step % 10 == 0 or step == op.length:
                core_context.train.report_training_metrics(
                    steps_completed=step, metrics={"loss": loss}
                )
                validation = model.validate()
                core_context.train.report_validation_metrics(
                    steps_completed=step, metrics={"validation_loss": validation, "batches": step}
                )
                op.report_progress(step)
                with core_context.checkpoint.store_path({"steps_completed": step}) as (path, _):
                    (path / "model.json").write_text(json.dumps(model.state()))
                if core_context.preempt.should_preempt():
                    return
        # validate() again: a trial resumed at op.length trains nothing in this run
        op.report_completed(model.validate())


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)
    with det.core.init() as core_context:
        main(core_context)
