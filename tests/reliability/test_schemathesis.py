"""det-master's OpenAPI document fuzzed with schemathesis: no route answers >= 500, whoever asks.

The master's routes read their JSON bodies and query strings by hand (upstream's camelCase and
snake_case both), so the served document declares path parameters only. Fuzzing that alone would
never send a body. Before generating, the test therefore widens a copy of the document: every
operation gets the query parameters and body fields its route function reads (found in the route's
source: ``get(body, "x")``, ``body.get("x")``, ``q.get("x")``, ...), each allowed to be any JSON value
— exactly the type confusion (a list where a number belongs, a huge integer, a string for an
object) that turns careless code into a 500.

Runs are bounded and deterministic: a fixed number of examples per operation, Hypothesis
derandomized with no example database and no shrinking, so a failure repeats and `make test`
stays quick on a 2-core machine.
"""

from __future__ import annotations

import copy
import inspect
import os
import re
import textwrap
from collections.abc import Iterator
from typing import Any

import pytest
import requests
import schemathesis
import yaml
from hypothesis import HealthCheck, Phase, given, settings
from starlette.routing import Mount, Route

from determined.client import Client, MasterClient

EXAMPLES_PER_OPERATION = int(os.environ.get("DET_FUZZ_EXAMPLES", "10"))
"""Examples Hypothesis draws per operation and user (x ~185 operations x 2 users); set
``DET_FUZZ_EXAMPLES`` for a deeper run by hand."""

OPEN_ROUTES = {
    ("POST", "/api/v1/auth/login"): "logging in is how a token is obtained",
    ("GET", "/api/v1/master"): "master info: upstream's clients read the version before login",
    ("GET", "/info"): "upstream's legacy alias of master info",
    ("GET", "/health"): "liveness probe for load balancers and process supervisors",
    ("GET", "/api/v1/openapi.json"): "the API description (upstream serves /docs/* openly)",
    ("GET", "/openapi.json"): "alias of the API description",
    ("GET", "/api/v1/docs"): "the API description rendered (upstream serves /docs/* openly)",
    ("GET", "/docs/oauth2-redirect"): "static helper page of the rendered API description",
    ("GET", "/login"): "the web UI's login form",
    ("POST", "/login"): "the web UI's login (the form checks the password)",
    ("POST", "/logout"): "ends the caller's own web session, if any; harmless without one",
    ("GET", "/ui/static/{path}"): "the web UI's static assets (CSS, JavaScript): no data",
}
"""Routes a request without a token may use, with the reason. Upstream also leaves /task-logs and
/agents open; det-master refuses them (stricter). Web UI pages answer a redirect to /login."""

SKIPPED_OPERATIONS = {
    ("POST", "/api/v1/auth/logout"): "ends the session the fuzzer authenticates with",
}
"""Operations the fuzzer does not call, with the reason (the master has no shutdown route)."""

VICTIM_OPERATIONS = {
    ("POST", "/api/v1/users/{user_id}/password"),
    ("PATCH", "/api/v1/users/{user_id}"),
}
"""Operations fuzzed on a user of their own only: on the fuzzing users they could change a
password or deactivate an account, and every later request would end in 401."""


BOUNDED_QUERY = {
    "follow": {"type": "string", "enum": ["false", "0"]},
    "timeout_seconds": {"type": "integer", "minimum": 0, "maximum": 1},
    "timeoutSeconds": {"type": "integer", "minimum": 0, "maximum": 1},
}
"""Query parameters kept harmless: ``follow`` streams logs until the task ends (never, here) and
``timeout_seconds`` long-polls preemption; each call must return."""


def _read_names(source: str) -> tuple[set[str], set[str]]:
    """(body fields, query parameters) a route function's source reads."""
    body = set(re.findall(r"\b(?:get|sub_object)\(\s*\w+\s*,\s*\"(\w+)\"", source))
    body |= set(re.findall(r"\b(?:body|payload|data|request_body)\.get\(\s*\"(\w+)\"", source))
    body |= set(re.findall(r"\b(?:body|payload|data)\[\s*\"(\w+)\"\s*\]", source))
    query = set(
        re.findall(r"\b(?:q|query|params|query_params)\.get(?:list)?\(\s*\"(\w+)\"", source)
    )
    query |= set(re.findall(r"_query_\w+\(\s*\w+\s*,\s*\"(\w+)\"", source))
    return body, query


