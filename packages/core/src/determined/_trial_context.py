"""``det.TrialContext`` and ``det.EnvContext``: upstream's base class of the context a legacy
Trial class receives, and the trial environment it reads.

A TrialContext wraps a Core API context and the trial's environment (``env``): its config,
hyperparameters, ids, seed and starting step. det's framework contexts take the trial's
:class:`~determined.ClusterInfo`; ``TrialContext`` accepts one as ``env`` too (it becomes an
:class:`EnvContext`), or an ``EnvContext``, or any object with its attribute names.
"""

from __future__ import annotations

import dataclasses
import logging
import pathlib
from typing import TYPE_CHECKING, Any

from determined._info import ClusterInfo

if TYPE_CHECKING:
    from determined import core

logger = logging.getLogger("determined")


@dataclasses.dataclass
class EnvContext:
    """The environment of one trial, with upstream's ``det.EnvContext`` fields (ids are strings,
    as upstream's were)."""

    master_url: str
    master_cert_file: str | None
    master_cert_name: str | None
    experiment_config: dict[str, Any]
    hparams: dict[str, Any]
    latest_checkpoint: str | None
    steps_completed: int
    use_gpu: bool
    container_gpus: list[str]
    slot_ids: list[int]
    debug: bool
    det_trial_id: str
    det_experiment_id: str
    det_agent_id: str
    det_cluster_id: str
    trial_seed: int
    trial_run_id: int
    allocation_id: str
    managed_training: bool
    test_mode: bool
    on_cluster: bool

    @classmethod
    def from_cluster_info(cls, info: ClusterInfo) -> EnvContext:
        """The environment of the trial ``info`` describes (its task type must be TRIAL)."""
        trial = info.trial
        gpus = list(info.gpu_uuids)
        return cls(
            master_url=info.master_url,
            master_cert_file=info.master_cert_file,
            master_cert_name=info.master_cert_name,
            experiment_config=dict(trial.config),
            hparams=dict(trial.hparams),
            latest_checkpoint=info.latest_checkpoint,
            steps_completed=trial.steps_completed,
            use_gpu=bool(gpus),
            container_gpus=gpus,
            slot_ids=list(info.slot_ids),
            debug=trial.debug,
            det_trial_id=str(trial.trial_id),
            det_experiment_id=str(trial.experiment_id),
            det_agent_id=info.agent_id,
            det_cluster_id=info.cluster_id,
            trial_seed=trial.trial_seed,
            trial_run_id=trial._trial_run_id,
            allocation_id=info.allocation_id,
            managed_training=True,
            test_mode=False,
            on_cluster=True,
        )

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> EnvContext:
        """An off-cluster environment for ``config``: hyperparameters sampled from its
        ``hyperparameters`` section with the experiment seed (0 unless
        ``reproducibility.experiment_seed`` sets one); ids are ``"0"``."""
        from determined.searcher import RandomState, sample_hparams

        seed = int((config.get("reproducibility") or {}).get("experiment_seed") or 0)
        return cls(
            master_url="",
            master_cert_file=None,
            master_cert_name=None,
            experiment_config=dict(config),
            hparams=sample_hparams(config.get("hyperparameters") or {}, RandomState(seed)),
            latest_checkpoint=None,
            steps_completed=0,
            use_gpu=False,
            container_gpus=[],
            slot_ids=[],
            debug=False,
            det_trial_id="0",
            det_experiment_id="0",
            det_agent_id="local",
            det_cluster_id="local",
            trial_seed=seed,
            trial_run_id=0,
            allocation_id="local",
            managed_training=False,
            test_mode=False,
            on_cluster=False,
        )


class TrialContext:
    """What a legacy Trial class sees of its trial: config, hyperparameters, ids and the
    distributed context; the base of the framework trial contexts.

    Args:
        core_context: the trial's Core API context.
        env: the trial's :class:`EnvContext`, or its :class:`~determined.ClusterInfo`.
    """

    def __init__(self, core_context: core.Context, env: Any) -> None:
        self._core = core_context
        self.env = EnvContext.from_cluster_info(env) if isinstance(env, ClusterInfo) else env
        self.distributed = core_context.distributed
        self._stop_requested = False

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> TrialContext:
        """A context for trying a Trial class out of det, in a plain Python session.

        The Core API context is a local one (checkpoints in det's default local storage); the
        hyperparameters are sampled from ``config``.
        """
        from determined import core

        return cls(core._dummy_init(), EnvContext.from_config(config))

    def get_experiment_config(self) -> dict[str, Any]:
        """The experiment configuration."""
        config: dict[str, Any] = self.env.experiment_config
        return config

    def get_data_config(self) -> dict[str, Any]:
        """The ``data`` section of the experiment configuration (``{}`` without one)."""
        return dict(self.get_experiment_config().get("data") or {})

    def get_experiment_id(self) -> int:
        """The id of this trial's experiment (0 off-cluster)."""
        return int(self.env.det_experiment_id)

    def get_trial_id(self) -> int:
        """The id of this trial (0 off-cluster)."""
        return int(self.env.det_trial_id)

    def get_trial_seed(self) -> int:
        """The seed of this trial's random number generators."""
        return int(self.env.trial_seed)

    def get_hparams(self) -> dict[str, Any]:
        """Every hyperparameter of this trial, by name."""
        hparams: dict[str, Any] = self.env.hparams
        return hparams

    def get_hparam(self, name: str) -> Any:
        """The value of the hyperparameter ``name``.

        Raises:
            ValueError: the experiment config's ``hyperparameters`` section has no such name.
        """
        hparams = self.get_hparams()
        if name not in hparams:
            raise ValueError(
                f"no hyperparameter named {name!r} in the experiment config's hyperparameters "
                f"section (have: {', '.join(sorted(hparams))})"
            )
        if name == "global_batch_size":
            logger.warning(
                "use context.get_per_slot_batch_size() and context.get_global_batch_size() "
                "instead of the global_batch_size hyperparameter"
            )
        return hparams[name]

    def get_stop_requested(self) -> bool:
        """Whether :meth:`set_stop_requested` asked training to stop."""
        return self._stop_requested

    def set_stop_requested(self, stop_requested: bool) -> None:
        """Ask training to stop: it checkpoints and exits at the end of the current step."""
        if not isinstance(stop_requested, bool):
            raise TypeError(f"stop_requested: must be a bool, not {type(stop_requested).__name__}")
        if stop_requested:
            logger.info("a trial stop was requested: stopping at the end of the current step")
        self._stop_requested = stop_requested

    def get_tensorboard_path(self) -> pathlib.Path:
        """The directory whose files TensorBoard should read (the Core API context's)."""
        return self._core.train.get_tensorboard_path()

    def get_initial_batch(self) -> int:
        """The number of batches already trained when this run started (from its checkpoint)."""
        return int(self.env.steps_completed)
