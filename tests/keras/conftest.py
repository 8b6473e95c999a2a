"""The Keras tests: each runs a script in its own interpreter (a Keras backend, the legacy venv, a
fresh venv), so this process never imports TensorFlow. Helpers live in ``keras_helpers.py``."""

from __future__ import annotations

import pathlib
import sys

# Importable as a plain module under importlib mode (``tests/keras`` itself would shadow keras).
_HERE = str(pathlib.Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
