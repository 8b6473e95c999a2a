"""The REST routes' JSON replies, encoded once with orjson inside the route.

A route returns plain dicts and lists. Left to FastAPI, a route annotated ``-> dict[str, Any]``
gets that annotation as its response model: the reply is validated against it on a worker thread
(one more thread hop per request, for a model that accepts anything) before it is encoded.
:class:`JSONRoute` wraps each endpoint so it returns the encoded :class:`Response` itself: no
response model, no validation, no extra hop; orjson encodes. What orjson cannot encode goes
through FastAPI's ``jsonable_encoder`` (sets, bytes, pydantic models). A route that sets
``response_model`` or returns a :class:`Response` of its own keeps FastAPI's handling.
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable
from typing import Any

import orjson
from fastapi import APIRouter, Response
from fastapi.datastructures import DefaultPlaceholder
from fastapi.encoders import jsonable_encoder
from fastapi.routing import APIRoute

_OPTIONS = orjson.OPT_NON_STR_KEYS | orjson.OPT_UTC_Z


def encode(content: Any, status_code: int) -> Response:
    """``content`` as a JSON reply (a :class:`Response` passes through)."""
    if isinstance(content, Response):
        return content
    body = orjson.dumps(content, default=jsonable_encoder, option=_OPTIONS)
    return Response(body, status_code=status_code, media_type="application/json")


def _encoding(endpoint: Callable[..., Any], status_code: int) -> Callable[..., Any]:
    """``endpoint`` returning its reply encoded, with the same parameters for FastAPI to inject
    (annotations resolved in the endpoint's module: this wrapper lives in another one)."""
    hints = typing.get_type_hints(endpoint, include_extras=True)
    signature = inspect.signature(endpoint)
    params = [
        p.replace(annotation=hints.get(p.name, p.annotation)) for p in signature.parameters.values()
    ]
    if inspect.iscoroutinefunction(endpoint):

        @functools.wraps(endpoint)
        async def wrapper(*args: Any, **kwargs: Any) -> Response:
            return encode(await endpoint(*args, **kwargs), status_code)

    else:

        @functools.wraps(endpoint)
        def wrapper(*args: Any, **kwargs: Any) -> Response:
            return encode(endpoint(*args, **kwargs), status_code)

    wrapper.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=params, return_annotation=Response
    )
    wrapper.__annotations__ = {**hints, "return": Response}
    return wrapper


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
