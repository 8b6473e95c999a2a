"""``det.pytorch``: PyTorchTrial, its context, the Trainer, data loading, reducers and callbacks.

Names load on first use, so ``import determined.pytorch`` (which det's plugin discovery does) imports
no torch. ``det.pytorch.lightning`` and ``det.pytorch.deepspeed`` are sub-packages, the latter
shipped by det-plugin-deepspeed into this package.
"""

import pkgutil as _pkgutil

__path__ = _pkgutil.extend_path(__path__, __name__)

import importlib as _importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "Batch": "_units",
    "Epoch": "_units",
    "TrainUnit": "_units",
    "_TrialState": "_units",
    "_ShouldExit": "_units",
    "DataLoader": "_data",
    "TorchData": "_data",
    "adapt_batch_sampler": "_data",
    "data_length": "_data",
    "to_device": "_data",
    "_dataset_repro_warning": "_data",
    "LRScheduler": "_lr_scheduler",
    "PyTorchCallback": "_callback",
    "MetricReducer": "_reducer",
    "Reducer": "_reducer",
    "_PyTorchReducerContext": "_reducer",
    "_SimpleReducer": "_reducer",
    "PyTorchTrialContext": "_context",
    "PyTorchExperimentalContext": "_context",
    "PyTorchTrial": "_trial",
    "_PyTorchTrialController": "_controller",
    "Trainer": "_trainer",
    "init": "_trainer",
    "CheckpointLoadContext": "_load",
    "load_trial_from_checkpoint_path": "_load",
}

_SUBPACKAGES = {
    "experimental": None,
    "samplers": None,
    "lightning": None,
    "deepspeed": "det-plugin-deepspeed",
}

if TYPE_CHECKING:
    from determined.pytorch import experimental as experimental
    from determined.pytorch import samplers as samplers
    from determined.pytorch._callback import PyTorchCallback as PyTorchCallback
    from determined.pytorch._context import PyTorchExperimentalContext as PyTorchExperimentalContext
    from determined.pytorch._context import PyTorchTrialContext as PyTorchTrialContext
    from determined.pytorch._data import DataLoader as DataLoader
    from determined.pytorch._data import TorchData as TorchData
    from determined.pytorch._data import adapt_batch_sampler as adapt_batch_sampler
    from determined.pytorch._data import data_length as data_length
    from determined.pytorch._data import to_device as to_device
    from determined.pytorch._load import CheckpointLoadContext as CheckpointLoadContext
    from determined.pytorch._load import (
        load_trial_from_checkpoint_path as load_trial_from_checkpoint_path,
    )
    from determined.pytorch._lr_scheduler import LRScheduler as LRScheduler
    from determined.pytorch._reducer import MetricReducer as MetricReducer
    from determined.pytorch._reducer import Reducer as Reducer
    from determined.pytorch._trainer import Trainer as Trainer
    from determined.pytorch._trainer import init as init
    from determined.pytorch._trial import PyTorchTrial as PyTorchTrial
    from determined.pytorch._units import Batch as Batch
    from determined.pytorch._units import Epoch as Epoch
    from determined.pytorch._units import TrainUnit as TrainUnit

__all__ = [
    "Batch",
    "CheckpointLoadContext",
    "DataLoader",
    "Epoch",
    "LRScheduler",
    "MetricReducer",
    "PyTorchCallback",
    "PyTorchExperimentalContext",
    "PyTorchTrial",
    "PyTorchTrialContext",
    "Reducer",
    "TorchData",
    "TrainUnit",
    "Trainer",
    "adapt_batch_sampler",
    "data_length",
    "init",
    "load_trial_from_checkpoint_path",
    "samplers",
    "to_device",
]


def __getattr__(name: str) -> Any:
    if name in _SUBPACKAGES:
        try:
            module = _importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:
            distribution = _SUBPACKAGES[name]
            if distribution is None or exc.name != f"{__name__}.{name}":
                raise
            raise AttributeError(
                f"determined.pytorch.{name} needs the {distribution!r} distribution: "
                f"pip install {distribution}"
            ) from None
        globals()[name] = module
        return module
    source = _EXPORTS.get(name)
    if source is None:
        raise AttributeError(f"module 'determined.pytorch' has no attribute {name!r}")
    value = getattr(_importlib.import_module(f"{__name__}.{source}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(__all__) | set(_SUBPACKAGES))
