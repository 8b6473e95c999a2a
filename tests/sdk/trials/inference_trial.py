"""A batch-inference task for the SDK metrics tests: it links itself to the checkpoint (and model
version) it "uses", as ``torch_batch_process`` does, then reports metrics of its own.

Hyperparameters: ``checkpoint_uuid``; ``model`` and ``version`` to report a model version instead;
``scale`` multiplies the reported values so two tasks can be told apart.
"""

import logging

import determined as det
from determined.experimental import client


def main(core_context: det.core.Context) -> None:
    info = core_context.info
    hparams = info.trial.hparams if info and info.trial else {}
    scale = float(hparams.get("scale", 1.0))
    if hparams.get("model"):
        version = client.get_model(hparams["model"]).get_version(int(hparams["version"]))
        core_context.experimental.report_task_using_model_version(version)
    else:
        checkpoint = client.get_checkpoint(hparams["checkpoint_uuid"])
        core_context.experimental.report_task_using_checkpoint(checkpoint)
    for step in (1, 2):
        core_context.train.report_metrics(
            group="inference", steps_completed=step, metrics={"predicted": step * scale}
        )
    core_context.train.report_validation_metrics(
        steps_completed=2, metrics={"accuracy": 0.75 * scale}
    )
    print("inference finished", flush=True)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)
    with det.core.init() as core_context:
        main(core_context)
