"""Exceptions that user training code raises or catches."""

from __future__ import annotations


class InvalidHP(Exception):
    """Raise inside ``with det.core.init()`` to mark this trial's hyperparameters as invalid.

    The context reports an early exit with reason ``INVALID_HP`` so the searcher can replace the trial,
    and the ``with`` block ends without the exception. Unlike upstream, the library never calls
    ``exit()``: the script goes on after the block and ends as it would (exit 0 on-cluster).
    """

    def __init__(self, msg: str = "...") -> None:
        if not isinstance(msg, str):
            raise TypeError(f"InvalidHP: the message must be a str, not {type(msg).__name__}")
        super().__init__(msg)
        self.msg = msg


class CollectiveError(RuntimeError):
    """A collective operation (allgather, broadcast, ...) failed or timed out on some rank."""
