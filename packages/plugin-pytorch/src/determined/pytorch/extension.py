"""What a framework plugin builds on from det-plugin-pytorch: the public extension module.

det.pytorch's ``Trainer`` runs a trial with one training loop: units and periods, reporting,
validation scheduling, the checkpoint policy, preemption and stop requests, callbacks, TensorBoard,
exact resume. A plugin for another PyTorch-based framework (det-plugin-deepspeed is one) reuses
that loop instead of writing its own, and imports only this module and ``determined.pytorch``'s
public names (never ``determined.pytorch._*``, which may change at any release).

How a framework plugin is put together:

- **Environment and init.** Its ``init()`` reads :class:`TrialEnvironment` (seed, hparams, config,
  resume step, GPUs from ``ClusterInfo`` on a cluster, from the arguments off it), sets up its
  distributed runtime, and builds its context (a :class:`~determined.pytorch.PyTorchTrialContext`
  subclass) inside :func:`open_trial_context`, which seeds the RNGs and starts core with the modes
  the loop expects.
- **Trainer.** It subclasses :class:`~determined.pytorch.Trainer`, setting ``_trial_class`` and
  ``_trial_class_name`` to its trial class and overriding ``_make_controller(**kwargs)`` to build
  its controller; ``fit()`` keeps its arguments.
- **Controller.** It subclasses :class:`PyTorchTrialController` and overrides only the steps its
  framework does differently; everything else (the order of validation, checkpoints and reports,
  and what a checkpoint holds besides the models) stays det.pytorch's:

  - ``check_trial(trial, context)``: refuse a trial/context this loop cannot run;
  - ``evaluation_mode(trial)``: ``"batch"`` (evaluate on every rank) or ``"full"`` (chief only);
  - ``build_data_loaders()``: set ``train_iter``, ``validation_loader`` and the context's
    ``_epoch_len`` (optimizer steps per epoch), e.g. sharded over the framework's data-parallel
    ranks with ``shard_training_data``;
  - ``train_until_boundary()``: train batches until a period boundary (``fired_boundaries``)
    and return the boundaries that fired, appending each batch's metrics to ``batch_metrics``
    and stepping wrapped schedulers with ``step_schedulers``;
  - ``evaluate_batches()`` / ``evaluate_full_dataset()``: one validation pass; a
    :class:`ValidationCollector` checks, keeps and reduces ``evaluate_batch`` metrics;
  - ``read_checkpoint(path)`` / ``apply_checkpoint(checkpoint)`` / ``save_checkpoint(...)``: the
    framework's checkpoint files, built from ``begin_checkpoint``, ``loop_state_dict``,
    ``write_trial_files``, ``restore_loop_position``, ``restore_optimizers_and_schedulers``,
    ``restore_callbacks`` and the ``notify_*`` callbacks, so the checkpoint format stays one.

  These steps run outside the per-batch path except ``train_until_boundary``, which an override
  must keep as tight as det.pytorch's: bind attributes to locals before the loop.
- **Runner.** Its ``det_trial_runner`` hook maps a legacy experiment config to ``fit()``
  arguments with :func:`fit_kwargs`.

The helpers the loop uses are here too: :func:`set_random_seeds`, :func:`copy_user_code`,
:func:`listed_state`, :func:`callback_overrides`, :func:`repeat_torch_loader`,
:func:`dataset_repro_warning`, :func:`load_state_file`, the RNG state functions, and the metric
helpers :func:`detach_metrics` and :func:`metrics_to_python`.

Importing this module imports torch (``import determined.pytorch`` alone does not).
"""

from __future__ import annotations

from determined.pytorch._checkpoint import get_rng_state, set_rng_state
from determined.pytorch._controller import PyTorchTrialController, repeat_torch_loader
from determined.pytorch._controller_checkpoints import (
    callback_overrides,
    copy_user_code,
    listed_state,
    load_state_file,
)
from determined.pytorch._controller_periods import CHECKPOINT, REPORT, TRAIN, VALIDATE
from determined.pytorch._controller_validation import ValidationCollector
from determined.pytorch._data import dataset_repro_warning
from determined.pytorch._environment import TrialEnvironment, open_trial_context, set_random_seeds
from determined.pytorch._metrics import detach_metrics
from determined.pytorch._metrics import to_python as metrics_to_python
from determined.pytorch._runner import fit_kwargs
from determined.pytorch._units import ShouldExit, TrialState

__all__ = [
    "CHECKPOINT",
    "REPORT",
    "TRAIN",
    "VALIDATE",
    "PyTorchTrialController",
    "ShouldExit",
    "TrialEnvironment",
    "TrialState",
    "ValidationCollector",
    "callback_overrides",
    "copy_user_code",
    "dataset_repro_warning",
    "detach_metrics",
    "fit_kwargs",
    "get_rng_state",
    "listed_state",
    "load_state_file",
    "metrics_to_python",
    "open_trial_context",
    "repeat_torch_loader",
    "set_random_seeds",
    "set_rng_state",
]
