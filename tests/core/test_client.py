"""The master client: error mapping, safe retries, JSON encoding, streams — against a real HTTP server."""

from __future__ import annotations

import pathlib
import socket
import threading

import pytest
from fake_master import FakeMaster

from determined.client import (
    APIError,
    ForbiddenError,
    MasterClient,
    MasterNotFoundError,
    NotFoundError,
    Session,
    UnauthenticatedError,
)


def session(fm: FakeMaster, **kwargs: object) -> Session:
    return Session(fm.url, "tok", backoff=0.001, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (401, UnauthenticatedError),
        (403, ForbiddenError),
        (404, NotFoundError),
        (400, APIError),
        (500, APIError),
    ],
)
def test_error_mapping(fake_master: FakeMaster, status: int, error: type[APIError]) -> None:
    fake_master.override("GET", "/api/v1/thing", status, {"error": {"error": f"message {status}"}})
    with pytest.raises(error, match=f"message {status}") as info:
        session(fake_master).request("GET", "/api/v1/thing")
    assert info.value.status == status
    assert info.value.message == f"message {status}"
    if status not in (401, 403, 404):
        assert type(info.value) is APIError


def test_non_json_error_body(fake_master: FakeMaster) -> None:
    fake_master.override("GET", "/api/v1/thing", 500, b"plain failure")
    with pytest.raises(APIError, match="plain failure"):
        session(fake_master).request("GET", "/api/v1/thing")


def test_get_retried_on_503(fake_master: FakeMaster) -> None:
    fake_master.override("GET", "/api/v1/master", 503, {"error": {"error": "busy"}}, times=2)
    assert session(fake_master).request("GET", "/api/v1/master")["clusterId"] == "fake-cluster"
    assert len(fake_master.find("GET", "/api/v1/master")) == 3


def test_get_gives_up_after_max_retries(fake_master: FakeMaster) -> None:
    fake_master.override("GET", "/api/v1/master", 503, {"error": {"error": "busy"}})
    with pytest.raises(APIError, match="busy"):
        session(fake_master, max_retries=4).request("GET", "/api/v1/master")
    assert len(fake_master.find("GET", "/api/v1/master")) == 4


def test_post_not_retried_on_503(fake_master: FakeMaster) -> None:
    fake_master.override(
        "POST", "/api/v1/trials/1/metrics", 503, {"error": {"error": "busy"}}, times=1
    )
    with pytest.raises(APIError, match="busy"):
        session(fake_master).request("POST", "/api/v1/trials/1/metrics", body={"x": 1})
    assert len(fake_master.find("POST", "/api/v1/trials/1/metrics")) == 1


