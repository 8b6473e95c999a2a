"""Tables of the downsampled metric series the web UI's charts read (see ``_core/_metric_tiles``).

A tile summarises the numeric reports of one metric of one trial whose x (``total_batches``) falls
in ``[bucket * 2**level, (bucket + 1) * 2**level)``: how many, and the first, last, lowest and
highest point (x and value); a ``metric_tiles`` row holds the tiles of 8 consecutive buckets.
``metric_tile_series`` holds, per trial and metric group, which run last wrote the tiles, the x
range reported and the finest level kept.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, ForeignKey, Integer, LargeBinary, SmallInteger, String
from sqlalchemy.orm import Mapped, mapped_column

from determined.master.db._models import Base


class MetricTile(Base):
    """The tiles of up to 8 consecutive buckets (one chunk) of one metric of one trial at one
    level, column by column as JSON (see ``_core/_metric_tiles``)."""

    __tablename__ = "metric_tiles"
    trial_id: Mapped[int] = mapped_column(
        ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True
    )
    group: Mapped[str] = mapped_column("metric_group", String(255), primary_key=True)
    metric: Mapped[str] = mapped_column(String(255), primary_key=True)
    level: Mapped[int] = mapped_column(SmallInteger, primary_key=True, autoincrement=False)
    chunk: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    data: Mapped[bytes] = mapped_column(LargeBinary)


class MetricTileSeries(Base):
    """Per trial and metric group: the run whose reports the tiles hold, x range, finest level."""

    __tablename__ = "metric_tile_series"
    trial_id: Mapped[int] = mapped_column(
        ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True
    )
    group: Mapped[str] = mapped_column("metric_group", String(255), primary_key=True)
    run_id: Mapped[int] = mapped_column(Integer)
    x_min: Mapped[int] = mapped_column(BigInteger)
    x_max: Mapped[int] = mapped_column(BigInteger)
    level_min: Mapped[int] = mapped_column(SmallInteger)
