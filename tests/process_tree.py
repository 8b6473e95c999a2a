"""Processes from Linux ``/proc`` for tests: whether one is still alive, and processes by parent
for set-ups that clean up what a failed start left behind (the Ray cluster fixture kills the
raylet and agents of a node that timed out registering)."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterable


def process_parents() -> dict[int, int]:
    """pid -> parent pid of every process."""
    return parents_of(int(entry) for entry in os.listdir("/proc") if entry.isdigit())


def _stat(pid: int) -> list[str]:
    """The fields of ``/proc/<pid>/stat`` after the command name (state, parent pid, ...), read
    after its closing parenthesis: a name may hold spaces; empty when the process is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return []


def parents_of(pids: Iterable[int]) -> dict[int, int]:
    """pid -> parent pid of those of ``pids`` that exist."""
    parents = {}
    for pid in pids:
        fields = _stat(pid)
        if len(fields) > 1 and fields[1].isdigit():
            parents[pid] = int(fields[1])
    return parents


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists and has not ended (a zombie, ended but not yet reaped by its
    parent, counts as ended)."""
    fields = _stat(pid)
    return bool(fields) and fields[0] != "Z"


def kill_if_still_children(pids: Iterable[int], parents: dict[int, int]) -> list[int]:
    """SIGKILL each of ``pids`` that still has the parent recorded for it in ``parents`` (a
    snapshot from :func:`process_parents`); returns the pids signalled.

    The snapshot is a moment old: one of its processes may have exited since and its pid gone to
    another process. So a pid is pinned first (a pidfd names one process, never a later one with the
    same number), then checked against its recorded parent, and only then signalled through the
    pidfd. All are pinned and checked before any is killed, so a child is still recognised after
    its parent, killed first, would have left it an orphan.
    """
    pinned: list[tuple[int, int]] = []
    try:
        for pid in pids:
            try:
                fd = os.pidfd_open(pid)
            except OSError:  # gone already
                continue
            if parents_of([pid]).get(pid) == parents.get(pid):
                pinned.append((pid, fd))
            else:
                os.close(fd)
        for _, fd in pinned:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(fd, signal.SIGKILL)
    finally:
        for _, fd in pinned:
            os.close(fd)
    return [pid for pid, _ in pinned]
