"""Stage 1: report training and validation metrics."""

import logging

from model import LinearModel

import determined as det


def main(core_context: det.core.Context, steps: int = 100, report_every: int = 10) -> None:
    model = LinearModel()
    for step in range(1, steps + 1):
        loss = model.train_batch()
        if step % report_every == 0:
            core_context.train.report_training_metrics(steps_completed=step, metrics={"loss": loss})
    core_context.train.report_validation_metrics(
        steps_completed=steps, metrics={"validation_loss": model.validate()}
    )


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)
    with det.core.init() as core_context:
        main(core_context)
