"""Exceptions that user training code raises or catches."""

from __future__ import annotations


class InvalidHP(Exception):
    """Raise inside ``with det.core.init()`` to mark this trial's hyperparameters as invalid.

    The context reports an early exit with reason ``INVALID_HP`` so the searcher can replace the trial.
    Unlike upstream, the library never calls ``exit()``: the exception is swallowed by the context
    manager on-cluster (the trial ends cleanly) and re-raised off-cluster, where a script owns its process.
    """


class CollectiveError(RuntimeError):
    """A collective operation (allgather, broadcast, ...) failed or timed out on some rank."""
