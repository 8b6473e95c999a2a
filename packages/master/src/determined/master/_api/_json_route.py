"""The REST routes' JSON replies, encoded once with orjson inside the route.

A route returns plain dicts and lists. Left to FastAPI, a route annotated ``-> dict[str, Any]``
gets that annotation as its response model: the reply is validated against it on a worker thread
(one more thread hop per request, for a model that accepts anything) before it is encoded.
:class:`JSONRoute` wraps each endpoint so it returns the encoded :class:`Response` itself: no
response model, no validation, no extra hop; orjson encodes. What orjson cannot encode goes
through FastAPI's ``jsonable_encoder`` (sets, bytes, pydantic models). A route that sets
``response_model`` or returns a :class:`Response` of its own keeps FastAPI's handling.

The wrapped endpoint also runs the route's access checks (``_access.on_experiment`` ...): a
guard dependency that sees such an endpoint leaves its check in the request scope
(:data:`PENDING_CHECKS`) instead of running it on a worker thread of its own, and a sync endpoint
runs it first on the thread it runs on anyway. Every guarded read used to cross threads twice
(guard, then route body), waiting for the GIL at each crossing under load.
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable
from typing import Any

import orjson
from fastapi import APIRouter, Request, Response
from fastapi.datastructures import DefaultPlaceholder
from fastapi.encoders import jsonable_encoder
from fastapi.routing import APIRoute
from starlette.concurrency import run_in_threadpool

_OPTIONS = orjson.OPT_NON_STR_KEYS | orjson.OPT_UTC_Z
PENDING_CHECKS = "det.pending_checks"
"""Request-scope key: the access checks left for the endpoint (callables, run in order)."""
RUNS_CHECKS = "det_runs_access_checks"
"""Attribute marking an endpoint that runs :data:`PENDING_CHECKS` before its body."""
_REQUEST = "det_request__"
"""The wrapper's own ``Request`` parameter (FastAPI injects it; the endpoint never sees it)."""


def run_pending_checks(scope: dict[str, Any]) -> None:
    """Run (and drop) the access checks the route's guards left in ``scope``."""
    for check in scope.pop(PENDING_CHECKS, ()):
        check()


def encode(content: Any, status_code: int) -> Response:
    """``content`` as a JSON reply (a :class:`Response` passes through)."""
    if isinstance(content, Response):
        return content
    body = orjson.dumps(content, default=jsonable_encoder, option=_OPTIONS)
    return Response(body, status_code=status_code, media_type="application/json")


def _encoding(endpoint: Callable[..., Any], status_code: int) -> Callable[..., Any]:
    """``endpoint`` returning its reply encoded after the route's pending access checks, with the
    same parameters for FastAPI to inject plus a ``Request`` of its own (annotations resolved in
    the endpoint's module: this wrapper lives in another one)."""
    hints = typing.get_type_hints(endpoint, include_extras=True)
    signature = inspect.signature(endpoint)
    params = [
        p.replace(annotation=hints.get(p.name, p.annotation)) for p in signature.parameters.values()
    ]
    # FastAPI injects the request into one parameter only: the endpoint's own, if it has one.
    own = next((p.name for p in params if p.annotation is Request), None)
    if own is None:
        params.append(
            inspect.Parameter(_REQUEST, inspect.Parameter.KEYWORD_ONLY, annotation=Request)
        )

    def scope_of(kwargs: dict[str, Any]) -> dict[str, Any]:
        request = kwargs[own] if own is not None else kwargs.pop(_REQUEST)
        return request.scope  # type: ignore[no-any-return]

    wrapper: Any
    if inspect.iscoroutinefunction(endpoint):

        @functools.wraps(endpoint)
        async def async_wrapper(*args: Any, **kwargs: Any) -> Response:
            scope = scope_of(kwargs)
            if scope.get(PENDING_CHECKS):
                await run_in_threadpool(run_pending_checks, scope)
            return encode(await endpoint(*args, **kwargs), status_code)

        wrapper = async_wrapper
    else:

        @functools.wraps(endpoint)
        def sync_wrapper(*args: Any, **kwargs: Any) -> Response:
            run_pending_checks(scope_of(kwargs))
            return encode(endpoint(*args, **kwargs), status_code)

        wrapper = sync_wrapper
    wrapper.__signature__ = signature.replace(parameters=params, return_annotation=Response)
    extra = {_REQUEST: Request} if own is None else {}
    wrapper.__annotations__ = {**hints, **extra, "return": Response}
    setattr(wrapper, RUNS_CHECKS, True)
    return wrapper  # type: ignore[no-any-return]


class JSONRoute(APIRoute):
    """An API route whose endpoint encodes its own JSON reply (see the module docstring)."""

    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        model = kwargs.get("response_model")
        if model is None or isinstance(model, DefaultPlaceholder):
            status = kwargs.get("status_code")
            endpoint = _encoding(endpoint, int(status) if status is not None else 200)
            kwargs["response_model"] = None
        super().__init__(path, endpoint, **kwargs)


def api_router(**kwargs: Any) -> APIRouter:
    """An :class:`APIRouter` of :class:`JSONRoute` routes (every REST module's ``router``)."""
    return APIRouter(route_class=JSONRoute, **kwargs)