class DroppingServer:
    """Accepts TCP connections and closes them at once, counting them (a master that crashes)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.accepted = 0
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            conn.recv(65536)
            self.accepted += 1
            conn.close()


@pytest.mark.parametrize(("method", "expected"), [("GET", 3), ("POST", 1)])
def test_connection_errors_retry_only_idempotent(method: str, expected: int) -> None:
    server = DroppingServer()
    try:
        s = Session(server.url, "tok", max_retries=3, backoff=0.001)
        with pytest.raises(MasterNotFoundError):
            s.request(method, "/api/v1/x", body={"a": 1} if method == "POST" else None)
        assert server.accepted == expected
    finally:
        server.sock.close()


def test_unreachable_master() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(MasterNotFoundError):
        Session(f"http://127.0.0.1:{port}", max_retries=2, backoff=0.001).request(
            "GET", "/api/v1/master"
        )


def test_nan_and_infinity_encoded_as_strings(fake_master: FakeMaster) -> None:
    body = {"a": float("nan"), "b": [float("inf"), -float("inf")], "c": {"d": 1.5}}
    session(fake_master).request("POST", "/api/v1/task/logs", body=body)
    (request,) = fake_master.find("POST", "/api/v1/task/logs")
    assert request.body == {"a": "NaN", "b": ["Infinity", "-Infinity"], "c": {"d": 1.5}}


def test_auth_headers(fake_master: FakeMaster) -> None:
    Session(fake_master.url, "user-tok").request("GET", "/api/v1/master")
    Session(fake_master.url, "alloc-tok", allocation_token=True).request("GET", "/api/v1/master")
    user, alloc = fake_master.find("GET", "/api/v1/master")
    assert user.headers["Authorization"] == "Bearer user-tok"
    assert "Grpc-Metadata-x-allocation-token" not in user.headers
    assert alloc.headers["Grpc-Metadata-x-allocation-token"] == "Bearer alloc-tok"
    assert "Authorization" not in alloc.headers


def test_stream_yields_results(fake_master: FakeMaster) -> None:
    lines = b'{"result": {"n": 1}}\n\n{"result": {"n": 2}}\n{"result": [3]}\n'
    fake_master.override("GET", "/api/v1/stream", 200, lines)
    assert list(session(fake_master).stream("/api/v1/stream")) == [{"n": 1}, {"n": 2}, [3]]


def test_stream_error_line(fake_master: FakeMaster) -> None:
    lines = b'{"result": {"n": 1}}\n{"error": {"error": "log source gone"}}\n'
    fake_master.override("GET", "/api/v1/stream", 200, lines)
    items = session(fake_master).stream("/api/v1/stream")
    assert next(items) == {"n": 1}
    with pytest.raises(APIError, match="log source gone"):
        next(items)


def test_stream_error_status(fake_master: FakeMaster) -> None:
    fake_master.override("GET", "/api/v1/stream", 404, {"error": {"error": "no such task"}})
    with pytest.raises(NotFoundError, match="no such task"):
        list(session(fake_master).stream("/api/v1/stream"))


def test_master_client_endpoints(fake_master: FakeMaster) -> None:
    client = MasterClient(session(fake_master))
    assert client.start_run(5, None) == 1
    assert client.report_early_exit(5, "EXITED_REASON_INVALID_HP") is True
    assert client.report_early_exit(5, "EXITED_REASON_INVALID_HP") is False
    with pytest.raises(NotFoundError):
        client.get_checkpoint("missing")
    assert client.get_best_searcher_validation_metric(1) is None
    assert client.get_preemption_signal("a1", 0) is False
    (start,) = fake_master.find("POST", "/api/v1/runs/start")
    assert start.body == {"runId": 5}


def test_resource_clients_send_upstream_paths_and_bodies(
    fake_master: FakeMaster, tmp_path: pathlib.Path
) -> None:
    from determined.client import Client, create_experiment, read_context_dir

    fake_master.override("GET", "/api/v1/models/a%2Fb/versions/3", 200, {"modelVersion": {}})
    fake_master.override("POST", "/api/v1/experiments", 200, {"experiment": {"id": 7}})
    fake_master.override("POST", "/api/v1/experiments/7/pause", 200, {})
    api = Client(session(fake_master))
    api.models.get_version("a/b", 3)
    api.experiments.act(7, "pause", retry=False)
    (tmp_path / "train.py").write_text("print('hi')\n")
    files = read_context_dir(tmp_path)
    created = create_experiment(api.session, {"name": "x"}, files, activate=False, project_id=2)
    assert created.id == 7
    body = fake_master.find("POST", "/api/v1/experiments")[0].body
    assert body["modelDefinition"] == files and body["activate"] is False
    assert body["projectId"] == 2 and "name: x" in body["config"]
    assert fake_master.find("POST", "/api/v1/experiments/7/pause")[0].body == {}


def test_context_too_large_names_the_biggest_files(tmp_path: pathlib.Path) -> None:
    from determined.client import ContextTooLargeError, read_context_dir

    (tmp_path / "big.bin").write_bytes(b"x" * 3000)
    (tmp_path / "small.txt").write_text("y")
    with pytest.raises(ContextTooLargeError) as info:
        read_context_dir(tmp_path, limit=1000)
    assert info.value.limit == 1000 and info.value.size >= 3000
    assert info.value.sizes[0][0] == "big.bin"
    assert isinstance(info.value, ValueError)


def test_module_functions_keep_the_methods_signatures() -> None:
    import inspect

    from determined.experimental import Determined, client

    for name in ("create_experiment", "list_experiments", "list_models", "create_user"):
        method = inspect.signature(getattr(Determined, name))
        function = inspect.signature(getattr(client, name))
        assert list(function.parameters) == list(method.parameters)[1:]
        assert getattr(client, name).__doc__ == getattr(Determined, name).__doc__
        assert getattr(client, name).__module__ == "determined.experimental.client"
