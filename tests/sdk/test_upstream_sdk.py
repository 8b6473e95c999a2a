"""Upstream's own SDK (determined==0.38.1, in its own venv under .cache/) against a det master:
list experiments, read and download a checkpoint, register it as a model version."""

from __future__ import annotations

import os
import pathlib
import subprocess
import textwrap
from typing import Any

import pytest
from e2e.test_upstream_client import _upstream_python

from determined.master import Master

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SCRIPT = textwrap.dedent(
    """
    import json, pathlib, sys, warnings
    warnings.simplefilter("ignore", FutureWarning)
    from determined.experimental import client
    from determined.common.experimental.checkpoint import DownloadMode

    master, exp_id, out = sys.argv[1], int(sys.argv[2]), pathlib.Path(sys.argv[3])
    client.login(master=master, user="admin", password="")
    ids = [e.id for e in client.list_experiments()]
    assert exp_id in ids, ids
    exp = client.get_experiment(exp_id)
    best = exp.list_checkpoints(max_results=1)[0]
    ckpt = client.get_checkpoint(best.uuid)
    assert ckpt.training.experiment_id == exp_id, ckpt.training
    paths = [ckpt.download(str(out / mode.value), mode=mode) for mode in DownloadMode]
    states = [json.loads((pathlib.Path(p) / "state.json").read_text()) for p in paths]
    model = client.create_model("upstream-model", description="via upstream")
    version = model.register_version(ckpt.uuid)
    again = client.get_model("upstream-model").get_version()
    trials = exp.list_trials()
    metrics = list(client.iter_trials_metrics([t.id for t in trials], group="validation"))
    print(json.dumps({
        "uuid": ckpt.uuid,
        "state": ckpt.state.name,
        "steps": ckpt.metadata["steps_completed"],
        "downloaded": states,
        "version": version.model_version,
        "latest": again.checkpoint.uuid,
        "models": [m.name for m in client.list_models()],
        "validation": [m.metrics["val_loss"] for m in metrics],
    }))
    """
)


def test_upstream_sdk_reads_checkpoints_and_registers_models(
    finished: Any, master: Master, tmp_path: pathlib.Path
) -> None:
    import json

    python = _upstream_python()
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "DET_"))
    }
    env["HOME"] = str(tmp_path)
    env["XDG_CONFIG_HOME"] = str(tmp_path / "config")
    result = subprocess.run(
        [str(python), "-c", SCRIPT, master.url, str(finished.id), str(tmp_path / "dl")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    best = finished.list_checkpoints(max_results=1)[0]
    assert report["uuid"] == best.uuid and report["state"] == "COMPLETED"
    assert report["steps"] == 2 and report["downloaded"] == [{"step": 2}] * 3
    assert report["version"] == 1 and report["latest"] == best.uuid
    assert "upstream-model" in report["models"]
    assert report["validation"] == [0.5, 0.2, 0.9]
