"""The launcher class Hydra instantiates for ``hydra/launcher=det`` (the work is in ``_core``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hydra.core.utils import JobReturn
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from hydra_plugins.det_launcher._config import DetLauncherConf
from omegaconf import DictConfig, OmegaConf


class DetLauncher(Launcher):
    """Runs each batch of a Hydra sweep as one det experiment, one trial per job.

    Keyword arguments are the fields of :class:`DetLauncherConf` (``hydra.launcher``).
    """

    def __init__(self, **settings: Any) -> None:
        plain: dict[str, Any] = {
            key: OmegaConf.to_container(value, resolve=True)
            if OmegaConf.is_config(value)
            else value
            for key, value in settings.items()
        }
        self.settings = DetLauncherConf(**plain)
        self.config: DictConfig | None = None
        self.task_function: TaskFunction | None = None
        self.hydra_context: HydraContext | None = None

    def setup(
        self,
        *,
        hydra_context: HydraContext,
        task_function: TaskFunction,
        config: DictConfig,
    ) -> None:
        self.config = config
        self.hydra_context = hydra_context
        self.task_function = task_function

    def launch(
        self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int
    ) -> Sequence[JobReturn]:
        from hydra_plugins.det_launcher import _core

        if self.config is None or self.hydra_context is None or self.task_function is None:
            raise RuntimeError("DetLauncher.launch() called before setup()")
        return _core.launch(
            self.settings,
            hydra_context=self.hydra_context,
            task_function=self.task_function,
            config=self.config,
            job_overrides=job_overrides,
            initial_job_idx=initial_job_idx,
        )
