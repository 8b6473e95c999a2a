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
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        with contextlib.suppress(OSError):
            out[tid] = cpu_seconds(f"{pid}/task/{tid}")
    return out
