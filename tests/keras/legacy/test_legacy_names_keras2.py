"""The Keras names Determined 0.38 deprecated, on tf.keras 2.15: the same scenario as on Keras 3."""

from __future__ import annotations

import pathlib
import sys

from keras_helpers import HERE, clean_env, run_script


def test_legacy_names_scenario_keras2(tmp_path: pathlib.Path) -> None:
    (tmp_path / "tmp").mkdir()
    env = clean_env(TMPDIR=str(tmp_path / "tmp"), XDG_DATA_HOME=str(tmp_path))
    result = run_script(
        HERE / "legacy_names_scenario.py", str(tmp_path), python=sys.executable, env=env
    )
    assert result.stdout.split()[-3:] == ["2.15.0", "tensorflow", "keras2"], result.stdout
