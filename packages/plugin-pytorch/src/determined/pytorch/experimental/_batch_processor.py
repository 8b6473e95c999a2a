"""What a batch-processing job is written against: :class:`TorchBatchProcessor`, the user's class,
and :class:`TorchBatchProcessorContext`, what det hands it (device, storage, metrics, ranks).

:func:`~determined.pytorch.experimental.torch_batch_process` builds the context and calls the
processor; both are also usable on their own (e.g. to unit-test a processor with a local
``det.core`` context).
"""

from __future__ import annotations

import abc
import contextlib
import pathlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

import determined as det
from determined import core
from determined.core import plugins
from determined.pytorch._data import to_device
from determined.pytorch._reducer import _PyTorchReducerContext

if TYPE_CHECKING:
    from determined.storage import StorageManager


def get_default_device(core_context: core.Context) -> torch.device:
    """The device this rank computes on: GPU ``local_rank`` when there are GPUs, else the CPU."""
    if torch.cuda.device_count() == 0:
        return torch.device("cpu")
    return torch.device("cuda", core_context.distributed.local_rank)


def default_storage_config(info: det.ClusterInfo | None) -> str | dict[str, Any]:
    """Where a batch job's checkpoints and ``upload_path()`` files go.

    On a cluster: the experiment's ``checkpoint_storage``. Off-cluster: the same user data
    directory that ``det.core.init()`` stores local checkpoints in.
    """
    if info is not None and info.task_type == "TRIAL":
        config = dict(info.trial.config.get("checkpoint_storage") or {})
        if not config:
            raise ValueError("checkpoint_storage: the experiment config has none")
        return config
    import platformdirs

    return platformdirs.user_data_dir("determined")


def storage_manager_for(storage: str | dict[str, Any]) -> StorageManager:
    """The StorageManager for a path, a storage URL or a ``checkpoint_storage`` dict."""
    from determined import storage as det_storage

    config = det_storage.to_config(storage) if isinstance(storage, str) else dict(storage)
    return plugins.checkpoint_storage(config)


class TorchBatchProcessorContext(_PyTorchReducerContext):
    """What a :class:`TorchBatchProcessor` gets from det.

    Args:
        core_context: the Core API context of this rank.
        storage_path: where ``upload_path()`` stores this rank's files inside the checkpoint
            storage (``<output id>/rank_<rank>`` when built by ``torch_batch_process``).
    """

    def __init__(self, core_context: core.Context, storage_path: str) -> None:
        super().__init__(allgather_fn=core_context.distributed.allgather)
        self._core_context = core_context
        self._distributed = core_context.distributed
        self.device = get_default_device(core_context)
        self._tensorboard_path = core_context.train.get_tensorboard_path()
        self._storage_path = storage_path
        self._storage_manager: StorageManager | None = None
        self._use_default_storage = False
        self._hparams: dict[str, Any] | None = None

    def get_hparams(self) -> dict[str, Any]:
        """The trial's hyperparameters (only inside an experiment trial)."""
        if self._hparams is None:
            info = det.get_cluster_info()
            if info is None or info.task_type != "TRIAL":
                raise RuntimeError(
                    "get_hparams(): hyperparameters exist only when the batch job runs as an "
                    "experiment trial"
                )
            self._hparams = dict(info.trial.hparams)
        return self._hparams

    def to_device(self, data: Any, warned_types: set[type] | None = None) -> Any:
        """``data`` moved to this rank's device: tensors, NumPy arrays, and dicts/lists/tuples of
        them (anything with a ``.to()`` too); other types come back unchanged, with one warning."""
        return to_device(data, self.device, warned_types)

    def get_tensorboard_path(self) -> pathlib.Path:
        """Where to write TensorBoard files (e.g. a profiler's trace handler) so det uploads them."""
        return self._tensorboard_path

    def prepare_model_for_inference(self, model: nn.Module) -> nn.Module:
        """``model`` in eval mode on this rank's device."""
        model.eval()
        model.to(self.device)
        return model

    def upload_path(self) -> contextlib.AbstractContextManager[pathlib.Path]:
        """A directory to write files into; on exit they are stored in the checkpoint storage
        under this rank's output path (``<output id>/rank_<rank>``)."""
        self._use_default_storage = True
        return self._store(self._storage_path)

    @contextlib.contextmanager
    def _store(self, destination: str) -> Iterator[pathlib.Path]:
        if self._storage_manager is None:
            self._storage_manager = storage_manager_for(
                default_storage_config(det.get_cluster_info())
            )
        with self._storage_manager.store_path(destination) as path:
            yield path

    def report_metrics(self, group: str, steps_completed: int, metrics: dict[str, Any]) -> None:
        """Report ``metrics`` in ``group`` (``"training"``, ``"validation"``, or any name without
        a ``.``) at ``steps_completed``."""
        self._core_context.train.report_metrics(
            group=group, steps_completed=steps_completed, metrics=metrics
        )

    def report_task_using_model_version(self, model_version: Any) -> None:
        """Record that this task uses ``model_version`` (its metrics then show up for it)."""
        self._core_context.experimental.report_task_using_model_version(model_version)

    def report_task_using_checkpoint(self, checkpoint: Any) -> None:
        """Record that this task uses ``checkpoint`` (its metrics then show up for it)."""
        self._core_context.experimental.report_task_using_checkpoint(checkpoint)

    def get_distributed_rank(self) -> int:
        """This process's rank."""
        return self._distributed.get_rank()

    def get_distributed_size(self) -> int:
        """How many processes share the dataset."""
        return self._distributed.get_size()


class TorchBatchProcessor(metaclass=abc.ABCMeta):
    """The user's batch logic. ``__init__`` sets up what every batch needs (a model on
    ``context.device``, a storage client, ...); ``process_batch`` handles one batch."""

    @abc.abstractmethod
    def __init__(self, context: TorchBatchProcessorContext) -> None:
        """Create the resources every batch needs, from ``context``."""

    @abc.abstractmethod
    def process_batch(self, batch: Any, batch_idx: int) -> None:
        """Process one batch of this rank's shard.

        ``batch_idx`` counts this rank's batches: with 8 batches and 4 ranks, each rank sees
        ``batch_idx`` 0 and 1. After a restart it continues where the last checkpoint was.
        """

    def on_checkpoint_start(self) -> None:  # noqa: B027 (an optional hook, empty by default)
        """Called before each progress checkpoint: persist what the batches since the last one
        produced, so that it is not lost when the job stops after this checkpoint."""

    def on_finish(self) -> None:  # noqa: B027 (an optional hook, empty by default)
        """Called once the whole shard is processed, before the job ends."""
