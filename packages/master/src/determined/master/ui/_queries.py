"""The UI's reads: a few set-based queries per page, never one query per row.

The experiment list pages with a keyset cursor (the last row's sort value and id), so page N costs
what page 1 costs; the default order (newest first) walks the primary key.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import json
from collections.abc import Collection, Sequence
from typing import Any

from sqlalchemy import and_, func, or_, select
from sqlalchemy.orm import Session

from determined.master._wire import EXPERIMENT_STATES as ALL_EXPERIMENT_STATES
from determined.master._wire import TERMINAL_STATES, APIError, as_utc, numeric_id
from determined.master.db import (
    Checkpoint,
    Experiment,
    Metric,
    Run,
    User,
)
from determined.master.db._visibility import experiments_visible
from determined.master.ui._series import TrialVersion, to_number
from determined.master.ui._workspace_queries import (
    fill_locations,
    require_visible_experiment,
)

EXPERIMENT_STATES = tuple(s for s in ALL_EXPERIMENT_STATES if not s.startswith("DELET"))
"""The states the experiment list filters by (deleting and deleted ones are not listed)."""
PAGE_SIZES = (20, 50, 100, 200, 500)

_NAME = func.coalesce(Experiment.config["name"].as_string(), "")
SORTS: dict[str, Any] = {
    "id": Experiment.id,
    "name": _NAME,
    "state": Experiment.state,
    "start": Experiment.start_time,
    "progress": func.coalesce(Experiment.progress, -1.0),
    "owner": User.username,
}


def searcher_of(config: dict[str, Any]) -> tuple[str, bool]:
    """(searcher metric name, smaller_is_better) of an experiment config."""
    searcher = config.get("searcher") or {}
    return str(searcher.get("metric") or ""), bool(searcher.get("smaller_is_better", True))


# ---------------------------------------------------------------------------------------------
# Experiment list


@dataclasses.dataclass
class ExperimentFilter:
    """What the experiment list shows: filters, sort and page."""

    name: str = ""
    state: str = ""
    owner: str = ""
    label: str = ""
    archived: bool = False
    project: int | None = None
    sort: str = "id"
    desc: bool = True
    limit: int = 50
    after: str = ""
    before: str = ""

    @classmethod
    def parse(cls, query: Any) -> ExperimentFilter:
        """From query parameters; 400 naming the parameter on bad values."""
        sort = query.get("sort") or "id"
        if sort not in SORTS:
            raise APIError(400, f"sort: must be one of {', '.join(SORTS)}, got {sort!r}")
        order = query.get("order") or "desc"
        if order not in ("asc", "desc"):
            raise APIError(400, f"order: must be 'asc' or 'desc', got {order!r}")
        state = (query.get("state") or "").upper()
        if state and state not in EXPERIMENT_STATES:
            raise APIError(400, f"state: unknown experiment state {state!r}")
        raw_limit = query.get("limit") or "50"
        try:
            limit = int(raw_limit)
        except ValueError:
            raise APIError(400, f"limit: must be an integer, got {raw_limit!r}") from None
        if not 1 <= limit <= 500:
            raise APIError(400, "limit: must be between 1 and 500")
        project = query.get("project") or ""
        if project and numeric_id(project) is None:
            raise APIError(400, f"project: must be a project id, got {project!r}")
        return cls(
            name=(query.get("name") or "").strip(),
            state=state,
            owner=(query.get("owner") or "").strip(),
            label=(query.get("label") or "").strip(),
            archived=(query.get("archived") or "") in ("1", "true", "on", "yes"),
            project=int(project) if project else None,
            sort=sort,
            desc=order == "desc",
            limit=limit,
            after=query.get("after") or "",
            before=query.get("before") or "",
        )

    def params(self, **changes: Any) -> dict[str, str]:
        """Query parameters reproducing this filter (with ``changes``), defaults left out."""
        merged = dataclasses.replace(self, **changes)
        out = {
            "name": merged.name,
            "state": merged.state,
            "owner": merged.owner,
            "label": merged.label,
            "archived": "1" if merged.archived else "",
            "project": "" if merged.project is None else str(merged.project),
            "sort": "" if merged.sort == "id" else merged.sort,
            "order": "" if merged.desc else "asc",
            "limit": "" if merged.limit == 50 else str(merged.limit),
            "after": merged.after,
            "before": merged.before,
        }
        return {k: v for k, v in out.items() if v}


def _encode_cursor(value: Any, row_id: int) -> str:
    if isinstance(value, datetime.datetime):
        value = as_utc(value).isoformat()  # type: ignore[union-attr]
    raw = json.dumps([value, row_id]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_cursor(text: str, sort: str, name: str) -> tuple[Any, int]:
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        value, row_id = json.loads(raw)
        if sort == "start":
            value = datetime.datetime.fromisoformat(value)
        elif sort in ("id",):
            value = int(value)
        elif sort == "progress":
            value = float(value)
        else:
            value = str(value)
        return value, int(row_id)
    except (ValueError, TypeError, json.JSONDecodeError):
        raise APIError(400, f"{name}: invalid page cursor") from None


@dataclasses.dataclass
class ExperimentRow:
    id: int
    name: str
    state: str
    progress: float | None
    owner: str
    start_time: datetime.datetime
    end_time: datetime.datetime | None
    labels: list[str]
    archived: bool
    searcher_metric: str
    smaller_is_better: bool
    num_trials: int = 0
    best: float | None = None
    description: str = ""
    project_id: int = 1
    location: Any = None
    """Its workspace and project (a ``_workspace_queries.Location``)."""


@dataclasses.dataclass
class ExperimentPage:
    rows: list[ExperimentRow]
    total: int
    next_cursor: str | None
    prev_cursor: str | None


def _filtered(flt: ExperimentFilter, visible: Collection[int] | None) -> Any:
    stmt = (
        select(Experiment, User.username)
        .join(User, User.id == Experiment.owner_id)
        .where(Experiment.state.notin_(("DELETED", "DELETING")))
    )
    if visible is not None:
        stmt = stmt.where(experiments_visible(visible))
    if flt.project is not None:
        stmt = stmt.where(Experiment.project_id == flt.project)
    if not flt.archived:
        stmt = stmt.where(Experiment.archived.is_(False))
    if flt.state:
        stmt = stmt.where(Experiment.state == flt.state)
    if flt.owner:
        stmt = stmt.where(User.username == flt.owner)
    if flt.name:
        stmt = stmt.where(func.lower(_NAME).contains(flt.name.lower(), autoescape=True))
    if flt.label:
        # Labels are a JSON list of strings: match the JSON-encoded element, quotes included.
        from sqlalchemy import String, cast

        stmt = stmt.where(
            cast(Experiment.labels, String).contains(json.dumps(flt.label), autoescape=True)
        )
    return stmt


def experiment_page(
    session: Session, flt: ExperimentFilter, visible: Collection[int] | None = None
) -> ExperimentPage:
    """One page of the experiment list (of the ``visible`` workspaces' experiments; None: all),
    with trial counts, best searcher metrics and each experiment's workspace and project."""
    key = SORTS[flt.sort]
    base = _filtered(flt, visible)
    total = int(session.scalar(select(func.count()).select_from(base.subquery())) or 0)
    backwards = bool(flt.before) and not flt.after
    desc = flt.desc != backwards
    stmt = base.add_columns(key.label("sort_key"))
    cursor_text = flt.before if backwards else flt.after
    if cursor_text:
        value, row_id = _decode_cursor(cursor_text, flt.sort, "before" if backwards else "after")
        if desc:
            stmt = stmt.where(or_(key < value, and_(key == value, Experiment.id < row_id)))
        else:
            stmt = stmt.where(or_(key > value, and_(key == value, Experiment.id > row_id)))
    order = (key.desc(), Experiment.id.desc()) if desc else (key.asc(), Experiment.id.asc())
    rows = list(session.execute(stmt.order_by(*order).limit(flt.limit + 1)))
    more = len(rows) > flt.limit
    rows = rows[: flt.limit]
    if backwards:
        rows.reverse()
    out: list[ExperimentRow] = []
    for exp, username, _ in rows:
        metric, smaller = searcher_of(exp.config)
        out.append(
            ExperimentRow(
                id=exp.id,
                name=str(exp.config.get("name") or ""),
                state=exp.state,
                progress=exp.progress,
                owner=username,
                start_time=exp.start_time,
                end_time=exp.end_time,
                labels=[str(x) for x in exp.labels or []],
                archived=exp.archived,
                searcher_metric=metric,
                smaller_is_better=smaller,
                description=str(exp.config.get("description") or ""),
                project_id=exp.project_id,
            )
        )
    fill_trial_stats(session, out)
    fill_locations(session, out)
    keys = [(r[2], r[0].id) for r in rows]
    # Forward: more rows follow when the page overflowed; rows precede when we came via `after`.
    # Backward (via `before`): the mirror image.
    has_next = True if backwards else more
    has_prev = more if backwards else bool(flt.after)
    return ExperimentPage(
        rows=out,
        total=total,
        next_cursor=_encode_cursor(*keys[-1]) if keys and has_next else None,
        prev_cursor=_encode_cursor(*keys[0]) if keys and has_prev else None,
    )


def fill_trial_stats(session: Session, rows: Sequence[ExperimentRow]) -> None:
    """Trial counts and best searcher metric of each row: one grouped query."""
    if not rows:
        return
    stats = session.execute(
        select(
            Run.experiment_id,
            func.count(Run.id),
            func.min(Run.searcher_metric_value),
            func.max(Run.searcher_metric_value),
        )
        .where(Run.experiment_id.in_([r.id for r in rows]))
        .group_by(Run.experiment_id)
    )
    by_id = {exp_id: (n, low, high) for exp_id, n, low, high in stats}
    for row in rows:
        n, low, high = by_id.get(row.id, (0, None, None))
        row.num_trials = int(n)
        row.best = low if row.smaller_is_better else high


def owners(session: Session) -> list[str]:
    return list(session.scalars(select(User.username).order_by(User.username)))


# ---------------------------------------------------------------------------------------------
# One experiment


def get_experiment(
    session: Session, experiment_id: int, visible: Collection[int] | None = None
) -> tuple[Experiment, str]:
    """The experiment and its owner's name; 404 when missing, deleted or outside ``visible``."""
    row = session.execute(
        select(Experiment, User.username)
        .join(User, User.id == Experiment.owner_id)
        .where(Experiment.id == experiment_id)
    ).first()
    if row is None or row[0].state in ("DELETED", "DELETING"):
        raise APIError(404, f"experiment {experiment_id} not found")
    require_visible_experiment(session, row[0], visible, f"experiment {experiment_id}")
    return row[0], row[1]


@dataclasses.dataclass
class TrialRow:
    id: int
    experiment_id: int
    state: str
    hparams: dict[str, Any]
    restarts: int
    batches: int
    best: float | None
    latest: float | None
    checkpoints: int
    checkpoint_size: int
    start_time: datetime.datetime
    end_time: datetime.datetime | None
    progress: float | None
    version: TrialVersion
    groups: dict[str, list[str]]
    summary: dict[str, Any] = dataclasses.field(default_factory=dict)
    parent: int | None = None
    """The trial whose checkpoint this one was warm-started from (PBT's copies, source_trial_id)."""

    def reports(self, group: str, metric: str) -> int:
        """How many reports of ``metric`` in ``group`` the trial made (from its summary)."""
        entry = (self.summary.get(group) or {}).get(metric) or {}
        try:
            return int(entry.get("count") or 0)
        except (TypeError, ValueError):
            return 0


def numeric_metrics(summary: dict[str, Any] | None) -> dict[str, list[str]]:
    """group -> names of the numeric metrics a trial reported (from its summary, no scan)."""
    out: dict[str, list[str]] = {}
    for group, metrics in (summary or {}).items():
        if isinstance(metrics, dict):
            names = [
                name
                for name, entry in metrics.items()
                if isinstance(entry, dict) and entry.get("type") == "number"
            ]
            if names:
                out[group] = sorted(names)
    return out


def version_of(run: Run) -> TrialVersion:
    activity = as_utc(run.last_activity)
    return TrialVersion(run.run_id, activity.isoformat() if activity else "")


def trial_rows(session: Session, runs: Sequence[Run], metric_of: dict[int, str]) -> list[TrialRow]:
    """Table rows for ``runs``; ``metric_of`` maps experiment id -> searcher metric name.

    Four queries at most whatever the number of trials: the runs (given), their checkpoint
    totals, their latest validation reports and the trials their warm-start checkpoints came from.
    """
    if not runs:
        return []
    ids = [r.id for r in runs]
    ckpts = {
        trial_id: (int(n), int(size or 0))
        for trial_id, n, size in session.execute(
            select(Checkpoint.trial_id, func.count(Checkpoint.id), func.sum(Checkpoint.size))
            .where(Checkpoint.trial_id.in_(ids), Checkpoint.state == "COMPLETED")
            .group_by(Checkpoint.trial_id)
        )
    }
    latest_ids = [r.latest_validation_id for r in runs if r.latest_validation_id]
    latest: dict[int, dict[str, Any]] = {}
    if latest_ids:
        for metric_id, metrics in session.execute(
            select(Metric.id, Metric.metrics).where(Metric.id.in_(latest_ids))
        ):
            latest[metric_id] = (metrics or {}).get("avg_metrics") or {}
    parents = warm_start_parents(session, [r.warm_start_checkpoint_uuid for r in runs])
    out = []
    for run in runs:
        name = metric_of.get(run.experiment_id, "")
        latest_value = (
            to_number(latest.get(run.latest_validation_id or -1, {}).get(name)) if name else None
        )
        n, size = ckpts.get(run.id, (0, 0))
        out.append(
            TrialRow(
                id=run.id,
                experiment_id=run.experiment_id,
                state=run.state,
                hparams=run.hparams or {},
                restarts=run.restarts,
                batches=int(run.total_batches or 0),
                best=run.searcher_metric_value,
                latest=latest_value,
                checkpoints=n,
                checkpoint_size=size,
                start_time=run.start_time,
                end_time=run.end_time,
                progress=run.progress,
                version=version_of(run),
                groups=numeric_metrics(run.summary_metrics),
                summary=run.summary_metrics or {},
                parent=parents.get(run.warm_start_checkpoint_uuid or ""),
            )
        )
    return out


def warm_start_parents(session: Session, uuids: Collection[str | None]) -> dict[str, int]:
    """checkpoint uuid -> the trial that saved it, for trials' warm-start checkpoints (their
    parents: PBT's lineage); one query, none without a uuid."""
    wanted = {uuid for uuid in uuids if uuid}
    if not wanted:
        return {}
    return {
        uuid: int(trial_id)
        for uuid, trial_id in session.execute(
            select(Checkpoint.uuid, Checkpoint.trial_id).where(Checkpoint.uuid.in_(wanted))
        )
        if trial_id is not None
    }


def flatten_hparams(hparams: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested hyperparameters as ``a.b`` keys."""
    out: dict[str, Any] = {}
    for name, value in (hparams or {}).items():
        key = f"{prefix}{name}"
        if isinstance(value, dict) and value:
            out.update(flatten_hparams(value, key + "."))
        else:
            out[key] = value
    return out


def merge_groups(rows: Sequence[TrialRow]) -> dict[str, list[str]]:
    """The union of every trial's metric names, per group (validation first, then training)."""
    merged: dict[str, set[str]] = {}
    for row in rows:
        for group, names in row.groups.items():
            merged.setdefault(group, set()).update(names)
    order = sorted(merged, key=lambda g: (g != "validation", g != "training", g))
    return {g: sorted(merged[g]) for g in order}


# ---------------------------------------------------------------------------------------------
# Trials


def get_trial(
    session: Session, trial_id: int, visible: Collection[int] | None = None
) -> tuple[Run, Experiment]:
    """A trial and its experiment; 404 when missing, deleted or outside ``visible``."""
    run = session.get(Run, trial_id)
    exp = session.get(Experiment, run.experiment_id) if run is not None else None
    if run is None or exp is None or exp.state in ("DELETED", "DELETING"):
        raise APIError(404, f"trial {trial_id} not found")
    require_visible_experiment(session, exp, visible, f"trial {trial_id}")
    return run, exp


def trial_checkpoints(session: Session, trial_id: int) -> list[Checkpoint]:
    return list(
        session.scalars(
            select(Checkpoint)
            .where(Checkpoint.trial_id == trial_id)
            .order_by(Checkpoint.steps_completed.desc(), Checkpoint.id.desc())
        )
    )


def checkpoint_by_uuid(session: Session, uuid: str) -> Checkpoint | None:
    return session.scalar(select(Checkpoint).where(Checkpoint.uuid == uuid))


def trials_by_id(
    session: Session, trial_ids: Sequence[int], visible: Collection[int] | None = None
) -> list[TrialRow]:
    """Rows for trials of any (visible) experiments, in the order asked; others are skipped."""
    runs = list(session.scalars(select(Run).where(Run.id.in_(list(trial_ids)))))
    stmt = select(Experiment).where(Experiment.id.in_({r.experiment_id for r in runs}))
    if visible is not None:
        stmt = stmt.where(experiments_visible(visible))
    exps = {e.id: e for e in session.scalars(stmt)}
    runs = [r for r in runs if r.experiment_id in exps and exps[r.experiment_id].state != "DELETED"]
    rows = trial_rows(session, runs, {i: searcher_of(e.config)[0] for i, e in exps.items()})
    position = {t: i for i, t in enumerate(trial_ids)}
    return sorted(rows, key=lambda r: position.get(r.id, 0))


def search_trials(
    session: Session, text: str, limit: int = 50, visible: Collection[int] | None = None
) -> list[dict[str, Any]]:
    """Trials for the compare picker: by trial id, experiment id or experiment name."""
    stmt = (
        select(Run, Experiment)
        .join(Experiment, Experiment.id == Run.experiment_id)
        .where(Experiment.state.notin_(("DELETED", "DELETING")))
    )
    if visible is not None:
        stmt = stmt.where(experiments_visible(visible))
    text = text.strip()
    number = numeric_id(text)
    if number is not None:
        stmt = stmt.where(or_(Run.id == number, Run.experiment_id == number))
    elif text:
        stmt = stmt.where(func.lower(_NAME).contains(text.lower(), autoescape=True))
    out = []
    for run, exp in session.execute(stmt.order_by(Run.id.desc()).limit(limit)):
        metric, _ = searcher_of(exp.config)
        out.append(
            {
                "id": run.id,
                "experimentId": exp.id,
                "experimentName": str(exp.config.get("name") or ""),
                "state": run.state,
                "hparams": flatten_hparams(run.hparams or {}),
                "searcherMetric": metric,
                "best": run.searcher_metric_value,
            }
        )
    return out


def is_terminal(state: str) -> bool:
    return state in TERMINAL_STATES
