"""DeterminedCallback on tf.keras / Keras 2.15 (TensorFlow 2.15): the same scenario as on Keras 3."""

from __future__ import annotations

import pathlib
import sys

from keras_helpers import HERE, clean_env, run_script


def test_callback_scenario_keras2(tmp_path: pathlib.Path) -> None:
    result = run_script(
        HERE / "callback_scenario.py", str(tmp_path), python=sys.executable, env=clean_env()
    )
    assert result.stdout.split()[-3:] == ["2.15.0", "tensorflow", "keras2"], result.stdout
