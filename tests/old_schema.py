"""Old database schemas written by hand, for the in-place upgrade tests: Alembic up to a past
revision, then rows with only that release's columns (the ORM models describe today's schema)."""

from __future__ import annotations

import datetime

import sqlalchemy as sa
from alembic import command
from alembic.config import Config

from determined.master.db import Database
from determined.master.db._engine import MIGRATIONS_DIR

NOW = datetime.datetime(2026, 11, 1, 12, 0, tzinfo=datetime.timezone.utc)


def upgrade_to(db: Database, revision: str) -> None:
    """``alembic upgrade REVISION`` on the master's own migration scripts."""
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    with db.engine.begin() as connection:
        cfg.attributes["connection"] = connection
        command.upgrade(cfg, revision)


def _table(table: str, /, **columns: sa.types.TypeEngine) -> sa.TableClause:
    return sa.table(table, *(sa.column(c, t) for c, t in columns.items()))


JSON, INT, STR, BOOL, TS = sa.JSON(), sa.Integer(), sa.String(), sa.Boolean(), sa.DateTime(True)
USERS = _table(
    "users", id=INT, username=STR, password_hash=STR, admin=BOOL, active=BOOL, remote=BOOL,
    modified_at=TS,
)  # fmt: skip
EXPERIMENTS = _table(
    "experiments", id=INT, state=STR, config=JSON, original_config=STR, start_time=TS,
    end_time=TS, archived=BOOL, owner_id=INT, project_id=INT, job_id=STR, notes=STR, labels=JSON,
    priority=INT, weight=sa.Float(), unmanaged=BOOL,
)  # fmt: skip
RUNS = _table(
    "runs", id=INT, experiment_id=INT, request_id=STR, task_id=STR, state=STR, start_time=TS,
    end_time=TS, hparams=JSON, seed=INT, run_id=INT, restarts=INT, total_batches=INT,
    summary_metrics=JSON, runner_state=STR, metadata=JSON, early_stopped_by_searcher=BOOL,
    archived=BOOL,
)  # fmt: skip
METRICS = _table(
    "metrics", trial_id=INT, trial_run_id=INT, metric_group=STR, total_batches=INT, end_time=TS,
    metrics=JSON, archived=BOOL,
)  # fmt: skip
CHECKPOINTS = _table(
    "checkpoints_v2", uuid=STR, task_id=STR, report_time=TS, state=STR, resources=JSON,
    metadata=JSON, size=INT, trial_id=INT, experiment_id=INT, steps_completed=INT,
)  # fmt: skip
MODELS = _table(
    "models", name=STR, description=STR, metadata=JSON, labels=JSON, notes=STR, archived=BOOL,
    workspace_id=INT, creation_time=TS, last_updated_time=TS,
)  # fmt: skip
SESSIONS = _table(
    "user_sessions", user_id=INT, token_hash=STR, expiry=TS, created_at=TS, token_type=STR
)
NTSC = _table(
    "ntsc_tasks", task_id=STR, allocation_id=STR, kind=STR, owner_id=INT, description=STR,
    state=STR, ready=BOOL, argv=JSON, env=JSON, config=JSON, extra=JSON, resource_pool=STR,
    slots=INT, priority=INT, proxied=BOOL, start_time=TS, end_time=TS,
)  # fmt: skip
