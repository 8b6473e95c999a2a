"""The UI's HTML: full pages, and the fragments their scripts poll to stay live.

Pages need a session (else a redirect to ``/login``) and answer errors as HTML pages with the
same 4xx status the API would use. Fragments (``/ui/partials/...``) are the live parts of a page,
rendered by the same templates, so a table has one rendering path.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable
from typing import Any

import yaml
from fastapi import APIRouter, Depends, Form, Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from determined.master._api._deps import Principal, authenticate, authenticate_sync, master_of
from determined.master._core._authz import Permission
from determined.master._wire import APIError
from determined.master.db import checkpoint_validation_metrics
from determined.master.ui import (
    _access,
    _api,
    _log_queries,
    _queries,
    _registry_queries,
    _session,
    _trial_pages,
    _workspace_queries,
)
from determined.master.ui._mask import mask
from determined.master.ui._render import render, render_fragment

router = APIRouter(include_in_schema=False)


def _int_id(value: str, what: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise APIError(404, f"{what} {value!r} not found: ids are integers") from None
    if number < 0:
        raise APIError(404, f"{what} {value!r} not found")
    return number


def _page(request: Request, build: Callable[[Principal], Response]) -> Response:
    """Run a page handler: redirect to login without a session, HTML error page on APIError."""
    try:
        principal = _session.page_principal(request)
    except _session.LoginRequired as e:
        return _session.login_redirect(e)
    except APIError as e:
        return render("error.html", e.status, user=None, status=e.status, message=e.message)
    try:
        return build(principal)
    except APIError as e:
        return render(
            "error.html", e.status, user=principal.user, status=e.status, message=e.message
        )


# ---------------------------------------------------------------------------------------------
# Sign in / out


@router.get("/")
def root(request: Request) -> Response:
    return _page(request, lambda p: RedirectResponse("/experiments", status_code=303))


@router.get("/login")
def login_form(request: Request) -> Response:
    """The sign-in form (straight on to ``next`` when already signed in)."""
    target = _session.safe_next(request.query_params.get("next"))
    try:
        authenticate_sync(request)
        return RedirectResponse(target, status_code=303)
    except APIError:
        pass
    return render("login.html", user=None, next=target, error="", username="")


@router.post("/login")
def login_submit(
    request: Request,
    username: str = Form(""),
    password: str = Form(""),
    next: str = Form("/"),
) -> Response:
    """Check the password (as ``POST /api/v1/auth/login`` does) and set the session cookie."""
    target = _session.safe_next(next)
    if not username.strip():
        return render(
            "login.html", 400, user=None, next=target, error="Enter a username.", username=""
        )
    try:
        token, _ = _session.sign_in(request, username.strip(), password)
    except APIError as e:
        message = "Wrong username or password." if e.status == 401 else e.message
        return render(
            "login.html", e.status, user=None, next=target, error=message, username=username
        )
    response = RedirectResponse(target, status_code=303)
    _session.set_session_cookie(request, response, token)
    return response


@router.post("/logout")
def logout(request: Request) -> Response:
    """Revoke the session and drop the cookie."""
    response = RedirectResponse("/login", status_code=303)
    _session.sign_out(request, response)
    return response


# ---------------------------------------------------------------------------------------------
# Experiments


def list_context(request: Request, p: Principal, project: int | None = None) -> dict[str, Any]:
    """What the experiment list shows: the experiments ``p`` can see (of ``project`` when given,
    the project page's list), filtered, sorted and paged as the query asks."""
    flt = _queries.ExperimentFilter.parse(request.query_params)
    if project is not None:
        flt.project = project
    visible = _access.visible_workspaces(request, p)
    with master_of(request).db.read() as session:
        page = _queries.experiment_page(session, flt, visible)
        owners = _queries.owners(session)
    # A project's list links back to the project's page (its filter is the address).
    path = "/experiments" if flt.project is None else f"/projects/{flt.project}"

    def link(**changes: Any) -> str:
        params = flt.params(**changes)
        if flt.project is not None:
            params.pop("project", None)
        query = urllib.parse.urlencode(params)
        return path + (f"?{query}" if query else "")

    def sort_link(column: str) -> str:
        desc = not flt.desc if flt.sort == column else column not in ("name", "owner", "state")
        return link(sort=column, desc=desc, after="", before="")

    return {
        "flt": flt,
        "page": page,
        "owners": owners,
        "states": _queries.EXPERIMENT_STATES,
        "page_sizes": _queries.PAGE_SIZES,
        "link": link,
        "sort_link": sort_link,
        "query": urllib.parse.urlencode(flt.params()),
        "list_path": path,
    }


@router.get("/experiments")
def experiments(request: Request) -> Response:
    return _page(
        request, lambda p: render("experiments.html", user=p.user, **list_context(request, p))
    )


@router.get("/ui/partials/experiments")
def experiments_partial(request: Request, p: Principal = Depends(authenticate)) -> HTMLResponse:
    """The rows (and count) of the experiment list, for its live refresh."""
    html = render_fragment("partials/experiment_rows.html", **list_context(request, p))
    return HTMLResponse(html, headers={"Cache-Control": "no-store"})


def config_yaml(exp: Any) -> tuple[str, str]:
    """(submitted config, full config) as YAML, secrets masked."""
    full = yaml.safe_dump(mask(exp.config), sort_keys=False, default_flow_style=False)
    try:
        original = yaml.safe_load(exp.original_config) if exp.original_config else None
    except yaml.YAMLError:
        original = None
    submitted = (
        yaml.safe_dump(mask(original), sort_keys=False, default_flow_style=False)
        if isinstance(original, dict)
        else full
    )
    return submitted, full


def _experiment_context(request: Request, p: Principal, experiment_id: int) -> dict[str, Any]:
    visible = _access.visible_workspaces(request, p)
    asked = _api.int_arg(request.query_params.get("trials_page"), "trials_page", 1)
    if asked is None or asked < 1:
        raise APIError(400, f"trials_page: must be 1 or more, not {asked}")
    with master_of(request).db.read() as session:
        exp, owner = _queries.get_experiment(session, experiment_id, visible)
        stats = _trial_pages.trial_stats(session, exp)
        pages = _trial_pages.pages(stats.count)
        page = min(asked, pages)  # the last one, if asked beyond it
        trials = _trial_pages.page_rows(session, exp, page)
        where = _workspace_queries.location_of(session, exp.project_id)
    metric, smaller = _queries.searcher_of(exp.config)
    hparam_names: list[str] = []
    for trial in trials:
        for name in _queries.flatten_hparams(trial.hparams):
            if name not in hparam_names:
                hparam_names.append(name)
    return {
        "exp": exp,
        "name": str(exp.config.get("name") or ""),
        "owner": owner,
        "trials": trials,
        "trial_count": stats.count,
        "trials_page": page,
        "trials_pages": pages,
        "trials_offset": (page - 1) * _trial_pages.TRIALS_PER_PAGE,
        "metric": metric,
        "smaller": smaller,
        "best": stats.best,
        "hparam_names": hparam_names,
        "flatten": _queries.flatten_hparams,
        "terminal": _queries.is_terminal(exp.state),
        "where": where,
        "can": _access.allowed(request, p, where.workspace_id if where else None),
    }


@router.get("/experiments/{experiment_id}")
def experiment(request: Request, experiment_id: str) -> Response:
    def build(p: Principal) -> Response:
        context = _experiment_context(request, p, _int_id(experiment_id, "experiment"))
        submitted, full = config_yaml(context["exp"])
        q = request.query_params
        chart = {
            "experimentId": context["exp"].id,
            "group": q.get("group") or "",
            "metric": q.get("metric") or "",
            "log": q.get("log") in ("1", "true"),
            "terminal": context["terminal"],
        }
        return render(
            "experiment.html",
            user=p.user,
            config_submitted=submitted,
            config_full=full,
            chart=chart,
            **context,
        )

    return _page(request, build)


@router.get("/ui/partials/experiments/{experiment_id}")
def experiment_partial(
    request: Request, experiment_id: int, p: Principal = Depends(authenticate)
) -> HTMLResponse:
    """The live parts of an experiment page: status and actions, trials table."""
    html = render_fragment(
        "partials/experiment_live.html", **_experiment_context(request, p, experiment_id)
    )
    return HTMLResponse(html, headers={"Cache-Control": "no-store"})


# ---------------------------------------------------------------------------------------------
# Trials


def _trial_context(
    request: Request, p: Principal, trial_id: int, *, page: bool = False
) -> dict[str, Any]:
    """What the trial templates show (``page``: also what only the full page needs)."""
    visible = _access.visible_workspaces(request, p)
    with master_of(request).db.read() as session:
        run, exp = _queries.get_trial(session, trial_id, visible)
        where = _workspace_queries.location_of(session, exp.project_id)
        metric, _ = _queries.searcher_of(exp.config)
        row = _queries.trial_rows(session, [run], {exp.id: metric})[0]
        checkpoints = _queries.trial_checkpoints(session, trial_id)
        ranks = _log_queries.log_ranks(session, run.task_id) if page else []
    return {
        "trial": row,
        "run": run,
        "exp": exp,
        "name": str(exp.config.get("name") or ""),
        "metric": metric,
        "checkpoints": checkpoints,
        "hparams": _queries.flatten_hparams(run.hparams or {}),
        "searcher_name": str((exp.config.get("searcher") or {}).get("name") or ""),
        "ranks": ranks,
        "levels": _log_queries.LOG_LEVELS,
        "terminal": _queries.is_terminal(run.state),
        "where": where,
        "can": _access.allowed(request, p, where.workspace_id if where else None),
    }


@router.get("/trials/{trial_id}")
def trial(request: Request, trial_id: str) -> Response:
    def build(p: Principal) -> Response:
        context = _trial_context(request, p, _int_id(trial_id, "trial"), page=True)
        return render("trial.html", user=p.user, **context)

    return _page(request, build)


@router.get("/ui/partials/trials/{trial_id}")
def trial_partial(
    request: Request, trial_id: int, p: Principal = Depends(authenticate)
) -> HTMLResponse:
    """The live parts of a trial page: status, checkpoints."""
    html = render_fragment("partials/trial_live.html", **_trial_context(request, p, trial_id))
    return HTMLResponse(html, headers={"Cache-Control": "no-store"})


# ---------------------------------------------------------------------------------------------
# Compare


@router.get("/compare")
def compare(request: Request) -> Response:
    def build(p: Principal) -> Response:
        ids = _api.id_list(request.query_params.get("trials"), "trials")
        q = request.query_params
        state = {
            "trials": ids,
            "group": q.get("group") or "",
            "metric": q.get("metric") or "",
            "log": q.get("log") in ("1", "true"),
        }
        return render("compare.html", user=p.user, state=state)

    return _page(request, build)


# ---------------------------------------------------------------------------------------------
# Model registry


@router.get("/models")
def models(request: Request) -> Response:
    def build(p: Principal) -> Response:
        archived = request.query_params.get("archived") in ("1", "true", "on")
        visible = _access.visible_workspaces(request, p, Permission.VIEW_MODEL_REGISTRY)
        with master_of(request).db.read() as session:
            rows = _registry_queries.list_models(session, archived, visible)
        return render("models.html", user=p.user, models=rows, archived=archived)

    return _page(request, build)


@router.get("/models/{name}")
def model(request: Request, name: str) -> Response:
    def build(p: Principal) -> Response:
        visible = _access.visible_workspaces(request, p, Permission.VIEW_MODEL_REGISTRY)
        with master_of(request).db.read() as session:
            found = _registry_queries.get_model(session, name, visible)
            versions = _registry_queries.model_versions(session, found)
        return render("model.html", user=p.user, model=found, versions=versions)

    return _page(request, build)


@router.get("/models/{name}/versions/{number}")
def model_version(request: Request, name: str, number: str) -> Response:
    def build(p: Principal) -> Response:
        version_number = _int_id(number, "model version")
        visible = _access.visible_workspaces(request, p, Permission.VIEW_MODEL_REGISTRY)
        seen = _access.visible_workspaces(request, p)
        with master_of(request).db.read() as session:
            found = _registry_queries.get_model(session, name, visible)
            version = _registry_queries.get_model_version(session, found, version_number)
            ckpt = _queries.checkpoint_by_uuid(session, version.checkpoint_uuid)
            metrics = checkpoint_validation_metrics(session, ckpt) if ckpt else {}
            run = exp = None
            summary: dict[str, Any] = {}
            if ckpt is not None and ckpt.trial_id is not None:
                try:
                    run, exp = _queries.get_trial(session, ckpt.trial_id, seen)
                    summary = run.summary_metrics or {}
                except APIError:
                    run = exp = None
        return render(
            "model_version.html",
            user=p.user,
            model=found,
            version=version,
            ckpt=ckpt,
            metrics=metrics,
            run=run,
            exp=exp,
            summary=summary,
            hparams=_queries.flatten_hparams(run.hparams or {}) if run else {},
        )

    return _page(request, build)
