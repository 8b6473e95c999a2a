"""Reading stored chart tiles: a chart's levels of many trials, or every tile of one trial.

The tiles are written by ``_metric_tiles`` (chunks of 8 buckets per row, JSON columns); these
readers decode the chunks into tiles ``[bucket, *tile]`` in bucket order.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable
from typing import Any

import orjson
from sqlalchemy import Connection

from determined.master._core._metric_tiles import in_parts, paramstyle_sql
from determined.master._core._tile_columns import Tile


def _decoded(
    rows: Iterable[tuple[Any, ...]], out: dict[Any, list[Tile]], head: int
) -> dict[Any, list[Tile]]:
    """``out[row[:head]]`` extended with the tiles ``[bucket, *tile]`` of each chunk row
    ``(*key, data)``, rows in chunk order within each key."""
    key: Any = None
    target: list[Any] = []  # read-only tiles: tuples
    for row in rows:
        if row[:head] != key:
            key = row[:head]
            target = out[key]
        target.extend(zip(*orjson.loads(row[head]), strict=True))
    return out


def read_tiles(
    connection: Connection, levels: dict[int, int], group: str, metric: str | None
) -> dict[tuple[int, str], list[Tile]]:
    """``{(trial, metric): [bucket, *tile] in bucket order}`` of ``group`` at each trial's level of
    ``levels`` (``{trial: level}``), for one metric or (``None``) all of them. One query per
    distinct level."""
    by_level: dict[int, list[int]] = collections.defaultdict(list)
    for trial_id, level in levels.items():
        by_level[level].append(trial_id)
    out: dict[Any, list[Tile]] = collections.defaultdict(list)
    for level, trial_ids in sorted(by_level.items()):
        for part in in_parts(sorted(trial_ids)):
            marks = ", ".join("?" * len(part))
            sql = (
                f"SELECT trial_id, metric, data FROM metric_tiles WHERE trial_id IN ({marks}) "
                "AND metric_group = ? AND level = ?"
            )
            params: list[Any] = [*part, group, level]
            if metric is not None:
                sql += " AND metric = ?"
                params.append(metric)
            sql += " ORDER BY trial_id, metric, chunk"
            # Tuples straight from the driver's cursor, no per-row Row objects.
            result = connection.exec_driver_sql(paramstyle_sql(connection, sql), tuple(params))
            try:
                _decoded(result.cursor.fetchall(), out, 2)
            finally:
                result.close()
    return out


def trial_tiles(connection: Connection, trial_id: int) -> dict[tuple[str, str, int], list[Tile]]:
    """``{(group, metric, level): [bucket, *tile] in bucket order}`` of every stored tile of one
    trial (for checks and exports; a chart reads :func:`read_tiles`)."""
    result = connection.exec_driver_sql(
        paramstyle_sql(
            connection,
            "SELECT metric_group, metric, level, data FROM metric_tiles WHERE trial_id = ? "
            "ORDER BY metric_group, metric, level, chunk",
        ),
        (trial_id,),
    )
    try:
        return _decoded(result.cursor.fetchall(), collections.defaultdict(list), 3)
    finally:
        result.close()
