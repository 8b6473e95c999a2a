"""CPU time of processes and threads from Linux ``/proc``, for the benchmarks' per-part figures."""

from __future__ import annotations

import contextlib
import os
import pathlib

_TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(entry: int | str) -> float:
    """User + system CPU seconds so far of ``/proc/ENTRY``: a process id, or ``PID/task/TID``
    for one thread of a process. Raises OSError when it is gone (or on a system without /proc)."""
    fields = pathlib.Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def thread_cpu(pid: int | str = "self") -> dict[str, float]:
    """CPU seconds of each thread of process ``pid`` (this one by default), by thread id; a
    thread that ends while being read is left out (empty without /proc)."""
    out: dict[str, float] = {}
    for tid in _threads(pid):
        with contextlib.suppress(OSError):
            out[tid] = cpu_seconds(f"{pid}/task/{tid}")
    return out


def _threads(pid: int | str) -> list[str]:
    """The thread ids of process ``pid`` (none when it is gone or there is no /proc)."""
    try:
        return os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []


def helpers_cpu(pid: int | str = "self") -> dict[int, float]:
    """CPU seconds so far of each writer helper (``_writer_helpers``) that process ``pid`` (this
    one by default) runs: their CPU is the master's too."""
    out: dict[int, float] = {}
    for tid in _threads(pid):
        with contextlib.suppress(OSError):
            for child in pathlib.Path(f"/proc/{pid}/task/{tid}/children").read_text().split():
                with contextlib.suppress(OSError):
                    if b"_writer_helpers" in pathlib.Path(f"/proc/{child}/cmdline").read_bytes():
                        out[int(child)] = cpu_seconds(child)
    return out


def helpers_cpu_since(before: dict[int, float], pid: int | str = "self") -> float:
    """CPU seconds the writer helpers of ``pid`` spent since ``before`` (:func:`helpers_cpu`;
    a helper started since counts whole)."""
    return sum(cpu - before.get(child, 0.0) for child, cpu in helpers_cpu(pid).items())
