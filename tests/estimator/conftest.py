"""The EstimatorTrial tests: tf.estimator runs only in the legacy venv, so these tests drive it there
in subprocesses and this process never imports TensorFlow. Helpers live in ``estimator_helpers.py``."""

from __future__ import annotations

import pathlib
import sys

_HERE = str(pathlib.Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
