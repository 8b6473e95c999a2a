"""Every route det-master shares with upstream Determined 0.38.1 answers in a shape upstream's own
generated client parses.

The shared routes are found mechanically: each ``def get_X/post_X/...`` of upstream's
``determined/common/api/bindings.py`` names its method and path; those det-master's OpenAPI document
also serves are shared. On a master populated with experiments in every state (``populated_master``),
one subprocess in the upstream-client venv (``upstream_bindings_driver.py``) calls each of them through
upstream's bindings, which parse the answer with upstream's response class; the driver also checks the
parsed objects against the classes' declared field types and enums. A shared route the driver does not
call fails the test, so a route added to det later cannot slip by.
"""

from __future__ import annotations

import json
import pathlib
import re
import subprocess
from typing import Any

import pytest
import requests
from compat.populated_master import populate
from e2e.harness import MasterAPI
from upstream_venv import upstream_bindings_source, upstream_env, upstream_python

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

DRIVER = pathlib.Path(__file__).with_name("upstream_bindings_driver.py")
# Shared routes the test does not call, each with its reason. Keep this tiny.
SKIPPED: dict[str, str] = {}
_FUNCTION = re.compile(r"^def ((?:get|post|put|patch|delete)_\w+)\(", re.MULTILINE)


def upstream_routes(source: str) -> dict[str, tuple[str, str]]:
    """``{bindings function name: (METHOD, path template)}`` of upstream's bindings module."""
    routes = {}
    starts = [(m.start(), m.group(1)) for m in _FUNCTION.finditer(source)]
    for index, (start, name) in enumerate(starts):
        end = starts[index + 1][0] if index + 1 < len(starts) else len(source)
        body = source[start:end]
        method = re.search(r'method="(\w+)"', body)
        path = re.search(r'path=f?"([^"]+)"', body)
        assert method and path, f"cannot read the route of bindings.{name}"
        routes[name] = (method.group(1).upper(), path.group(1))
    return routes


def _shape(path: str) -> str:
    return re.sub(r"\{[^}]+\}", "{}", path)


def shared_routes(upstream: dict[str, tuple[str, str]], openapi: dict[str, Any]) -> set[str]:
    """The bindings functions whose METHOD and path (parameter names aside) det-master serves."""
    served = {
        (method.upper(), _shape(path))
        for path, item in openapi["paths"].items()
        for method in item
        if method in ("get", "post", "put", "patch", "delete")
    }
    return {name for name, (method, path) in upstream.items() if (method, _shape(path)) in served}


@pytest.fixture(scope="module")
def wire_run(
    module_db_url: str, make_module_master: Any, tmp_path_factory: pytest.TempPathFactory
) -> tuple[set[str], dict[str, list[str]]]:
    """The shared routes, and the driver's outcomes per bindings function (SQLite, PostgreSQL)."""
    python = upstream_python()
    master = make_module_master(module_db_url)
    tmp = tmp_path_factory.mktemp("wire")
    openapi = requests.get(f"{master.url}/api/v1/openapi.json", timeout=30).json()
    shared = shared_routes(upstream_routes(upstream_bindings_source()), openapi)
    ids = populate(MasterAPI(master.url, "admin"), tmp)
    (tmp / "ids.json").write_text(json.dumps(ids))
    out = tmp / "results.json"
    result = subprocess.run(
        [str(python), str(DRIVER), master.url, str(tmp / "ids.json"), str(out)],
        capture_output=True,
        text=True,
        env=upstream_env(tmp),
        timeout=300,
        cwd=tmp,
    )
    assert out.exists(), result.stdout + result.stderr
    outcomes = json.loads(out.read_text())
    assert result.returncode == 0, result.stdout + result.stderr + json.dumps(outcomes, indent=1)
    return shared, outcomes


def test_the_route_reader_finds_upstreams_routes() -> None:
    routes = upstream_routes(upstream_bindings_source())
    assert routes["get_GetResourcePools"] == ("GET", "/api/v1/resource-pools")
    assert routes["get_GetExperiment"] == ("GET", "/api/v1/experiments/{experimentId}")
    assert len(routes) > 200


def test_the_checks_catch_missing_fields_wrong_types_and_unknown_enums(
    tmp_path: pathlib.Path,
) -> None:
    result = subprocess.run(
        [str(upstream_python()), str(DRIVER), "--self-check"],
        capture_output=True,
        text=True,
        env=upstream_env(tmp_path),
        timeout=120,
        check=True,
    )
    assert json.loads(result.stdout) == [
        "notes.notes[0].contents: 3 is not str",
        "notes.notes[0].name: required str is missing/null",
        "user.admin: 'yes' is not bool",
        "user.id: '5' is not int",
        "KeyError: 'agentDockerImage'",
        "ValueError: 'LOG_LEVEL_BOGUS' is not a valid v1LogLevel",
    ]


def test_every_shared_route_is_called(wire_run: tuple[set[str], dict[str, list[str]]]) -> None:
    shared, outcomes = wire_run
    assert set(SKIPPED) <= shared, "a skipped route is no longer shared: drop it from SKIPPED"
    assert sorted(shared - set(SKIPPED) - set(outcomes)) == []
    assert len(shared) > 150


def test_every_shared_route_parses_with_upstreams_bindings(
    wire_run: tuple[set[str], dict[str, list[str]]], record_property: Any
) -> None:
    shared, outcomes = wire_run
    failures = {
        name: [o for o in found if o != "ok"]
        for name, found in sorted(outcomes.items())
        if any(o != "ok" for o in found)
    }
    ok = sum(1 for name in shared if name in outcomes and name not in failures)
    record_property(
        "upstream_api_coverage", f"REST routes shared with upstream: {ok}/{len(shared)} parse"
    )
    assert failures == {}, f"{ok}/{len(shared)} shared routes parse:\n" + json.dumps(
        failures, indent=1
    )
