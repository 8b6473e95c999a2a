"""det-master: the API server, database, scheduler and searchers of det.

``det-master up`` (or ``python -m determined.master up``) serves Determined's REST API; tests and
embedders use :class:`Master` directly::

    from determined.master import Master, MasterConfig
    with Master(MasterConfig(port=0, data_dir=tmp)) as master:
        print(master.url)
"""

from __future__ import annotations

import importlib
import importlib.metadata as _metadata
from typing import TYPE_CHECKING, Any

try:
    __version__ = _metadata.version("det-master")
except _metadata.PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0"

if TYPE_CHECKING:
    from determined.master._config import MasterConfig
    from determined.master._master import Master

__all__ = ["Master", "MasterConfig", "__version__"]

_LAZY = {"Master": "determined.master._master", "MasterConfig": "determined.master._config"}


def __getattr__(name: str) -> Any:
    # Lazy: every process that builds det's plugin manager imports this package (for the master's
    # hook specifications and plugins), and a trial must not pay for the web server and database.
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
