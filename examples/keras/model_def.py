"""The iris classifier as a TFKerasTrial (the legacy Trial API, deprecated upstream but still used).

``entrypoint: model_def:IrisTrial`` runs it through ``python -m determined.launch.trial``; det's
Keras plugin trains it with one ``model.fit()`` and a DeterminedCallback.
"""

from __future__ import annotations

from typing import Any

import data
import keras

import determined as det


class IrisTrial(det.keras.TFKerasTrial):
    def __init__(self, context: det.keras.TFKerasTrialContext) -> None:
        self.context = context
        self.train_data, self.validation_data = data.load()

    def build_model(self) -> Any:
        inputs = keras.Input(shape=(4,))
        hidden = keras.layers.Dense(self.context.get_hparam("layer1_dense_size"))(inputs)
        outputs = keras.layers.Dense(data.NUM_CLASSES, activation="softmax")(hidden)
        model = self.context.wrap_model(keras.Model(inputs=inputs, outputs=outputs))
        optimizer = self.context.wrap_optimizer(
            keras.optimizers.RMSprop(learning_rate=self.context.get_hparam("learning_rate"))
        )
        model.compile(
            optimizer=optimizer,
            loss=keras.losses.categorical_crossentropy,
            metrics=[keras.metrics.categorical_accuracy],
        )
        return model

    def build_training_data_loader(self) -> det.keras.InputData:
        return self.train_data

    def build_validation_data_loader(self) -> det.keras.InputData:
        return self.validation_data
