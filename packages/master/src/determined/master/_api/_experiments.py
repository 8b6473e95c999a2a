"""Experiment routes: create, list, get, patch, continue, delete (actions: _experiment_actions)."""

from __future__ import annotations

import base64
from typing import Any

import yaml
from fastapi import Depends, Request
from sqlalchemy import bindparam, func, select
from sqlalchemy.orm import Session

from determined.master._api import _serialize
from determined.master._api._access import (
    P,
    acting_user,
    experiment_workspace,
    on_experiment,
    require_experiment,
    require_project,
    visible,
)
from determined.master._api._config_policies import shape_experiment
from determined.master._api._deps import (
    Principal,
    authenticate,
    authz_of,
    bool_param,
    experiments_of,
    int_param,
    json_body,
    master_of,
)
from determined.master._api._json_route import api_router
from determined.master._api._templates import with_template
from determined.master._api._trial_sort import check_trial_sort, sort_trial_json, sql_sort_column
from determined.master._api._yaml_input import load_yaml
from determined.master._core._context import ContextError, pack_files
from determined.master._core._experiments import ExperimentPatch
from determined.master._core._quotas import check_experiment_quota
from determined.master._limits import check_experiment_config
from determined.master._wire import TERMINAL_STATES, APIError, get, pagination, sub_object, unstate
from determined.master.db import Experiment, Metric, Run, User, core_rows
from determined.master.db._visibility import experiments_visible

router = api_router(tags=["Experiments"])

SORT_COLUMNS = {
    "SORT_BY_ID": Experiment.id,
    "SORT_BY_START_TIME": Experiment.start_time,
    "SORT_BY_END_TIME": Experiment.end_time,
    "SORT_BY_STATE": Experiment.state,
    "SORT_BY_PROGRESS": Experiment.progress,
    "SORT_BY_USER": Experiment.owner_id,
}


def validate_config(master: Any, raw: Any, storage: dict[str, Any] | None = None) -> Any:
    """Validate an experiment config (YAML text or a mapping); APIError 400 with every problem.

    ``storage`` (a workspace's ``checkpoint_storage_config``) is merged under the config's own
    ``checkpoint_storage`` instead of the master's default, as upstream.
    """
    import determined.config as expconf

    if raw is None or raw == "":
        raise APIError(400, "config: required (the experiment configuration as YAML text)")
    if isinstance(raw, str):
        parsed = load_yaml(raw, "config")
        if not isinstance(parsed, dict):
            raise APIError(400, "config: the experiment configuration must be a YAML mapping")
    elif not isinstance(raw, dict):
        raise APIError(400, "config: must be YAML text or an object")
    try:
        validated = expconf.validate_experiment_config(
            raw,
            defaults={"checkpoint_storage": storage or master.config.checkpoint_storage_config()},
            require_entrypoint=True,
        )
    except expconf.InvalidConfigError as e:
        raise APIError(400, f"invalid experiment configuration: {e}") from None
    except ValueError as e:
        raise APIError(400, f"invalid experiment configuration: {e}") from None
    check_experiment_config(master.config, validated.config)  # docs/security.md
    return validated


_LIVE_EXPERIMENT = select(Experiment.__table__.c.id).where(
    Experiment.__table__.c.id == bindparam("id"), Experiment.__table__.c.state != "DELETED"
)
"""One row when the experiment exists and is not deleted (what :func:`_get_exp` checks)."""


def _get_exp(session: Session, exp_id: int) -> Experiment:
    exp = session.get(Experiment, exp_id)
    if exp is None or exp.state == "DELETED":
        raise APIError(404, f"experiment {exp_id} not found")
    return exp


