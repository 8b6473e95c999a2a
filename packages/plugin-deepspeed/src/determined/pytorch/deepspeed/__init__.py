"""``det.pytorch.deepspeed``: DeepSpeedTrial, its context and Trainer, on GPUs and on CPU (gloo).

Shipped by det-plugin-deepspeed into det-plugin-pytorch's ``determined.pytorch`` package. Names load
on first use, so det's plugin discovery (which imports the ``_runner`` module of this package) loads
neither torch nor DeepSpeed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from determined.core.plugins import lazy_exports

_EXPORTS = {
    "ModelParallelUnit": "_mpu",
    "make_data_parallel_mpu": "_mpu",
    "make_deepspeed_mpu": "_mpu",
    "DeepSpeedTrialContext": "_context",
    "overwrite_deepspeed_config": "_context",
    "DeepSpeedTrial": "_trial",
    "DeepSpeedTrialController": "_controller",
    "Trainer": "_trainer",
    "init": "_trainer",
}

if TYPE_CHECKING:
    from determined.pytorch.deepspeed._context import DeepSpeedTrialContext as DeepSpeedTrialContext
    from determined.pytorch.deepspeed._context import (
        overwrite_deepspeed_config as overwrite_deepspeed_config,
    )
    from determined.pytorch.deepspeed._controller import (
        DeepSpeedTrialController as DeepSpeedTrialController,
    )
    from determined.pytorch.deepspeed._mpu import ModelParallelUnit as ModelParallelUnit
    from determined.pytorch.deepspeed._mpu import make_data_parallel_mpu as make_data_parallel_mpu
    from determined.pytorch.deepspeed._mpu import make_deepspeed_mpu as make_deepspeed_mpu
    from determined.pytorch.deepspeed._trainer import Trainer as Trainer
    from determined.pytorch.deepspeed._trainer import init as init
    from determined.pytorch.deepspeed._trial import DeepSpeedTrial as DeepSpeedTrial

__all__ = [
    "DeepSpeedTrial",
    "DeepSpeedTrialContext",
    "DeepSpeedTrialController",
    "ModelParallelUnit",
    "Trainer",
    "init",
    "make_data_parallel_mpu",
    "make_deepspeed_mpu",
    "overwrite_deepspeed_config",
]


__getattr__, __dir__ = lazy_exports(
    __name__, {name: f"{__name__}.{source}" for name, source in _EXPORTS.items()}
)
