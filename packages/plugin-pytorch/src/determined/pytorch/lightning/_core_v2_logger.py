"""CoreV2DetLogger: upstream's ``determined.lightning.experimental.DetLogger``, on det's DetLogger.

Upstream's experimental logger takes no Core API context: it starts one itself through
``determined.experimental.core_v2`` (an unmanaged run off-cluster, the master's trial on-cluster)
the first time Lightning logs, and closes it when training ends. Here it is det's
:class:`~determined.pytorch.lightning.DetLogger` given a context that does exactly that, so both
report the same metrics the same way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from pytorch_lightning.utilities import rank_zero_only

from determined.pytorch.lightning._logger import DetLogger

if TYPE_CHECKING:
    import determined as det
    from determined.experimental import Determined, core_v2


class _CoreV2Context:
    """The ``core_v2`` singletons seen as a Core API context; ``core_v2.init()`` runs on first use."""

    def __init__(self, init_kwargs: dict[str, Any]) -> None:
        self._init_kwargs = init_kwargs
        self._started = False

    def _core_v2(self) -> Any:
        from determined.experimental import core_v2

        if not self._started:
            core_v2.init(**self._init_kwargs)
            self._started = True
        return core_v2

    @property
    def train(self) -> det.core.TrainContext:
        return cast("det.core.TrainContext", self._core_v2().train)

    @property
    def distributed(self) -> det.core.DistributedContext:
        return cast("det.core.DistributedContext", self._core_v2().distributed)

    @property
    def info(self) -> det.ClusterInfo | None:
        return cast("det.ClusterInfo | None", self._core_v2().info)

    def close(self) -> None:
        """Close the run ``core_v2.init()`` started (nothing when it never started)."""
        if self._started:
            from determined.experimental import core_v2

            core_v2.close()
            self._started = False


class CoreV2DetLogger(DetLogger):
    """A DetLogger that starts det's Core API itself, through ``core_v2`` (upstream's
    ``determined.lightning.experimental.DetLogger``).

    Args:
        defaults: deprecated (upstream's): use ``config``.
        unmanaged: deprecated (upstream's): use ``config``.
        config: the unmanaged run's ``core_v2.Config`` (ignored when the master launched this
            process).
        client: the ``determined.experimental.Determined`` client to report with (default: one
            for ``$DET_MASTER``).
    """

    def __init__(
        self,
        *,
        defaults: core_v2.DefaultConfig | None = None,
        unmanaged: core_v2.UnmanagedConfig | None = None,
        config: core_v2.Config | None = None,
        client: Determined | None = None,
    ) -> None:
        init_kwargs: dict[str, Any] = {"config": config, "client": client}
        if defaults is not None:
            init_kwargs["defaults"] = defaults
        if unmanaged is not None:
            init_kwargs["unmanaged"] = unmanaged
        self._core_v2_context = _CoreV2Context(init_kwargs)
        super().__init__(cast("det.core.Context", self._core_v2_context))

    @property
    def experiment(self) -> det.core.Context:
        """The Core API context; starts the ``core_v2`` run if Lightning asks before logging."""
        self._core_v2_context.distributed  # noqa: B018  (starts core_v2)
        return cast("det.core.Context", self._core_v2_context)

    @rank_zero_only
    def finalize(self, status: str) -> None:
        """End the ``core_v2`` run when training ends."""
        super().finalize(status)
        self._core_v2_context.close()
