"""Native API tests: each run is a script in its own interpreter (it may end with ``sys.exit``, and
this process never imports TensorFlow). Helpers live in ``native_helpers.py``."""

from __future__ import annotations

import pathlib
import sys

_HERE = str(pathlib.Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
