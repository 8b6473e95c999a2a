"""Imported into a benchmark's master process (``start_master_process(prelude="_no_tiles")``): the
metrics writer stores no chart tiles (``start_tiles`` starts nothing), everything else as usual. What
ingestion would reach if the tiles cost the master nothing (``bench_metrics_ingest.py
--no-tiles``); charts of such a master show nothing."""

from __future__ import annotations

from _tiles_off import no_tiles

from determined.master._core import _metric_tiles

_metric_tiles.start_tiles = no_tiles
