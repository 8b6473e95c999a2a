"""Alembic environment: migrations run on the connection the master hands over."""

from __future__ import annotations

from alembic import context

from determined.master.db._models import Base

connection = context.config.attributes.get("connection")
if connection is None:  # pragma: no cover - only when alembic is run by hand
    raise RuntimeError("run migrations through determined.master.db.Database.migrate()")
context.configure(
    connection=connection,
    target_metadata=Base.metadata,
    render_as_batch=connection.dialect.name == "sqlite",
)
with context.begin_transaction():
    context.run_migrations()