@router.post("/api/v1/experiments")
def create_experiment(
    request: Request,
    body: dict[str, Any] = Depends(json_body),
    principal: Principal = Depends(authenticate),
) -> dict[str, Any]:
    """Create an experiment from a YAML config and an uploaded context directory."""
    master = master_of(request)
    if bool_param(get(body, "unmanaged")):
        from determined.master._api._unmanaged import create_unmanaged_experiment

        return create_unmanaged_experiment(request, body, principal, None)
    raw = get(body, "config")
    template = get(body, "template")
    merged = with_template(request, principal, raw, template) if template else raw
    validated = validate_config(master, merged)
    config = validated.config
    original = raw if isinstance(raw, str) else yaml.safe_dump(raw)
    files = get(body, "model_definition") or []
    if not isinstance(files, list):
        raise APIError(400, "modelDefinition: must be a list of files")
    try:
        tarball = pack_files(files, master.config.limits_config().max_context_bytes)
    except ContextError as e:
        raise APIError(400, f"modelDefinition: {e}") from None
    resources = config.get("resources") or {}
    slots = int(resources.get("slots_per_trial", 1))
    problem = master.rm.validate(slots, resource_pool=resources.get("resource_pool") or "default")
    if problem:
        raise APIError(400, f"resources: {problem}")
    try:
        from determined.master.searchers import Searcher

        Searcher(config)
    except ValueError as e:
        raise APIError(400, f"searcher: {e}") from None
    parent_id = int_param(get(body, "parent_id"), "parentId")
    projects = master.manager.projects
    project_id = projects.experiment_target(int_param(get(body, "project_id"), "projectId"), config)
    require_project(request, principal, project_id, P.CREATE_EXPERIMENT)
    projects.check_can_add(project_id)
    workspace_id = authz_of(request).workspace_of_project(project_id)
    pool = resources.get("resource_pool") or (
        master.manager.workspaces.default_pool_of_project(project_id, slots) or "default"
    )
    shaped = shape_experiment(request, merged, workspace_id, pool)  # docs/config_policies.md
    if shaped is not merged:
        merged = shaped
        validated = validate_config(master, merged)
        config = validated.config
    workspace_storage = master.manager.workspaces.checkpoint_storage_of_project(project_id)
    if workspace_storage is not None:
        validated = validate_config(master, merged, workspace_storage)
        config = validated.config
    workspace_pool = master.manager.workspaces.default_pool_of_project(project_id, slots)
    if workspace_pool and not (config.get("resources") or {}).get("resource_pool"):
        config.setdefault("resources", {})["resource_pool"] = workspace_pool
        problem = master.rm.validate(slots, resource_pool=workspace_pool)
        if problem:
            raise APIError(400, f"resources: {problem} (the workspace's default pool)")
    master.manager.config_policies.check_experiment(workspace_id, config)
    if parent_id is not None:
        require_experiment(request, principal, parent_id, P.VIEW_EXPERIMENT_METADATA)
    # Upstream's `warnings` holds only LaunchWarning enum values (its client rejects anything else);
    # config deprecations travel in det's own `configWarnings`.
    warnings: list[str] = []
    config_warnings = list(validated.warnings)
    if get(body, "validate_only"):  # as upstream: a zero-valued experiment, nothing created
        answer = {"config": config, "warnings": warnings, "configWarnings": config_warnings}
        return {**answer, "experiment": _serialize.validated_experiment(config, project_id)}
    activate = bool_param(get(body, "activate"), False)
    check_experiment_quota(master.db, principal.user, master.config.limits_config())
    exp_id = experiments_of(request).create(
        owner_id=principal.user.id,
        config=config,
        original=original,
        model_definition=tarball,
        activate=activate,
        parent_id=parent_id,
        project_id=project_id,
    )
    with master.db.read() as session:
        exp = _get_exp(session, exp_id)
        return {
            "experiment": _serialize.experiment(session, exp, full=True),
            "config": exp.config,
            "warnings": warnings,
            "configWarnings": config_warnings,
        }


