"""Helpers for master benchmarks: an in-process det master and a logged-in session."""

from __future__ import annotations

import atexit
import pathlib
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from typing import Any

import yaml

from determined.client import Session, read_context_dir
from determined.master import Master, MasterConfig


def start_master(**settings: Any) -> tuple[Master, Session]:
    settings.setdefault("port", 0)
    settings.setdefault("data_dir", tempfile.mkdtemp(prefix="det-bench-"))
    master = Master(MasterConfig(**settings))
    master.start()
    anonymous = Session(master.url)
    token = anonymous.request(
        "POST", "/api/v1/auth/login", body={"username": "determined", "password": ""}
    )["token"]
    return master, Session(master.url, token)


def _login(url: str) -> Session:
    token = Session(url).request(
        "POST", "/api/v1/auth/login", body={"username": "determined", "password": ""}
    )["token"]
    return Session(url, token)


def start_master_process(
    *flags: str, prelude: str | None = None
) -> tuple[subprocess.Popen[bytes], Session]:
    """``det-master up`` in its own process (so load generators don't share its GIL).

    ``prelude``: a module of ``benchmarks/`` that the master process imports before it starts
    (a benchmark's instrumentation, e.g. ``_http_only``)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    data_dir = tempfile.mkdtemp(prefix="det-bench-")
    # Removed when the benchmark exits (its finally blocks stop the master first): a run of the
    # ingestion benchmark leaves ~180 MB of database behind otherwise.
    atexit.register(shutil.rmtree, data_dir, True)
    if prelude is None:
        start = ["-m", "determined.master"]
    else:
        here = str(pathlib.Path(__file__).resolve().parent)
        start = [
            "-c",
            f"import sys; sys.path.insert(0, {here!r}); import {prelude}, runpy; "
            "runpy.run_module('determined.master', run_name='__main__', alter_sys=True)",
        ]
    proc = subprocess.Popen(
        [
            sys.executable,
            *start,
            "up",
            "--port",
            str(port),
            "--data-dir",
            data_dir,
            *flags,
        ],
        stdout=subprocess.DEVNULL,
        stderr=open(pathlib.Path(data_dir) / "master.log", "wb"),  # noqa: SIM115
    )
    url = f"http://127.0.0.1:{port}"

    def up() -> Session | None:
        try:
            return _login(url)
        except Exception:
            if proc.poll() is not None:
                raise RuntimeError(f"det-master exited; see {data_dir}/master.log") from None
            return None

    return proc, wait_for(up, timeout=60, interval=0.05)


def create_experiment(session: Session, config: dict[str, Any], context: pathlib.Path) -> int:
    body = {
        "config": yaml.safe_dump(config),
        "modelDefinition": read_context_dir(context),
        "activate": True,
    }
    return int(session.request("POST", "/api/v1/experiments", body=body)["experiment"]["id"])


def wait_for(predicate: Any, timeout: float = 120, interval: float = 0.002) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError("benchmark condition not reached")
        time.sleep(interval)


def wait_completed(session: Session, exp_id: int, timeout: float = 300) -> None:
    """Wait until experiment ``exp_id`` is COMPLETED."""
    wait_for(
        lambda: (
            session.request("GET", f"/api/v1/experiments/{exp_id}")["experiment"]["state"]
            == "STATE_COMPLETED"
        ),
        timeout=timeout,
        interval=0.2,
    )
