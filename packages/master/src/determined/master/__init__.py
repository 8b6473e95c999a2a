"""det-master: the API server, database, scheduler and searchers of det.

``det-master up`` (or ``python -m determined.master up``) serves Determined's REST API; tests and
embedders use :class:`Master` directly::

    from determined.master import Master, MasterConfig
    with Master(MasterConfig(port=0, data_dir=tmp)) as master:
        print(master.url)
"""

from __future__ import annotations

import importlib.metadata as _metadata
from typing import TYPE_CHECKING

from determined.core.plugins import lazy_exports

try:
    __version__ = _metadata.version("det-master")
except _metadata.PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0"

if TYPE_CHECKING:
    from determined.master._config import MasterConfig
    from determined.master._master import Master

__all__ = ["Master", "MasterConfig", "__version__"]

# Lazy: every process that builds det's plugin manager imports this package (for the master's
# hook specifications and plugins), and a trial must not pay for the web server and database.
__getattr__ = lazy_exports(
    __name__,
    {"Master": "determined.master._master", "MasterConfig": "determined.master._config"},
)[0]
