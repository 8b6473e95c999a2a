"""TensorBoard test fixtures: a real S3 server (moto) per xdist worker, Chromium for the button.

Helpers (synthetic event files, the S3 storage config) are in ``tb_testing``, importable because
this directory is put on ``sys.path`` (its name would shadow the ``tensorboard`` package as one).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from tb_testing import CHROMIUM, S3_ENV, S3Server, free_port  # noqa: E402


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """A moto S3 server on a free loopback port with one fresh bucket; skips if moto is missing."""
    beside_python = os.path.join(os.path.dirname(sys.executable), "moto_server")
    binary = beside_python if os.path.exists(beside_python) else shutil.which("moto_server")
    if binary is None:
        pytest.skip("moto_server not installed (pip install 'moto[server]')")
    boto3 = pytest.importorskip("boto3")
    pytest.importorskip("s3fs")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    process = subprocess.Popen(
        [binary, "-H", "127.0.0.1", "-p", str(port)],
        env={**os.environ, **S3_ENV},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"moto_server exited with status {process.returncode}")
            try:
                with urllib.request.urlopen(url + "/moto-api/", timeout=1):
                    break
            except (urllib.error.URLError, OSError):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"moto_server did not answer on {url}") from None
                time.sleep(0.05)
        bucket = f"det-tb-{uuid.uuid4().hex[:12]}"
        boto3.client(
            "s3",
            endpoint_url=url,
            region_name=S3_ENV["AWS_DEFAULT_REGION"],
            aws_access_key_id=S3_ENV["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=S3_ENV["AWS_SECRET_ACCESS_KEY"],
        ).create_bucket(Bucket=bucket)
        yield S3Server(endpoint_url=url, bucket=bucket)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict[str, Any]) -> dict[str, Any]:
    """Launch Debian's Chromium; never a browser downloaded by ``playwright install``."""
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip(f"{CHROMIUM} is missing: `make install` installs Debian's chromium")
    return {**browser_type_launch_args, "executable_path": CHROMIUM}
