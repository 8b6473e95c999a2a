"""Upstream's own client library (determined==0.38.1, in a separate venv) works against a det master.

The venv is built once under .cache/ (about 40 s) and reused; it never touches the project's venv.
"""

from __future__ import annotations

import fcntl
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest
from e2e.harness import EXAMPLES

ROOT = pathlib.Path(__file__).resolve().parents[2]
UPSTREAM = "determined==0.38.1"
VENV = ROOT / ".cache" / "upstream-determined-0.38.1"
pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def _upstream_python() -> pathlib.Path:
    python = VENV / "bin" / "python"
    VENV.parent.mkdir(parents=True, exist_ok=True)
    with open(VENV.parent / "upstream-venv.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one xdist worker builds it, the others wait
        if not (VENV / ".complete").exists():
            subprocess.run([sys.executable, "-m", "venv", "--clear", str(VENV)], check=True)
            subprocess.run(
                [
                    str(python),
                    "-m",
                    "pip",
                    "install",
                    "-q",
                    "--disable-pip-version-check",
                    UPSTREAM,
                ],
                check=True,
                timeout=900,
                capture_output=True,
            )
            (VENV / ".complete").touch()
    return python


SCRIPT = textwrap.dedent(
    """
    import sys
    from determined.experimental import client

    master, context = sys.argv[1], sys.argv[2]
    client.login(master=master, user="determined", password="")
    exp = client.create_experiment(config=context + "/1_metrics.yaml", model_dir=context)
    print("created", exp.id)
    ids = [e.id for e in client.list_experiments()]
    assert exp.id in ids, ids
    exp.reload()
    print("listed", ids, exp.state)
    """
)


def test_upstream_sdk_logs_in_creates_and_lists(master_factory, tmp_path: pathlib.Path) -> None:
    python = _upstream_python()
    master = master_factory()
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "DET_"))
    }
    env["HOME"] = str(tmp_path)  # upstream caches tokens under the user's config dir
    env["XDG_CONFIG_HOME"] = str(tmp_path / "config")
    result = subprocess.run(
        [str(python), "-c", SCRIPT, master.url, str(EXAMPLES / "core_api")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "created" in result.stdout and "listed" in result.stdout