@router.get("/api/v1/experiments")
def list_experiments(
    request: Request, principal: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """List experiments with filters, sorting and pagination (limit <= 500)."""
    q = request.query_params
    offset = int_param(q.get("offset"), "offset", 0) or 0
    limit = int_param(q.get("limit"), "limit", 100) or 100
    if limit < -1 or limit > 500:
        raise APIError(400, "limit: must be between 0 and 500, or -1 for every experiment")
    limit = 0 if limit == -1 else limit  # -1: all of them, as upstream
    stmt = select(Experiment).where(Experiment.state != "DELETED")
    stmt = stmt.where(experiments_visible(visible(request, principal, P.VIEW_EXPERIMENT_METADATA)))
    if q.get("archived") not in (None, ""):
        archived = bool_param(q.get("archived"))
        stmt = stmt.where(Experiment.archived.is_(archived))
        if not archived and not q.get("projectId"):  # as upstream: nor in an archived project
            stmt = stmt.where(Experiment.project_id.in_(_unarchived_projects()))
    states = [unstate(s) for s in q.getlist("states") if s]
    if states:
        stmt = stmt.where(Experiment.state.in_(states))
    users = q.getlist("users")
    if users:
        stmt = stmt.where(Experiment.owner_id.in_(select(User.id).where(User.username.in_(users))))
    user_ids = [int_param(u, "userIds") for u in q.getlist("userIds")]
    if user_ids:
        stmt = stmt.where(Experiment.owner_id.in_(user_ids))
    stmt = _id_and_project_filters(stmt, q)
    order = q.get("orderBy", "ORDER_BY_ASC")
    sort = q.get("sortBy", "SORT_BY_ID")
    column = SORT_COLUMNS.get(sort, Experiment.id)
    stmt = stmt.order_by(column.desc() if order == "ORDER_BY_DESC" else column.asc(), Experiment.id)
    name = q.get("name")
    labels = [label for label in q.getlist("labels") if label]
    master = master_of(request)
    with master.db.read() as session:
        if name or labels or sort == "SORT_BY_NAME":
            # Filters and an order on values inside the stored config and labels (JSON): applied
            # to the decoded rows.
            rows = list(session.scalars(stmt))
            if name:
                rows = [r for r in rows if name.lower() in str(r.config.get("name", "")).lower()]
            if labels:
                rows = [r for r in rows if set(labels) <= set(r.labels or [])]
            if sort == "SORT_BY_NAME":
                rows.sort(
                    key=lambda r: str(r.config.get("name", "")), reverse=order == "ORDER_BY_DESC"
                )
            total = len(rows)
            page = rows[offset : offset + limit] if limit else rows[offset:]
        else:
            # Everything else pages in SQL: a page of 50 no longer decodes every experiment.
            total = int(
                session.scalar(select(func.count()).select_from(stmt.order_by(None).subquery()))
                or 0
            )
            paged = stmt.offset(offset).limit(limit) if limit else stmt.offset(offset)
            page = list(session.scalars(paged))
        return {
            "experiments": _serialize.experiments(session, page),
            "pagination": pagination(offset, limit, len(page), total),
        }


def _unarchived_projects() -> Any:
    """The ids of the projects that are not archived, nor in an archived workspace."""
    from determined.master.db import Project, Workspace

    return (
        select(Project.id)
        .join(Workspace, Workspace.id == Project.workspace_id)
        .where(Project.archived.is_(False), Workspace.archived.is_(False))
    )


def _id_and_project_filters(stmt: Any, q: Any) -> Any:
    """Upstream's ``experimentIdFilter.*`` and ``projectId`` list filters."""
    ids = [int_param(x, "experimentIdFilter.incl") for x in q.getlist("experimentIdFilter.incl")]
    if ids:
        stmt = stmt.where(Experiment.id.in_(ids))
    not_in = [
        int_param(x, "experimentIdFilter.notIn") for x in q.getlist("experimentIdFilter.notIn")
    ]
    if not_in:
        stmt = stmt.where(Experiment.id.not_in(not_in))
    for op, compare in (
        ("gt", Experiment.id.__gt__),
        ("gte", Experiment.id.__ge__),
        ("lt", Experiment.id.__lt__),
        ("lte", Experiment.id.__le__),
    ):
        bound = int_param(q.get(f"experimentIdFilter.{op}"), f"experimentIdFilter.{op}")
        if bound is not None:
            stmt = stmt.where(compare(bound))
    project_id = int_param(q.get("projectId"), "projectId")
    if project_id:
        stmt = stmt.where(Experiment.project_id == project_id)
    return stmt


@router.get(
    "/api/v1/experiments/{experiment_id}",
    dependencies=[on_experiment(P.VIEW_EXPERIMENT_METADATA)],
)
def get_experiment(
    request: Request, experiment_id: int, principal: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """One experiment with its config and job summary."""
    with master_of(request).db.read() as session:
        exp = _get_exp(session, experiment_id)
        return {
            "experiment": _serialize.experiment(session, exp, full=True),
            "jobSummary": _serialize.job_summary(exp),
            "config": exp.config,
        }


@router.patch(
    "/api/v1/experiments/{experiment_id}",
    dependencies=[on_experiment(P.UPDATE_EXPERIMENT_METADATA)],
)
def patch_experiment(
    request: Request,
    experiment_id: int,
    body: dict[str, Any] = Depends(json_body),
    principal: Principal = Depends(authenticate),
) -> dict[str, Any]:
    """Change name, description, notes, labels, scheduling limits or the checkpoint GC policy."""
    patch = _parse_patch(sub_object(body, "experiment"))
    if patch.priority is not None or patch.max_slots is not None:  # docs/config_policies.md
        with master_of(request).db.read() as session:
            ws = experiment_workspace(request, session, experiment_id)
        master_of(request).manager.config_policies.check_update(
            ws, "EXPERIMENT", priority=patch.priority, max_slots=patch.max_slots
        )
    experiments_of(request).patch(experiment_id, patch)
    with master_of(request).db.read() as session:
        return {
            "experiment": _serialize.experiment(
                session, _get_exp(session, experiment_id), full=True
            )
        }


def _parse_patch(patch: dict[str, Any]) -> ExperimentPatch:
    """The body of ``PATCH /api/v1/experiments/{id}`` as typed changes (400 on bad values)."""
    name = get(patch, "name")
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise APIError(400, "name: must be a non-empty string")
    description = get(patch, "description")
    notes = get(patch, "notes")
    labels = get(patch, "labels")
    if labels is not None and (
        not isinstance(labels, list) or not all(isinstance(x, str) for x in labels)
    ):
        raise APIError(400, "labels: must be a list of strings")
    resources = get(patch, "resources")
    max_slots = weight = priority = None
    if isinstance(resources, dict):
        if get(resources, "max_slots") is not None:
            max_slots = int_param(get(resources, "max_slots"), "resources.maxSlots")
        if get(resources, "weight") is not None:
            weight = float(get(resources, "weight"))
        if get(resources, "priority") is not None:
            priority = int_param(get(resources, "priority"), "resources.priority")
            if priority is None or not 1 <= priority <= 99:
                raise APIError(400, "resources.priority: must be between 1 and 99")
    storage = get(patch, "checkpoint_storage")
    gc_policy: dict[str, int] | None = None
    if isinstance(storage, dict):
        gc_policy = {}
        for key in ("save_experiment_best", "save_trial_best", "save_trial_latest"):
            value = get(storage, key)
            if value is not None:
                number = int_param(value, f"checkpointStorage.{key}")
                if number is None or number < 0:
                    raise APIError(400, f"checkpointStorage.{key}: must be >= 0")
                gc_policy[key] = number
    return ExperimentPatch(
        name=name,
        description=str(description) if description is not None else None,
        notes=str(notes) if notes is not None else None,
        labels=labels,
        max_slots=max_slots,
        weight=weight,
        priority=priority,
        resources_given=isinstance(resources, dict),
        gc_policy=gc_policy,
    )


@router.delete(
    "/api/v1/experiments/{experiment_id}", dependencies=[on_experiment(P.DELETE_EXPERIMENT)]
)
def delete_experiment(
    request: Request, experiment_id: int, principal: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """Delete a terminal experiment, its checkpoints (from storage too) and its rows."""
    experiments_of(request).delete(
        experiment_id, acting_user(request, principal, experiment_id=experiment_id)
    )
    return {}


@router.get(
    "/api/v1/experiments/{experiment_id}/trials",
    dependencies=[on_experiment(P.VIEW_EXPERIMENT_METADATA)],
)
def experiment_trials(
    request: Request, experiment_id: int, principal: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """The trials of an experiment, sorted (``sortBy``, ``orderBy``) before they are paged."""
    q = request.query_params
    offset = int_param(q.get("offset"), "offset", 0) or 0
    limit = int_param(q.get("limit"), "limit", 0) or 0
    try:
        sort = check_trial_sort(q.get("sortBy"))
    except ValueError as exc:
        raise APIError(400, str(exc)) from None
    order = q.get("orderBy") or "ORDER_BY_UNSPECIFIED"
    if order not in ("ORDER_BY_UNSPECIFIED", "ORDER_BY_ASC", "ORDER_BY_DESC"):
        raise APIError(400, f"orderBy: unsupported value {order!r}")
    desc = order == "ORDER_BY_DESC"
    with master_of(request).db.read() as session:
        # the state only (not the row with its config and original YAML) unless a sort needs it
        if core_rows(session, _LIVE_EXPERIMENT, {"id": experiment_id}).first() is None:
            raise APIError(404, f"experiment {experiment_id} not found")
        stmt = select(Run).where(Run.experiment_id == experiment_id)
        states = [unstate(s) for s in q.getlist("states") if s]
        if states:
            stmt = stmt.where(Run.state.in_(states))
        searcher: dict[str, Any] = {}  # only the validation sorts read it (the signed metric)
        if sort in ("SORT_BY_BEST_VALIDATION_METRIC", "SORT_BY_LATEST_VALIDATION_METRIC"):
            searcher = (_get_exp(session, experiment_id).config or {}).get("searcher") or {}
        smaller = bool(searcher.get("smaller_is_better", True))
        column = sql_sort_column(sort, smaller)
        if column is not None and column is not Run.id:  # without a value last, either direction
            stmt = stmt.order_by(column.is_(None), column.desc() if desc else column.asc())
        stmt = stmt.order_by(Run.id.desc() if desc else Run.id.asc())
        if column is not None:
            # the database sorts and pages: a page of a 10,000-trial search loads 100 rows
            counted = stmt.order_by(None).subquery()
            total = session.scalar(select(func.count()).select_from(counted))
            paged = stmt.offset(offset).limit(limit) if limit else stmt.offset(offset)
            trials = _serialize.trials(session, list(session.scalars(paged)))
        else:
            rows = list(session.scalars(stmt))
            total = len(rows)
            ordered = sort_trial_json(
                _serialize.trials(session, rows),
                sort,
                descending=desc,
                searcher_metric=searcher.get("metric"),
                smaller_is_better=smaller,
            )
            trials = ordered[offset : offset + limit] if limit else ordered[offset:]
        return {"trials": trials, "pagination": pagination(offset, limit, len(trials), total or 0)}


@router.get(
    "/api/v1/experiments/{experiment_id}/validation-history",
    dependencies=[on_experiment(P.VIEW_EXPERIMENT_METADATA)],
)
def validation_history(
    request: Request, experiment_id: int, principal: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """Each validation that improved the experiment's best searcher metric, in time order."""
    with master_of(request).db.read() as session:
        exp = _get_exp(session, experiment_id)
        searcher = exp.config.get("searcher") or {}
        metric = searcher.get("metric")
        smaller = bool(searcher.get("smaller_is_better", True))
        rows = session.execute(
            select(Metric)
            .join(Run, Run.id == Metric.trial_id)
            .where(
                Run.experiment_id == experiment_id,
                Metric.group == "validation",
                Metric.archived.is_(False),
            )
            .order_by(Metric.end_time, Metric.id)
        ).scalars()
        history = []
        best: float | None = None
        from determined.master._wire import to_float, ts

        for row in rows:
            value = to_float((row.metrics.get("avg_metrics") or {}).get(metric))
            if value is None:
                continue
            if best is None or (value < best if smaller else value > best):
                best = value
                history.append(
                    {"trialId": row.trial_id, "endTime": ts(row.end_time), "searcherMetric": value}
                )
        return {"validationHistory": history}


@router.get(
    "/api/v1/experiments/{experiment_id}/model_def",
    dependencies=[on_experiment(P.VIEW_EXPERIMENT_ARTIFACTS)],
)
def model_def(
    request: Request, experiment_id: int, principal: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """The experiment's context directory as a base64 tar.gz."""
    with master_of(request).db.read() as session:
        exp = _get_exp(session, experiment_id)
        return {"b64Tgz": base64.b64encode(exp.model_definition or b"").decode()}


@router.get(
    "/api/v1/experiments/{experiment_id}/searcher/best_searcher_validation_metric",
    dependencies=[on_experiment(P.VIEW_EXPERIMENT_METADATA)],
)
def best_searcher_validation_metric(
    request: Request, experiment_id: int, principal: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """The best searcher metric any trial of the experiment reported (404 when none)."""
    with master_of(request).db.read() as session:
        exp = _get_exp(session, experiment_id)
        smaller = bool((exp.config.get("searcher") or {}).get("smaller_is_better", True))
        agg = func.min if smaller else func.max
        value = session.scalar(
            select(agg(Run.searcher_metric_value)).where(Run.experiment_id == experiment_id)
        )
        if value is None:
            raise APIError(404, f"experiment {experiment_id} has no validation metrics yet")
        return {"metric": value}


@router.post("/api/v1/preview-hp-search")
def preview_hp_search(
    request: Request,
    body: dict[str, Any] = Depends(json_body),
    principal: Principal = Depends(authenticate),
) -> dict[str, Any]:
    """Simulate the searcher of a config."""
    from determined.master.searchers import preview

    validated = validate_config(master_of(request), get(body, "config"))
    try:
        return dict(preview(validated.config))
    except ValueError as e:
        raise APIError(400, f"searcher: {e}") from None


@router.post("/api/v1/experiments/continue")
def continue_experiment(
    request: Request,
    body: dict[str, Any] = Depends(json_body),
    principal: Principal = Depends(authenticate),
) -> dict[str, Any]:
    """Re-run the unfinished (or, for a single-trial experiment, the only) trials of a terminal
    experiment, optionally with config overrides (e.g. hyperparameters or max_length)."""
    import determined.config as expconf

    master = master_of(request)
    exp_id = int_param(get(body, "id"), "id")
    if exp_id is None:
        raise APIError(400, "id: required")
    require_experiment(request, principal, exp_id, P.UPDATE_EXPERIMENT)
    override_text = get(body, "override_config") or ""
    override = load_yaml(override_text, "overrideConfig") if override_text else {}
    if override is not None and not isinstance(override, dict):
        raise APIError(400, "overrideConfig: must be a YAML mapping")
    with master.db.read() as session:
        exp = _get_exp(session, exp_id)
        if exp.state not in TERMINAL_STATES:
            raise APIError(400, "Experiment is not in terminal state.")
        current = dict(exp.config)
    config = expconf.merge(override or {}, current) if override else current
    validated = validate_config(master, config)
    hparams_override = (override or {}).get("hyperparameters")
    experiments_of(request).continue_trials(
        exp_id,
        validated.config,
        _const_hparams(validated.config.get("hyperparameters") or {}) if hparams_override else None,
    )
    with master.db.read() as session:
        return {"experiment": _serialize.experiment(session, _get_exp(session, exp_id), full=True)}


def _const_hparams(hparams: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, spec in hparams.items():
        if isinstance(spec, dict) and spec.get("type") == "const":
            out[name] = spec.get("val")
        elif isinstance(spec, dict) and "type" not in spec:
            out[name] = _const_hparams(spec)
        elif not isinstance(spec, dict):
            out[name] = spec
    return out
