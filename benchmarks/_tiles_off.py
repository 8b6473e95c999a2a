"""A ``start_tiles`` that starts nothing: the metrics writer then stores no chart tiles (what a
benchmark's "tiles off" variant swaps in; see ``_no_tiles`` and ``bench_pg_server_cost``)."""

from __future__ import annotations

from typing import Any

from determined.master._core import _metric_tiles


def no_tiles(session: Any, *_: Any) -> _metric_tiles.TileUpdate:
    """``_metric_tiles.start_tiles``' signature; the update it returns writes nothing."""
    return _metric_tiles.TileUpdate(session)
