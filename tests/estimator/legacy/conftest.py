"""tests/estimator/legacy runs only where tf.estimator exists (TensorFlow < 2.16: the legacy venv).

The main suite runs it through that venv (``tests/estimator/test_legacy_venv.py``); collected in the
main venv (TensorFlow 2.21), it is skipped at collection without importing TensorFlow.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util


def _has_tf_estimator() -> bool:
    try:
        major, minor = importlib.metadata.version("tensorflow").split(".")[:2]
    except importlib.metadata.PackageNotFoundError:
        return False
    old_enough = (int(major), int(minor)) < (2, 16)
    return old_enough and importlib.util.find_spec("tensorflow_estimator") is not None


collect_ignore_glob = [] if _has_tf_estimator() else ["test_*.py"]
