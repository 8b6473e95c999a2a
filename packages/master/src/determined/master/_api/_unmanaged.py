"""Unmanaged experiment and trial routes (``core_v2``): upstream's paths and JSON shapes.

``POST /api/v1/experiments`` with ``unmanaged: true`` and
``PUT /api/v1/experiments/by-external-id/{externalExperimentId}`` create (or find) the experiment;
``POST /api/v1/trials`` and ``PUT /api/v1/trials`` its trials; ``POST /api/v1/trials/{id}/start``
begins a run; ``PATCH /api/v1/trials/{id}`` is the trial's heartbeat and state change.
"""

from __future__ import annotations

from typing import Any

import yaml
from fastapi import Depends, Request

from determined.master._api import _serialize
from determined.master._api._access import P, on_trial, require_experiment, require_project
from determined.master._api._deps import (
    Principal,
    authenticate,
    bool_param,
    int_param,
    json_body,
    master_of,
    unmanaged_of,
)
from determined.master._api._json_route import api_router
from determined.master._api._yaml_input import load_yaml
from determined.master._core._experiments import get_experiment, get_trial
from determined.master._wire import APIError, get, unstate

router = api_router(tags=["Internal"])


def _validate(master: Any, raw: Any) -> tuple[dict[str, Any], str]:
    """The validated, defaulted config of an unmanaged experiment (no entrypoint needed) and its
    original text; APIError 400 naming every problem."""
    import determined.config as expconf

    if raw is None or raw == "":
        raise APIError(400, "config: required (the experiment configuration as YAML text)")
    parsed = load_yaml(raw, "config") if isinstance(raw, str) else raw
    if not isinstance(parsed, dict):
        raise APIError(400, "config: the experiment configuration must be a mapping")
    # core_v2 sends every field it knows, unset ones as null: drop those before validating.
    parsed = {k: v for k, v in parsed.items() if v is not None}
    searcher = parsed.get("searcher")
    custom: dict[str, Any] | None = None
    if isinstance(searcher, dict) and searcher.get("name") == "custom":
        # Upstream still accepts `custom` for unmanaged searches (its Ray example sends it); the
        # master runs no searcher for them, so it is checked as `single` and stored as sent.
        custom = dict(searcher)
        parsed["searcher"] = {
            **{k: v for k, v in custom.items() if k in ("metric", "smaller_is_better")},
            "name": "single",
        }
    try:
        validated = expconf.validate_experiment_config(
            parsed,
            defaults={"checkpoint_storage": master.config.checkpoint_storage_config()},
            require_entrypoint=False,
        )
    except (expconf.InvalidConfigError, ValueError) as e:
        raise APIError(400, f"invalid experiment configuration: {e}") from None
    config = dict(validated.config)
    if custom is not None:
        config["searcher"] = custom
    original = raw if isinstance(raw, str) else yaml.safe_dump(raw)
    return config, original


def create_unmanaged_experiment(
    request: Request, body: dict[str, Any], principal: Principal, external_id: str | None
) -> dict[str, Any]:
    """Create (or, by ``external_id``, find) an unmanaged experiment: ``experiment``, ``config``."""
    if not bool_param(get(body, "unmanaged")):
        raise APIError(400, "only unmanaged experiments are supported")
    if int_param(get(body, "parent_id"), "parentId"):
        raise APIError(400, "can't fork into an unmanaged experiment")
    master = master_of(request)
    config, original = _validate(master, get(body, "config"))
    projects = master.manager.projects
    project_id = projects.experiment_target(int_param(get(body, "project_id"), "projectId"), config)
    require_project(request, principal, project_id, P.CREATE_EXPERIMENT)
    projects.check_can_add(project_id)
    if get(body, "validate_only"):
        experiment = _serialize.validated_experiment(config, project_id)
        return {"experiment": experiment, "config": config, "warnings": []}
    exp_id = unmanaged_of(request).put_experiment(
        owner_id=principal.user.id,
        config=config,
        original=original,
        project_id=project_id,
        external_id=external_id,
    )
    with master.db.read() as session:
        exp = get_experiment(session, exp_id)
        return {
            "experiment": _serialize.experiment(session, exp, full=True),
            "config": exp.config,
            "warnings": [],
        }


