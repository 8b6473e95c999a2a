"""Allocations' work directories under the master's data directory, removed once they end.

A trial's or task's allocation runs in ``<data_dir>/work/<allocation id>`` (its context extracted
there) with, for a trial, its ClusterInfo in ``<allocation id>.info`` beside it. Upstream runs
each in a container that goes away with it; det removes both once the allocation has exited, so a
10,000-trial search does not leave 20,000 directories (and as many copies of its context) behind.
An allocation id is never used twice (a trial's next allocation has the next run id), so removing
an ended one's directories cannot touch a live allocation's.

Removal runs on a thread of its own (``det-work-dirs``), not on the event thread that handles the
exit: a large context takes a while to delete. What a master did not get to (it stopped first, or
was killed) is removed by the next one at start-up, when every allocation of the previous master
has ended (start-up recovery closes them).
"""

from __future__ import annotations

import logging
import pathlib
import queue
import shutil
import threading
from collections.abc import Iterable

logger = logging.getLogger("determined.master")

INFO_SUFFIX = ".info"
"""A trial allocation's ClusterInfo directory is ``<allocation id>.info`` beside its work dir."""


class WorkDirs:
    """Where allocations' work directories are, and their removal after the allocations end."""

    def __init__(self, data_dir: pathlib.Path) -> None:
        self.root = data_dir / "work"
        self._queue: queue.SimpleQueue[list[pathlib.Path] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._pending = 0

    def of(self, allocation_id: str) -> pathlib.Path:
        """The allocation's work directory (made by its launch)."""
        return self.root / allocation_id

    def info_of(self, allocation_id: str) -> pathlib.Path:
        """The directory of a trial allocation's ClusterInfo file."""
        return self.root / f"{allocation_id}{INFO_SUFFIX}"

    def discard(self, allocation_ids: Iterable[str]) -> None:
        """Remove the ended allocations' directories (on the removal thread, which wakes once for
        them all; what is missing is fine)."""
        self._put([p for aid in allocation_ids for p in (self.of(aid), self.info_of(aid))])

    def discard_all(self) -> None:
        """Remove every directory there now: at start-up, before anything is launched, all of
        them belong to allocations of an earlier master, which have ended."""
        try:
            entries = list(self.root.iterdir())
        except FileNotFoundError:
            return
        self._put(entries)

    def wait_idle(self, timeout: float = 10.0) -> bool:
        """Wait until every removal asked for is done; False on timeout (tests)."""
        with self._idle:
            return self._idle.wait_for(lambda: self._pending == 0, timeout)

    def close(self) -> None:
        """Let the removal thread end once it has done what was asked before."""
        with self._lock:
            if self._thread is None:
                return
            self._thread = None
        self._queue.put(None)

    def _put(self, paths: list[pathlib.Path]) -> None:
        if not paths:
            return
        with self._lock:
            self._pending += 1
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._remove_queued, name="det-work-dirs", daemon=True
                )
                self._thread.start()
        self._queue.put(paths)

    def _remove_queued(self) -> None:
        while True:
            paths = self._queue.get()
            if paths is None:
                return
            try:
                for path in paths:
                    _remove(path)
            finally:
                with self._idle:
                    self._pending -= 1
                    self._idle.notify_all()


def _remove(path: pathlib.Path) -> None:
    """Delete ``path`` (a directory tree or a file); a failure is logged, not raised."""
    try:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
    except FileNotFoundError:
        pass
    except OSError as e:
        logger.warning("master: could not remove %s: %s", path, e)
