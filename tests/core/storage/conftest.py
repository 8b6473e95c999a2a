"""Fixtures for the storage tests: a real local S3 server (moto) per xdist worker."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

S3_ENV = {
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
}


@dataclass(frozen=True)
class S3Server:
    endpoint_url: str
    bucket: str


def _moto_server_binary() -> str | None:
    beside_python = os.path.join(os.path.dirname(sys.executable), "moto_server")
    if os.path.exists(beside_python):
        return beside_python
    return shutil.which("moto_server")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_until_up(url: str, process: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"moto_server exited with status {process.returncode}")
        try:
            with urllib.request.urlopen(url + "/moto-api/", timeout=1):
                return
        except (urllib.error.URLError, OSError):
            time.sleep(0.05)
    raise RuntimeError(f"moto_server did not answer on {url} within {timeout} s")


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """A moto S3 server on a free loopback port with one fresh bucket; skips if moto is missing."""
    binary = _moto_server_binary()
    if binary is None:
        pytest.skip("moto_server not installed (pip install 'moto[server]') — S3 tests need it")
    boto3 = pytest.importorskip("boto3", reason="boto3 is needed to create the test bucket")
    pytest.importorskip("s3fs", reason="s3fs is needed for s3 checkpoint storage")
    with pytest.MonkeyPatch.context() as mp:
        for key, value in S3_ENV.items():
            mp.setenv(key, value)
        port = _free_port()
        url = f"http://127.0.0.1:{port}"
        process = subprocess.Popen(
            [binary, "-H", "127.0.0.1", "-p", str(port)],
            env={**os.environ, **S3_ENV},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            _wait_until_up(url, process)
            bucket = f"det-test-{uuid.uuid4().hex[:12]}"
            boto3.client("s3", endpoint_url=url).create_bucket(Bucket=bucket)
            yield S3Server(endpoint_url=url, bucket=bucket)
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
