"""The Keras names Determined 0.38 deprecated (det.keras.callbacks, load_model_from_checkpoint_path,
TFKerasTensorBoard, SequenceAdapter, TFKerasTrialContext.get_initial_batch) on Keras 3.

One process runs ``legacy_names_scenario.py``: tiny TFKerasTrials train off-cluster through det's
trial runner (fresh, resumed, preempted, stopped early) and the scenario checks what they did.
"""

from __future__ import annotations

import pathlib

from keras_helpers import HERE, clean_env, run_script


def test_legacy_names_scenario_keras3(tmp_path: pathlib.Path) -> None:
    (tmp_path / "tmp").mkdir()
    env = clean_env(
        KERAS_BACKEND="tensorflow", TMPDIR=str(tmp_path / "tmp"), XDG_DATA_HOME=str(tmp_path)
    )
    result = run_script(HERE / "legacy_names_scenario.py", str(tmp_path), env=env)
    assert result.stdout.split()[-2:] == ["tensorflow", "keras3"], result.stdout
