"""DeterminedCallback off-cluster on Keras 3 with the TensorFlow and the torch backend.

Each run is one process executing ``callback_scenario.py`` (fresh run, resume, warm start,
preemption inside an epoch and its resume), since importing TensorFlow costs seconds.
"""

from __future__ import annotations

import pathlib

import pytest
from keras_helpers import HERE, clean_env, run_script


@pytest.mark.parametrize("backend", ["tensorflow", "torch"])
def test_callback_scenario(backend: str, tmp_path: pathlib.Path) -> None:
    result = run_script(
        HERE / "callback_scenario.py", str(tmp_path), env=clean_env(KERAS_BACKEND=backend)
    )
    assert result.stdout.split()[-2:] == [backend, "keras3"], result.stdout
