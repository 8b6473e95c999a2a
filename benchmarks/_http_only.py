"""Imported into a benchmark's master process (``start_master_process(prelude="_http_only")``):
the metrics writer acknowledges every request of more than ``SMALL_REQUEST`` reports at once,
without storing it, so the master only receives, decodes and parses them (on the event loop: the
writer thread parses a request's reports, see ``_metric_requests.Deferred``). Small requests (the
ingest benchmark's probe) are still stored. What is left is the cost of the HTTP side alone, to
set beside the same load with the writer running (``bench_metrics_ingest.py --http-only``)."""

from __future__ import annotations

from typing import Any

from determined.master._core import _metrics_writer

_store = _metrics_writer.MetricsWriter.write_async


async def _write_async(self: Any, trial_id: int, reports: Any) -> None:
    if reports.size <= _metrics_writer.SMALL_REQUEST:
        await _store(self, trial_id, reports)
    else:
        reports.parse()  # what the writer thread would do before storing them


_metrics_writer.MetricsWriter.write_async = _write_async  # type: ignore[method-assign]
