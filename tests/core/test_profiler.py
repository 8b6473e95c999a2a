"""ProfilerContext: system metrics reach the master in the expected groups; argument checks."""

from __future__ import annotations

import pathlib

import pytest
from fake_master import TRIAL_ID, OnCluster

from determined import core


def test_profiler_reports_system_groups(on_cluster: OnCluster) -> None:
    pytest.importorskip("psutil")
    fm = on_cluster.master
    groups = {"cpu", "memory", "disk", "network"}
    with core.init() as ctx:
        ctx.profiler.on(sampling_interval=0.1, samples_per_report=2)
        ctx.profiler.on(sampling_interval=0.1, samples_per_report=2)  # idempotent
        fm.wait_for(lambda: groups <= {r["group"] for r in fm.metric_reports()}, timeout=10)
        ctx.profiler.off()
    reports = {r["group"]: r for r in fm.metric_reports() if r["group"] in groups}
    for report in reports.values():
        inner = report["metrics"]
        assert inner["trialId"] == TRIAL_ID
        assert list(inner["metrics"]["avgMetrics"]) == ["agent-1"]  # keyed by agent id
    assert "cpu_util_simple" in reports["cpu"]["metrics"]["metrics"]["avgMetrics"]["agent-1"]
    assert "memory_free" in reports["memory"]["metrics"]["metrics"]["avgMetrics"]["agent-1"]
    network = reports["network"]["metrics"]["metrics"]["avgMetrics"]["agent-1"]
    assert {"net_throughput_sent", "net_throughput_recv"} <= set(network)
    disk = reports["disk"]["metrics"]["metrics"]["avgMetrics"]["agent-1"]
    assert {"disk_iops", "disk_throughput_read", "disk_throughput_write"} <= set(disk)
    count = len(fm.metric_reports())
    with core.init() as ctx:
        pass
    assert len(fm.metric_reports()) == count  # off() stopped it; a new context does not profile


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"sampling_interval": 0.05}, "sampling_interval"),
        ({"samples_per_report": 0}, "samples_per_report"),
        ({"samples_per_report": 1.5}, "samples_per_report"),
    ],
)
def test_profiler_bad_arguments(
    off_cluster: pathlib.Path, tmp_path: pathlib.Path, kwargs: dict, field: str
) -> None:
    with core.init(checkpoint_storage=str(tmp_path / "c")) as ctx:  # noqa: SIM117
        with pytest.raises(ValueError, match=field):
            ctx.profiler.on(**kwargs)
