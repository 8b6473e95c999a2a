"""Upstream's own client library (determined==0.38.1, in a separate venv) works against a det master.

The venv (tests/upstream_venv.py) is built once under .cache/ and reused; it never touches the
project's venv.
"""

from __future__ import annotations

import pathlib
import subprocess
import textwrap

import pytest
from e2e.harness import EXAMPLES
from upstream_venv import upstream_env, upstream_python

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
_upstream_python = upstream_python  # the name other test modules import from here


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
    python = upstream_python()
    master = master_factory()
    env = upstream_env(tmp_path)
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
