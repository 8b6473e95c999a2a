"""The REST routes' JSON replies (``_api/_json_route``): encoded in the route with orjson, no
response model, what orjson cannot encode through FastAPI's encoder."""

from __future__ import annotations

import datetime
import json
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.testclient import TestClient

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