def _route_source(function: Any, depth: int = 2) -> str:
    """The source of a route function and of the det-master functions it calls by name (two
    levels deep), where the fields a route reads are often picked out."""
    try:
        source = textwrap.dedent(inspect.getsource(function))
    except (OSError, TypeError):
        return ""
    if depth == 0:
        return source
    parts = [source]
    namespace = getattr(function, "__globals__", {})
    for name in sorted(set(re.findall(r"\b([A-Za-z_]\w*)\(", source))):
        called = namespace.get(name)
        module = getattr(called, "__module__", "") or ""
        is_route_helper = module.startswith("determined.master._api") and called is not function
        if inspect.isfunction(called) and is_route_helper:
            parts.append(_route_source(called, depth - 1))
    return "\n".join(parts)


def _likely_path_value(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    """A path parameter's schema that often names a seeded row (else any value of its type)."""
    if schema.get("type") == "integer":
        return {"anyOf": [{"type": "integer", "minimum": 0, "maximum": 4}, schema]}
    if name == "model_name":
        return {"anyOf": [{"enum": [SEED_MODEL, "1"]}, schema]}
    return schema


def _flat_routes(routes: list[Any]) -> Iterator[Any]:
    """The app's routes with included routers expanded (FastAPI includes them lazily)."""
    for route in routes:
        original = getattr(route, "original_router", None)
        if original is not None:
            yield from _flat_routes(original.routes)
        else:
            yield route


def _widened_document(app: Any, document: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``document`` whose operations declare the body fields and query parameters their
    routes read, each allowed to be any JSON value (any string for query parameters)."""
    widened = copy.deepcopy(document)
    for route in _flat_routes(app.routes):
        if not isinstance(route, Route) or not getattr(route, "include_in_schema", False):
            continue
        body_names, query_names = _read_names(_route_source(route.endpoint))
        path = route.path
        for method in route.methods or ():
            operation = widened["paths"].get(path, {}).get(method.lower())
            if operation is None:
                continue
            params = operation.setdefault("parameters", [])
            for param in params:
                if param["in"] == "path":
                    param["schema"] = _likely_path_value(param["name"], param.get("schema", {}))
            declared = {p["name"] for p in params}
            for name in sorted(query_names - declared):
                params.append(
                    {
                        "name": name,
                        "in": "query",
                        "required": False,
                        "schema": BOUNDED_QUERY.get(
                            name, {"anyOf": [{"type": "integer"}, {"type": "string"}]}
                        ),
                    }
                )
            if method in ("POST", "PUT", "PATCH", "DELETE") and "requestBody" not in operation:
                operation["requestBody"] = {
                    "required": True,
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "properties": {name: {} for name in sorted(body_names)},
                            }
                        }
                    },
                }
    return widened


def _operations(document: dict[str, Any]) -> Iterator[tuple[str, str]]:
    for path, item in document["paths"].items():
        for method in item:
            if method in ("get", "post", "put", "patch", "delete"):
                yield method.upper(), path


SEED_MODEL = "seed-model"


def _seed(master: Any, storage: str) -> int:
    """Rows for fuzzed ids to find (ids 1-4 are drawn often): per user an unmanaged experiment
    with a trial that reported metrics, a model, and the user of :data:`VICTIM_OPERATIONS` (its
    id is returned)."""
    config = {
        "name": "fuzz-seed",
        "searcher": {"name": "single", "metric": "loss"},
        "checkpoint_storage": {"type": "shared_fs", "host_path": storage},
    }
    for username in ("admin", "determined"):
        session = master.session(username)
        client = Client(session)
        exp_id = client.experiments.create_unmanaged(yaml.safe_dump(config))["experiment"]["id"]
        trial_id = client.trials.create_unmanaged(exp_id, {"lr": 0.1})["trial"]["id"]
        run = client.trials.start_unmanaged(trial_id, resume=False)
        for group in ("training", "validation"):
            MasterClient(session).report_trial_metrics(
                trial_id, int(run["trialRunId"]), group, {"loss": 0.5}, steps_completed=1
            )
    client = Client(master.session("admin"))
    client.models.create({"name": SEED_MODEL})
    victim = client.users.create({"username": "fuzz-victim", "active": True}, None)
    return int(victim["user"]["id"])


@pytest.fixture(scope="module")
def fuzz_master(make_module_master: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A master without slots (whatever a fuzzed request launches stays queued, nothing runs),
    with a few rows to find."""
    master = make_module_master(slots=0)
    master.fuzz_victim = _seed(master, str(tmp_path_factory.mktemp("fuzz-checkpoints")))
    return master


@pytest.fixture(scope="module")
def document(fuzz_master: Any) -> dict[str, Any]:
    return dict(requests.get(f"{fuzz_master.url}/api/v1/openapi.json", timeout=30).json())


def _error_message(response: requests.Response) -> str:
    """The message of an error answer (upstream's ``{"error": {"error": MESSAGE}}``), or ""."""
    try:
        body = response.json()
    except ValueError:
        return ""
    error = body.get("error") if isinstance(body, dict) else None
    message = error.get("error") if isinstance(error, dict) else None
    return message.strip() if isinstance(message, str) else ""


class _Fuzzer:
    """Calls operations with generated inputs as one user and keeps the server errors it saw,
    and any 4xx without an error message."""

    def __init__(self, url: str, token: str) -> None:
        self.url = url
        self.headers = {"Authorization": f"Bearer {token}"}
        self.http = requests.Session()
        self.failures: dict[tuple[str, str, int], str] = {}
        self.calls = 0

    def call(self, key: tuple[str, str], case: Any) -> None:
        """One generated request; a >= 500 answer is recorded (first one per operation)."""
        self.calls += 1
        response = case.call(base_url=self.url, headers=self.headers, session=self.http, timeout=30)
        status = response.status_code
        if status >= 500 or (status >= 400 and not _error_message(response)):
            self.failures.setdefault(
                (*key, status),
                f"{key[0]} {key[1]} -> {status}: {response.text[:300]}"
                f" (path {case.path_parameters}, query {case.query}, body {case.body!r:.200})",
            )

    def fuzz(self, operation: Any, path_parameters: dict[str, Any] | None = None) -> None:
        """:data:`EXAMPLES_PER_OPERATION` derandomized examples of one operation, no shrinking
        (``path_parameters``: fixed values)."""
        key = (operation.method.upper(), operation.path)

        @settings(
            max_examples=EXAMPLES_PER_OPERATION,
            derandomize=True,
            database=None,
            deadline=None,
            phases=[Phase.explicit, Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @given(case=operation.as_strategy(path_parameters=path_parameters))
        def run(case: Any) -> None:
            self.call(key, case)

        run()


@pytest.mark.parametrize("username", ["admin", "determined"])
def test_no_server_errors(fuzz_master: Any, document: dict[str, Any], username: str) -> None:
    """Admin and non-admin: no generated request to any route gets a 5xx answer, and every 4xx
    carries an error message."""
    app = fuzz_master.master._server.config.app
    schema = schemathesis.openapi.from_dict(_widened_document(app, document))
    fuzzer = _Fuzzer(fuzz_master.url, fuzz_master.login(username))
    for result in schema.get_all_operations():
        operation = result.ok()
        key = (operation.method.upper(), operation.path)
        if key in VICTIM_OPERATIONS:
            fuzzer.fuzz(operation, {"user_id": fuzz_master.fuzz_victim})
        elif key not in SKIPPED_OPERATIONS:
            fuzzer.fuzz(operation)
    failures = sorted(fuzzer.failures.values())
    assert not failures, f"{len(failures)} server errors in {fuzzer.calls} calls:\n" + "\n".join(
        failures
    )
    assert fuzzer.calls > 2 * len(list(_operations(document))), fuzzer.calls
    assert requests.get(f"{fuzz_master.url}/api/v1/master", timeout=30).status_code == 200


API_PREFIXES = ("/api/", "/ui/api/", "/proxy/", "/task-logs", "/checkpoints/", "/resources/")
"""Routes answering JSON or files: refused with 401. Other paths are web UI pages."""


def _concrete(path: str) -> str:
    return re.sub(r"\{[^}]+\}", "1", path)


def _all_routes(app: Any) -> Iterator[tuple[str, str]]:
    """(method, path) of every HTTP route the app serves, in the OpenAPI document or not."""
    for route in _flat_routes(app.routes):
        if isinstance(route, Mount):
            yield "GET", route.path + "/{path}"
        elif isinstance(route, Route):
            for method in sorted(route.methods or ()):
                if method not in ("HEAD", "OPTIONS"):
                    yield method, route.path


@pytest.mark.parametrize("token", [None, "not-a-token", "", "revoked"])
def test_routes_refuse_without_valid_token(fuzz_master: Any, token: str | None) -> None:
    """Without a valid token (none, garbage, empty, or an admin's token after its logout) every
    API route answers 401 and every web UI page redirects to the login form, except the routes
    of :data:`OPEN_ROUTES`, which answer without one."""
    if token == "revoked":
        token = fuzz_master.login("admin")
        logout = requests.post(
            f"{fuzz_master.url}/api/v1/auth/logout",
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
        )
        assert logout.status_code == 200, logout.text
    app = fuzz_master.master._server.config.app
    wrong: list[str] = []
    routes = sorted(set(_all_routes(app)))
    assert len(routes) > 150
    http = requests.Session()
    for method, path in routes:
        headers = {} if token is None else {"Authorization": f"Bearer {token}"}
        response = http.request(
            method,
            fuzz_master.url + _concrete(path).replace("{path}", "x.css"),
            headers=headers,
            json={} if method != "GET" else None,
            allow_redirects=False,
            timeout=30,
        )
        status = response.status_code
        if (method, path) in OPEN_ROUTES:
            if status in (401, 403):
                wrong.append(f"{method} {path}: {status} but listed as open")
            continue
        location = response.headers.get("location", "")
        if path == "/proxy/{task_id}":  # only adds the trailing slash; the target asks for a token
            refused = status == 401 or location.endswith(_concrete(path) + "/")
        elif path.startswith(API_PREFIXES):
            refused = status == 401 and bool(_error_message(response))
        else:  # a web UI page
            refused = status == 401 or (300 <= status < 400 and "/login" in location)
        if not refused:
            wrong.append(f"{method} {path}: {status} without a valid token")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize(
    ("method", "path", "status", "words"),
    [
        ("GET", "/api/v1/projects/2495024308676162983297024", 400, ["project_id", "out of range"]),
        ("GET", "/api/v1/trials/308121594942885986304/logs", 400, ["trial_id", "out of range"]),
        ("GET", "/api/v1/experiments?limit=100000000000000000000000", 400, ["limit", "range"]),
        ("DELETE", "/api/v1/models/%C2%B2", 404, ["not found"]),
        ("PATCH", "/api/v1/models/99999999999999999999999", 404, ["not found"]),
        ("POST", "/api/v1/models/%C2%B2/versions", 404, ["not found"]),
    ],
)
def test_server_errors_found_by_fuzzing_stay_fixed(
    fuzz_master: Any, method: str, path: str, status: int, words: list[str]
) -> None:
    """The 500s schemathesis found (ids past 64 bits reaching SQLite; a model named "²", which
    ``str.isdigit`` calls a number and ``int`` refuses): now a 4xx naming the problem."""
    headers = {"Authorization": f"Bearer {fuzz_master.login('admin')}"}
    response = requests.request(
        method, fuzz_master.url + path, headers=headers, json={}, timeout=30
    )
    assert response.status_code == status, response.text
    message = response.json()["error"]["error"]
    assert all(word in message for word in words), message
