"""``det.pytorch.experimental``: distributed batch processing (offline inference) with resumable
progress: :func:`torch_batch_process` runs a :class:`TorchBatchProcessor` over a dataset sharded
between the ranks, with a :class:`TorchBatchProcessorContext`.

Names load on first use, so importing this package loads no torch.
"""

from typing import TYPE_CHECKING

from determined.core.plugins import lazy_exports as _lazy_exports

if TYPE_CHECKING:
    from determined.pytorch.experimental._batch_processor import (
        TorchBatchProcessor as TorchBatchProcessor,
    )
    from determined.pytorch.experimental._batch_processor import (
        TorchBatchProcessorContext as TorchBatchProcessorContext,
    )
    from determined.pytorch.experimental._batch_processor import (
        get_default_device as get_default_device,
    )
    from determined.pytorch.experimental._torch_batch_process import (
        torch_batch_process as torch_batch_process,
    )

_PROCESSOR = "determined.pytorch.experimental._batch_processor"
__getattr__, __dir__ = _lazy_exports(
    __name__,
    {
        "TorchBatchProcessor": _PROCESSOR,
        "TorchBatchProcessorContext": _PROCESSOR,
        "get_default_device": _PROCESSOR,
        "torch_batch_process": "determined.pytorch.experimental._torch_batch_process",
    },
)

__all__ = [
    "TorchBatchProcessor",
    "TorchBatchProcessorContext",
    "get_default_device",
    "torch_batch_process",
]
