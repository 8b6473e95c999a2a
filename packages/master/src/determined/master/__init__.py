"""det-master: the API server, database, scheduler and searchers of det.

``det-master up`` (or ``python -m determined.master up``) serves Determined's REST API; tests and
embedders use :class:`Master` directly::

    from determined.master import Master, MasterConfig
    with Master(MasterConfig(port=0, data_dir=tmp)) as master:
        print(master.url)
"""

from __future__ import annotations

import importlib.metadata as _metadata

try:
    __version__ = _metadata.version("det-master")
except _metadata.PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0"

from determined.master._config import MasterConfig
from determined.master._master import Master

__all__ = ["Master", "MasterConfig", "__version__"]
