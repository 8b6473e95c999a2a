"""Every route of ``determined.client.ROUTES`` exists in det-master's OpenAPI document with the same
method, so the client and the master cannot drift apart."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import pytest
import requests

from determined import client


def _normalise(template: str) -> str:
    """The path with every ``{parameter}`` renamed to ``{}`` (names differ between the two sides)."""
    return re.sub(r"\{[^}]*\}", "{}", template)


def served_operations(openapi: dict[str, Any]) -> set[tuple[str, str]]:
    """``(METHOD, normalised path)`` of every operation in an OpenAPI document."""
    return {
        (method.upper(), _normalise(path))
        for path, item in openapi["paths"].items()
        for method in item
        if method in {"get", "put", "post", "delete", "patch", "head", "options"}
    }


def missing_routes(routes: Iterable[client.Route], openapi: dict[str, Any]) -> list[str]:
    """The routes the master does not serve, as ``name: METHOD template``."""
    served = served_operations(openapi)
    return [
        f"{route.name}: {route.method} {route.template}"
        for route in routes
        if (route.method, _normalise(route.template)) not in served
    ]


@pytest.fixture(scope="module")
def openapi(make_module_master: Any) -> dict[str, Any]:
    """The OpenAPI document a freshly started det-master (the root conftest's) serves."""
    master = make_module_master(slots=1)
    response = requests.get(f"{master.url}/api/v1/openapi.json", timeout=30)
    response.raise_for_status()
    return response.json()  # type: ignore[no-any-return]


def test_route_table_is_consistent() -> None:
    assert len(client.ROUTES) > 50
    for name, route in client.ROUTES.items():
        assert route.name == name
        # everything under /api/v1 but the binary archive of a checkpoint's files (upstream's path)
        assert route.template.startswith("/api/v1/") or name == "checkpoints.files", route
        assert route.method in {"GET", "POST", "PUT", "PATCH", "DELETE"}, route
    keys = [(r.method, _normalise(r.template)) for r in client.ROUTES.values()]
    assert len(keys) == len(set(keys)), "a route is declared twice under different names"


def test_every_client_route_is_served_by_the_master(openapi: dict[str, Any]) -> None:
    assert missing_routes(client.ROUTES.values(), openapi) == []


def test_a_route_the_master_lacks_is_reported(openapi: dict[str, Any]) -> None:
    bogus = [
        client.Route("bogus.path", "GET", "/api/v1/experiments/{id}/no-such-thing"),
        client.Route("bogus.method", "PUT", "/api/v1/trials/{trial_id}/kill"),
    ]
    real = client.ROUTES["experiments.get"]
    assert missing_routes([*bogus, real], openapi) == [
        "bogus.path: GET /api/v1/experiments/{id}/no-such-thing",
        "bogus.method: PUT /api/v1/trials/{trial_id}/kill",
    ]


def test_route_paths_encode_each_parameter_as_one_segment() -> None:
    route = client.ROUTES["models.get_version"]
    assert route.parameters == ("model_name", "version")
    assert route.path(model_name="a/b c", version=3) == "/api/v1/models/a%2Fb%20c/versions/3"
    with pytest.raises(TypeError):
        route.path(model_name="m")
