"""Imported into a benchmark's master process (``start_master_process(prelude="_no_tiles")``): the
metrics writer stores no chart tiles (``update_tiles`` does nothing), everything else as usual. What
ingestion would reach if the tiles cost the master nothing (``bench_metrics_ingest.py
--no-tiles``); charts of such a master show nothing."""

from __future__ import annotations

from typing import Any

from determined.master._core import _metric_tiles


def _no_tiles(*args: Any, **kwargs: Any) -> None:
    return None


_metric_tiles.update_tiles = _no_tiles
