"""det: run Determined training code unchanged, locally or on a cluster.

``import determined as det`` is cheap: sub-packages (``det.core``, ``det.pytorch``, ``det.keras``, ...)
load on first attribute access, and a sub-package whose distribution is not installed raises an
``AttributeError`` that names the ``pip install`` that provides it.
"""

# Must run before any submodule import: the `determined` namespace spans several distributions.
import pkgutil as _pkgutil

__path__ = _pkgutil.extend_path(__path__, __name__)

import importlib as _importlib
import importlib.metadata as _metadata
from typing import TYPE_CHECKING

from determined._errors import InvalidHP
from determined._info import (
    ClusterInfo,
    RendezvousInfo,
    ResourcesInfo,
    TrialInfo,
    get_cluster_info,
)

try:
    __version__ = _metadata.version("det-core")
except _metadata.PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

LOG_FORMAT = "%(levelname)s: [%(process)s] %(name)s: %(message)s"
"""The log format trials should use: the shipper reads the leading ``LEVEL:`` to set the log level."""

# Sub-package name -> the distribution that ships it.
_SUBPACKAGES = {
    "core": "det-core",
    "client": "det-core",
    "config": "det-core",
    "errors": "det-core",
    "experimental": "det-core",
    "launch": "det-core",
    "lightning": "det-core",
    "searcher": "det-core",
    "storage": "det-core",
    "tensorboard": "det-core",
    "util": "det-core",
    "pytorch": "det-plugin-pytorch",
    "keras": "det-plugin-keras",
    "transformers": "det-plugin-transformers",
    "optuna": "det-plugin-optuna",
    "estimator": "det-plugin-estimator",
    "master": "det-master",
    "cli": "det-cli",
}

# Top-level names of det-core that load on first use: name -> the module that defines it.
_LAZY_ATTRIBUTES = {
    "EnvContext": "determined._trial_context",
    "TrialContext": "determined._trial_context",
    "import_from_path": "determined._import",
}

if TYPE_CHECKING:
    from determined import client as client
    from determined import config as config
    from determined import core as core
    from determined import errors as errors
    from determined import experimental as experimental
    from determined import launch as launch
    from determined import searcher as searcher
    from determined import storage as storage
    from determined import tensorboard as tensorboard
    from determined import util as util
    from determined._import import import_from_path as import_from_path
    from determined._trial_context import EnvContext as EnvContext
    from determined._trial_context import TrialContext as TrialContext

__all__ = [
    "LOG_FORMAT",
    "ClusterInfo",
    "InvalidHP",
    "RendezvousInfo",
    "ResourcesInfo",
    "TrialInfo",
    "__version__",
    "get_cluster_info",
    *_LAZY_ATTRIBUTES,
    *_SUBPACKAGES,
]


def __getattr__(name: str) -> object:
    source = _LAZY_ATTRIBUTES.get(name)
    if source is not None:
        value = getattr(_importlib.import_module(source), name)
        globals()[name] = value
        return value
    distribution = _SUBPACKAGES.get(name)
    if distribution is None:
        raise AttributeError(f"module 'determined' has no attribute {name!r}")
    try:
        module = _importlib.import_module(f"determined.{name}")
    except ModuleNotFoundError as exc:
        if exc.name not in (f"determined.{name}", "determined"):
            raise  # the sub-package exists but one of its own imports is missing
        raise AttributeError(
            f"determined.{name} needs the {distribution!r} distribution: pip install {distribution}"
        ) from None
    globals()[name] = module
    return module


def __dir__() -> list[str]:
    return sorted(__all__)
