"""The REST routes' JSON replies (``_api/_json_route``): encoded in the route with orjson, no
response model, what orjson cannot encode through FastAPI's encoder; the route's access checks
run by the endpoint on its own thread."""

from __future__ import annotations

import datetime
import json
import sys
import threading
from typing import Any

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.testclient import TestClient

from determined.master._api._access import _check
from determined.master._api._json_route import JSONRoute, api_router, encode


def _decoded(content: Any) -> Any:
    return json.loads(encode(content, 200).body)


def test_encode_matches_what_clients_read() -> None:
    when = datetime.datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=datetime.timezone.utc)
    assert _decoded({"when": when}) == {"when": "2026-01-02T03:04:05.678000Z"}
    assert _decoded({1: "a", "b": (1, 2)}) == {"1": "a", "b": [1, 2]}
    assert _decoded({"nan": float("nan"), "inf": float("inf")}) == {"nan": None, "inf": None}
    assert _decoded({"tags": {"x"}, "raw": b"abc"}) == {"tags": ["x"], "raw": "abc"}


def test_a_response_passes_through_and_the_status_is_kept() -> None:
    reply = encode({"a": 1}, 201)
    assert reply.status_code == 201 and reply.media_type == "application/json"
    assert encode(reply, 200) is reply


def _principal(request: Request) -> str:
    return request.headers.get("x-user", "nobody")


router = api_router()


@router.get("/sync/{n}")
def sync_route(n: int, user: str = Depends(_principal)) -> dict[str, Any]:
    return {"n": n, "user": user}


@router.get("/async")
async def async_route(request: Request) -> dict[str, Any]:
    return {"path": request.url.path}


@router.post("/created", status_code=201)
def created() -> dict[str, Any]:
    return {"ok": True}


def test_routes_keep_their_parameters_and_lose_the_response_model() -> None:
    """Parameters annotated as strings (``from __future__ import annotations``) still inject;
    the ``dict`` annotation no longer becomes a response model validated on a worker thread."""
    app = FastAPI()
    app.include_router(router)
    client = TestClient(app)
    assert client.get("/sync/7", headers={"x-user": "ann"}).json() == {"n": 7, "user": "ann"}
    assert client.get("/sync/x").status_code == 422  # still validated as an int
    assert client.get("/async").json() == {"path": "/async"}
    response = client.post("/created")
    assert response.status_code == 201 and response.json() == {"ok": True}
    routes = router.routes
    assert len(routes) == 3
    assert all(isinstance(r, JSONRoute) and r.response_model is None for r in routes)
    assert "/sync/{n}" in client.get("/openapi.json").json()["paths"]


def test_every_rest_module_uses_the_json_route() -> None:
    import importlib
    import pathlib

    from determined.master._api import _app

    for path in sorted(pathlib.Path(_app.__file__).parent.glob("_*.py")):
        module = importlib.import_module(f"determined.master._api.{path.stem}")
        for name in ("router", "info_router"):
            found = getattr(module, name, None)
            if found is not None and found.routes:
                assert found.route_class is JSONRoute, f"{path.stem}.{name}"


# --- access checks run by the endpoint (``_access._check``) ------------------------------------

guarded = api_router()
SEEN: dict[str, Any] = {}
"""Which thread ran the access check and which the route body; whether the check ran inside the
endpoint's call (the wrapper ``_json_route`` gives it) or before it."""


def _refuse_odd(n: int) -> None:
    """A stand-in for ``require_trial``: 404 for odd ids."""
    SEEN["check"] = threading.get_ident()
    frame = sys._getframe(1)
    callers = set()
    while frame is not None:
        callers.add(frame.f_code.co_name)
        frame = frame.f_back
    SEEN["inside_endpoint"] = "sync_wrapper" in callers
    if n % 2:
        raise HTTPException(404, f"thing {n} not found")


async def _guard(request: Request, n: int) -> None:
    await _check(request, _refuse_odd, n)


@guarded.get("/things/{n}", dependencies=[Depends(_guard)])
def get_thing(n: int) -> dict[str, Any]:
    SEEN["body"] = threading.get_ident()
    return {"n": n}


@guarded.get("/async-things/{n}", dependencies=[Depends(_guard)])
async def get_async_thing(n: int) -> dict[str, Any]:
    return {"n": n}


@guarded.get("/modelled-things/{n}", dependencies=[Depends(_guard)], response_model=dict)
def get_modelled_thing(n: int) -> dict[str, Any]:
    SEEN["body"] = threading.get_ident()
    return {"n": n}


def test_a_guarded_sync_route_checks_access_on_the_thread_of_its_body() -> None:
    """One thread hop per guarded read: the check waits in the request scope for the endpoint,
    which runs it first; a refused request never reaches the body."""
    app = FastAPI()
    app.include_router(guarded)
    client = TestClient(app)
    SEEN.clear()
    assert client.get("/things/2").json() == {"n": 2}
    assert SEEN["check"] == SEEN["body"] and SEEN["inside_endpoint"]
    SEEN.clear()
    refused = client.get("/things/3")
    assert refused.status_code == 404 and refused.json() == {"detail": "thing 3 not found"}
    assert "check" in SEEN and "body" not in SEEN
    assert client.get("/async-things/4").json() == {"n": 4}
    assert client.get("/async-things/5").status_code == 404


def test_a_route_that_runs_no_pending_checks_is_checked_before_its_endpoint() -> None:
    """With a response model FastAPI keeps the endpoint (nothing would run a pending check):
    the guard checks at once, on a worker thread of its own."""
    app = FastAPI()
    app.include_router(guarded)
    client = TestClient(app)
    SEEN.clear()
    refused = client.get("/modelled-things/7")
    assert refused.status_code == 404 and "body" not in SEEN
    assert client.get("/modelled-things/8").json() == {"n": 8}
    assert not SEEN["inside_endpoint"]