@router.put("/api/v1/experiments/by-external-id/{external_experiment_id}")
def put_experiment(
    request: Request,
    external_experiment_id: str,
    body: dict[str, Any] = Depends(json_body),
    principal: Principal = Depends(authenticate),
) -> dict[str, Any]:
    """The unmanaged experiment with this external id, created on first use (the body is a
    CreateExperimentRequest); ``experiment`` and ``config``."""
    if not external_experiment_id:
        raise APIError(400, "externalExperimentId: required")
    answer = create_unmanaged_experiment(request, body, principal, external_experiment_id)
    return {"experiment": answer["experiment"], "config": answer["config"]}


def _create_trial(
    request: Request, p: Principal, create: dict[str, Any], external_id: str | None
) -> dict[str, Any]:
    if not bool_param(get(create, "unmanaged")):
        raise APIError(400, "only unmanaged trials are supported")
    exp_id = int_param(get(create, "experiment_id"), "experimentId")
    if exp_id is None:
        raise APIError(400, "experimentId: required")
    require_experiment(request, p, exp_id, P.UPDATE_EXPERIMENT)
    hparams = get(create, "hparams") or {}
    if not isinstance(hparams, dict):
        raise APIError(400, "hparams: must be an object")
    trial_id = unmanaged_of(request).create_trial(exp_id, hparams, external_id)
    with master_of(request).db.read() as session:
        run, _ = get_trial(session, trial_id)
        return {"trial": _serialize.trial(session, run)}


@router.post("/api/v1/trials")
def create_trial(
    request: Request,
    body: dict[str, Any] = Depends(json_body),
    principal: Principal = Depends(authenticate),
) -> dict[str, Any]:
    """Add a trial to an unmanaged experiment (``{experimentId, hparams, unmanaged: true}``)."""
    return _create_trial(request, principal, body, None)


@router.put("/api/v1/trials")
def put_trial(
    request: Request,
    body: dict[str, Any] = Depends(json_body),
    principal: Principal = Depends(authenticate),
) -> dict[str, Any]:
    """The unmanaged trial with ``externalTrialId`` in the experiment, created on first use
    (``{createTrialRequest, externalTrialId}``)."""
    create = get(body, "create_trial_request")
    if not isinstance(create, dict):
        raise APIError(400, "createTrialRequest: required (an object)")
    external_id = get(body, "external_trial_id")
    if not isinstance(external_id, str) or not external_id:
        raise APIError(400, "externalTrialId: required (a string)")
    return _create_trial(request, principal, create, external_id)


@router.patch("/api/v1/trials/{trial_id}", dependencies=[on_trial(P.UPDATE_EXPERIMENT)])
def patch_trial(
    request: Request,
    trial_id: int,
    body: dict[str, Any] = Depends(json_body),
    principal: Principal = Depends(authenticate),
) -> dict[str, Any]:
    """An unmanaged trial's heartbeat, and its new ``state`` (``STATE_RUNNING``, ...) if given."""
    raw_state = get(body, "state")
    if raw_state is not None and not isinstance(raw_state, str):
        raise APIError(400, "state: must be a trial state name such as STATE_COMPLETED")
    unmanaged_of(request).patch_trial(trial_id, unstate(raw_state) if raw_state else None)
    with master_of(request).db.read() as session:
        run, _ = get_trial(session, trial_id)
        return {"trial": _serialize.trial(session, run)}


@router.post("/api/v1/trials/{trial_id}/start", dependencies=[on_trial(P.UPDATE_EXPERIMENT)])
def start_trial(
    request: Request,
    trial_id: int,
    body: dict[str, Any] = Depends(json_body),
    principal: Principal = Depends(authenticate),
) -> dict[str, Any]:
    """Begin a run of an unmanaged trial: ``trialRunId``, and the ``latestCheckpoint`` with its
    ``stepsCompleted`` when an earlier run left one."""
    started = unmanaged_of(request).start_trial(trial_id, bool_param(get(body, "resume")))
    answer: dict[str, Any] = {
        "trialRunId": started.trial_run_id,
        "stepsCompleted": started.steps_completed,
    }
    if started.latest_checkpoint is not None:
        answer["latestCheckpoint"] = started.latest_checkpoint
    return answer
