"""tests/keras/legacy runs only under Keras 2 (tf.keras 2.15, the legacy venv).

The main suite runs it through that venv (``test_legacy_venv.py``); collected in the main venv, whose
Keras is 3, it is skipped at collection without importing Keras.
"""

from __future__ import annotations

import importlib.metadata


def _keras_major() -> int:
    try:
        return int(importlib.metadata.version("keras").split(".")[0])
    except importlib.metadata.PackageNotFoundError:
        return 0


collect_ignore_glob = ["test_*.py"] if _keras_major() != 2 else []
