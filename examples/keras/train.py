"""Train an iris classifier with Keras and det.keras.DeterminedCallback.

Runs three ways, unchanged: ``python train.py`` (off-cluster), ``det experiment create const.yaml .``
(a trial on a det master: metrics, checkpoints, pause and resume, hyperparameter search), and with
several workers (``distributed.yaml``: ``python -m determined.launch.tensorflow`` sets TF_CONFIG and
``DistributedContext.from_tf_config()`` builds a MultiWorkerMirroredStrategy from it).
"""

from __future__ import annotations

import argparse
import logging
from typing import Any

import data

import determined as det

# Off-cluster there is no searcher to pick hyperparameters.
DEFAULT_HPARAMS = {
    "learning_rate": 1.0e-2,
    "learning_rate_decay": 1.0e-6,
    "layer1_dense_size": 16,
    "global_batch_size": 16,
}


def main(
    core_context: det.core.Context,
    strategy: Any,
    checkpoint: str | None,
    continue_id: int | str,
    hparams: dict[str, Any],
    epochs: int,
    seed: int | None = None,
) -> None:
    import keras  # after from_tf_config(): the strategy must exist before TensorFlow runs ops

    if seed is not None:
        # The trial's seed (from the experiment's reproducibility.experiment_seed): the same
        # initial weights and shuffles each time the trial runs.
        keras.utils.set_random_seed(seed)
    (train_x, train_y), validation_data = data.load()

    # Build and compile the model within the strategy's scope.
    with strategy.scope():
        inputs = keras.Input(shape=(4,))
        hidden = keras.layers.Dense(hparams["layer1_dense_size"])(inputs)
        outputs = keras.layers.Dense(data.NUM_CLASSES, activation="softmax")(hidden)
        model = keras.Model(inputs=inputs, outputs=outputs)
        learning_rate = keras.optimizers.schedules.InverseTimeDecay(
            hparams["learning_rate"], decay_steps=1, decay_rate=hparams["learning_rate_decay"]
        )
        model.compile(
            optimizer=keras.optimizers.RMSprop(learning_rate=learning_rate),
            loss=keras.losses.categorical_crossentropy,
            metrics=[keras.metrics.categorical_accuracy],
        )

    # The callback that connects fit() to det: metrics, checkpoints, pause and resume.
    det_callback = det.keras.DeterminedCallback(
        core_context,
        checkpoint=checkpoint,
        continue_id=continue_id,
        # Iris epochs are very short: checkpoint every 10 epochs (and always when stopping).
        checkpoint_epochs=10,
    )
    # Keras's TensorBoard callback, writing where det uploads TensorBoard files from.
    tensorboard = det.keras.TensorBoard(core_context, update_freq="epoch", profile_batch=0)

    model.fit(
        x=train_x,
        y=train_y,
        batch_size=hparams["global_batch_size"],
        validation_data=validation_data,
        epochs=epochs,
        callbacks=[det_callback, tensorboard],
        verbose=0,
    )


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=100, help="how long to train for")
    args = parser.parse_args()

    info = det.get_cluster_info()
    if info is not None and info.task_type == "TRIAL":
        # A trial on a det master: resume its own checkpoint, use the searcher's hyperparameters.
        continue_id: int | str = info.trial.trial_id
        checkpoint = info.latest_checkpoint
        hparams = info.trial.hparams
        seed: int | None = info.trial.trial_seed % 2**31  # Keras takes 32-bit seeds
    else:
        continue_id, checkpoint, hparams, seed = "local-train-task", None, DEFAULT_HPARAMS, None

    distributed, strategy = det.core.DistributedContext.from_tf_config()
    with det.core.init(distributed=distributed) as core_context:
        main(core_context, strategy, checkpoint, continue_id, hparams, args.epochs, seed)
