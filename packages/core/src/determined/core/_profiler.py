"""ProfilerContext: sample system metrics (CPU, memory, disk, network, GPUs) and report them.

Samples are averaged over ``samples_per_report`` samples and reported as metric groups ``cpu``,
``memory``, ``disk``, ``network`` and ``gpu`` (when pynvml is importable), keyed by agent id.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

logger = logging.getLogger("determined.core")

Report = Callable[[str, dict[str, Any]], None]


def _sample() -> dict[str, dict[str, float]]:
    import psutil

    disk = psutil.disk_io_counters()
    net = psutil.net_io_counters()
    sample = {
        "cpu": {"cpu_util_simple": float(psutil.cpu_percent(interval=None))},
        "memory": {"memory_free": float(psutil.virtual_memory().available) / 2**30},
        "disk": {
            "disk_read_bytes": float(disk.read_bytes if disk else 0),
            "disk_write_bytes": float(disk.write_bytes if disk else 0),
            "disk_ops": float((disk.read_count + disk.write_count) if disk else 0),
            "disk_util": float(psutil.disk_usage("/").percent),
        },
        "network": {
            "net_sent_bytes": float(net.bytes_sent if net else 0),
            "net_recv_bytes": float(net.bytes_recv if net else 0),
        },
    }
    try:
        import pynvml
    except ImportError:
        return sample
    try:
        pynvml.nvmlInit()
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            util = pynvml.nvmlDeviceGetUtilizationRates(handle)
            memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
            sample.setdefault("gpu", {})[f"gpu{index}_util"] = float(util.gpu)
            sample["gpu"][f"gpu{index}_free_memory"] = float(memory.free) / 2**30
    except Exception as exc:  # no driver: report what we have
        logger.debug("pynvml unavailable: %s", exc)
    return sample


# Upstream's metric names for the per-second rates of the cumulative counters.
_RATE_NAMES = {
    "disk_read_bytes": "disk_throughput_read",
    "disk_write_bytes": "disk_throughput_write",
    "disk_ops": "disk_iops",
    "net_sent_bytes": "net_throughput_sent",
    "net_recv_bytes": "net_throughput_recv",
}


def _rates(
    first: dict[str, dict[str, float]], last: dict[str, dict[str, float]], seconds: float
) -> None:
    """Turn the cumulative disk/network counters of ``last`` into per-second rates in place."""
    seconds = max(seconds, 1e-6)
    for group, keys in (
        ("disk", ("disk_read_bytes", "disk_write_bytes", "disk_ops")),
        ("network", ("net_sent_bytes", "net_recv_bytes")),
    ):
        for key in keys:
            rate = (last[group][key] - first[group][key]) / seconds
            last[group][_RATE_NAMES[key]] = rate
            del last[group][key]


class ProfilerContext:
    """System-metrics profiling for this trial (only the local chief of each machine samples)."""

    def __init__(self, report: Report, agent_id: str, local_rank: int) -> None:
        self._report = report
        self._agent_id = agent_id
        self._local_rank = local_rank
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    def on(self, sampling_interval: float = 1, samples_per_report: int = 10) -> None:
        """Start sampling every ``sampling_interval`` seconds (≥ 0.1) and reporting averages."""
        if sampling_interval < 0.1:
            raise ValueError(f"sampling_interval: must be at least 0.1 s, got {sampling_interval}")
        if not isinstance(samples_per_report, int) or samples_per_report < 1:
            raise ValueError(
                f"samples_per_report: must be an integer ≥ 1, got {samples_per_report!r}"
            )
        if self._local_rank != 0 or (self._thread is not None and self._thread.is_alive()):
            return
        self._stop.clear()
        self._thread = threading.Thread(
            target=self._run,
            args=(sampling_interval, samples_per_report),
            name="det-profiler",
            daemon=True,
        )
        self._thread.start()

    def off(self) -> None:
        """Stop sampling (reports nothing further)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _run(self, interval: float, per_report: int) -> None:
        samples: list[dict[str, dict[str, float]]] = []
        started = time.monotonic()
        first = _sample()
        while not self._stop.wait(interval):
            samples.append(_sample())
            if len(samples) < per_report:
                continue
            last = samples[-1]
            _rates(first, last, time.monotonic() - started)
            averaged: dict[str, dict[str, float]] = {}
            for group in ("cpu", "memory", "gpu"):
                values = [s[group] for s in samples if group in s]
                if values:
                    averaged[group] = {
                        k: sum(v[k] for v in values) / len(values) for k in values[0]
                    }
            averaged["disk"] = last["disk"]
            averaged["network"] = last["network"]
            for group, metrics in averaged.items():
                try:
                    self._report(group, {self._agent_id: metrics})
                except Exception as exc:
                    logger.warning("profiler report failed: %s", exc)
                    return
            samples.clear()
            first = _sample()
            started = time.monotonic()
