"""Run a function once per rank, each rank a thread with its own real ``DistributedContext``.

Like upstream's ``parallel.Execution``: ranks are threads of this process, the chief listens on a free
loopback port, and the first rank error (lowest rank) is re-raised in the test's thread.

    pex = parallel.Execution(4, local_size=2)
    results = pex.run(lambda: pex.distributed.allgather(pex.rank))
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from determined.core import DistributedContext


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Execution:
    """A group of ``size`` thread-ranks, ``local_size`` per simulated node.

    Args:
        size: number of ranks.
        local_size: ranks per node (default: all on one node).
        timeout: seconds each collective may wait; a rank still alive after ``timeout + 30`` fails the test.
        make_distributed_context: build a DistributedContext per rank (``pex.distributed``).
    """

    def __init__(
        self,
        size: int,
        local_size: int | None = None,
        *,
        timeout: float = 30.0,
        make_distributed_context: bool = True,
    ) -> None:
        local_size = local_size or size
        if size % local_size:
            raise ValueError(f"local_size: {local_size} does not divide size {size}")
        self.size = size
        self.local_size = local_size
        self.cross_size = size // local_size
        self.timeout = timeout
        self.make_distributed_context = make_distributed_context
        self._thread_state = threading.local()

    # ---- per-thread view ------------------------------------------------------------------------
    @property
    def rank(self) -> int:
        return int(self._thread_state.rank)

    @property
    def local_rank(self) -> int:
        return self.rank % self.local_size

    @property
    def cross_rank(self) -> int:
        return self.rank // self.local_size

    @property
    def distributed(self) -> DistributedContext:
        context = getattr(self._thread_state, "distributed", None)
        if context is None:
            raise RuntimeError("pex.distributed is only available inside pex.run() with a context")
        return context

    def __enter__(self) -> Execution:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    # ---- running --------------------------------------------------------------------------------
    def run(self, fn: Callable[[], Any]) -> list[Any]:
        """Call ``fn()`` once in every rank's thread; return the results by rank.

        Raises the exception of the lowest failing rank; AssertionError if a rank hangs.
        """
        port = free_port()
        results: list[Any] = [None] * self.size
        errors: list[BaseException | None] = [None] * self.size

        def rank_main(rank: int) -> None:
            self._thread_state.rank = rank
            context = None
            try:
                if self.make_distributed_context:
                    context = DistributedContext(
                        rank=rank,
                        size=self.size,
                        local_rank=rank % self.local_size,
                        local_size=self.local_size,
                        cross_rank=rank // self.local_size,
                        cross_size=self.cross_size,
                        chief_ip="127.0.0.1",
                        pub_port=port,
                        timeout=self.timeout,
                    )
                    self._thread_state.distributed = context
                results[rank] = fn()
            except BaseException as exc:
                errors[rank] = exc
            finally:
                self._thread_state.distributed = None
                if context is not None:
                    with contextlib.suppress(Exception):
                        context.close()

        threads = [
            threading.Thread(target=rank_main, args=(rank,), name=f"rank-{rank}", daemon=True)
            for rank in range(self.size)
        ]
        for thread in threads:
            thread.start()
        for rank, thread in enumerate(threads):
            thread.join(self.timeout + 30)
            if thread.is_alive():
                raise AssertionError(f"rank {rank} hung")
        for error in errors:
            if error is not None:
                raise error
        return results

    @contextlib.contextmanager
    def raises_when(
        self, predicate: bool, exception: type[BaseException], match: str | None = None
    ) -> Iterator[None]:
        """``pytest.raises(exception, match=match)`` on ranks where ``predicate`` holds, else nothing."""
        if predicate:
            with pytest.raises(exception, match=match):
                yield
        else:
            yield


__all__ = ["Execution", "free_port"]
