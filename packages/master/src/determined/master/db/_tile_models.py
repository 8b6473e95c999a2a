"""Tables of the downsampled metric series the web UI's charts read (see ``_core/_metric_tiles``).

A tile summarises the numeric reports of one metric of one trial whose x (``total_batches``) falls
in ``[bucket * 2**level, (bucket + 1) * 2**level)``: how many, and the first, last, lowest and
highest point (x and value). ``metric_tile_series`` holds, per trial and metric group, which run
last wrote the tiles, the x range reported and the finest level kept.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Float, ForeignKey, Integer, SmallInteger, String
from sqlalchemy.orm import Mapped, mapped_column

from determined.master.db._models import Base


class MetricTile(Base):
    """Count, first, last, min and max point of one metric of one trial over one x bucket."""

    __tablename__ = "metric_tiles"
    __table_args__ = {"sqlite_with_rowid": False}  # one B-tree, clustered on the key
    trial_id: Mapped[int] = mapped_column(
        ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True
    )
    group: Mapped[str] = mapped_column("metric_group", String(255), primary_key=True)
    metric: Mapped[str] = mapped_column(String(255), primary_key=True)
    level: Mapped[int] = mapped_column(SmallInteger, primary_key=True, autoincrement=False)
    bucket: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    n: Mapped[int] = mapped_column(BigInteger)
    first_x: Mapped[int] = mapped_column(BigInteger)
    first_y: Mapped[float] = mapped_column(Float(precision=53))
    last_x: Mapped[int] = mapped_column(BigInteger)
    last_y: Mapped[float] = mapped_column(Float(precision=53))
    min_x: Mapped[int] = mapped_column(BigInteger)
    min_y: Mapped[float] = mapped_column(Float(precision=53))
    max_x: Mapped[int] = mapped_column(BigInteger)
    max_y: Mapped[float] = mapped_column(Float(precision=53))


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
