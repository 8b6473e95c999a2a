"""Package attributes that are imported on first use (PEP 562), for det's ``__init__`` modules.

det's plugin discovery imports every distribution's entry-point module, and with it the package
``__init__`` above it: those must not load torch, TensorFlow, Keras or the master's web server.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    module_name: str, exports: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A ``__getattr__`` and a ``__dir__`` for the module ``module_name``.

    ``exports`` maps each public name to the module that defines it; the first access imports that
    module and caches the value in ``module_name``, so later accesses are plain attribute reads.
    """

    def __getattr__(name: str) -> Any:
        source = exports.get(name)
        if source is None:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(source), name)
        setattr(sys.modules[module_name], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(exports)

    return __getattr__, __dir__
