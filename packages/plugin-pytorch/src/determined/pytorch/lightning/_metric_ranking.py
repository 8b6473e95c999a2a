"""Ranking validations by the searcher metric, for DetCallback's ``checkpoint_policy="best"``."""

from __future__ import annotations

import logging

import pytorch_lightning as pl

logger = logging.getLogger("determined.pytorch.lightning")


class MetricRanking:
    """Reads the searcher metric from a validation and tells whether it is the best so far.

    Args:
        metric: the validation metric's name, or ``None`` when the run has none.
        smaller_is_better: how to compare values of ``metric``.
        on_cluster: whether a missing metric is an error (on-cluster, the searcher needs it) or
            only warned about.

    Attributes:
        best: this trial's best value so far (kept in the Lightning checkpoint).
        experiment_best: the experiment's best before the current validation (on-cluster).
    """

    def __init__(self, metric: str | None, smaller_is_better: bool, on_cluster: bool) -> None:
        self.metric = metric
        self.smaller_is_better = smaller_is_better
        self._on_cluster = on_cluster
        self.best: float | None = None
        self.experiment_best: float | None = None
        self._warned_missing_metric = False

    def value(self, trainer: pl.Trainer) -> float | None:
        """The searcher metric of the latest validation (``None`` when there is none)."""
        if not self.metric:
            return None
        value = trainer.callback_metrics.get(self.metric)
        if value is None:
            if self._on_cluster:
                raise RuntimeError(
                    f"the searcher metric {self.metric!r} (searcher.metric) was not logged during "
                    f"validation; logged: {sorted(trainer.callback_metrics)}. Log it in "
                    f"validation_step with self.log({self.metric!r}, ...)"
                )
            if not self._warned_missing_metric:
                self._warned_missing_metric = True
                logger.warning(
                    "searcher_metric %r was not logged during validation (logged: %s)",
                    self.metric,
                    sorted(trainer.callback_metrics),
                )
            return None
        return float(value.item() if hasattr(value, "item") else value)

    def better(self, a: float, b: float) -> bool:
        """Whether ``a`` ranks strictly before ``b``."""
        return a < b if self.smaller_is_better else a > b

    def improves(self, metric: float | None) -> bool:
        """Whether ``metric`` is at least as good as the trial's and the experiment's best.

        ``True`` (after one warning) when there is no metric, so that every validation checkpoints.
        """
        if metric is None:
            if not self._warned_missing_metric:
                self._warned_missing_metric = True
                logger.warning(
                    'checkpoint_policy="best" needs a searcher metric: checkpointing after every '
                    "validation"
                )
            return True
        best = [b for b in (self.best, self.experiment_best) if b is not None]
        return all(self.better(metric, b) or metric == b for b in best)

    def record(self, metric: float | None) -> None:
        """Keep ``metric`` as the trial's best when it is better."""
        if metric is not None and (self.best is None or self.better(metric, self.best)):
            self.best = metric
