"""det-core installed alone into a fresh venv: the Core API works with nothing else of det's."""

from __future__ import annotations

import os
import pathlib
import subprocess
import venv

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_det_core_alone(tmp_path: pathlib.Path) -> None:
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = str(env_dir / "bin" / "python")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    subprocess.run(
        [
            python,
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            "-c",
            str(ROOT / "requirements" / "constraints.txt"),
            str(ROOT / "packages" / "core"),
        ],
        check=True,
        env=env,
        timeout=600,
        capture_output=True,
    )
    script = f"""
import pathlib, subprocess, sys
import determined as det
with det.core.init(checkpoint_storage={str(tmp_path / "ckpt")!r}) as ctx:
    ctx.train.report_training_metrics(1, {{"loss": 1.0}})
    with ctx.checkpoint.store_path({{"steps_completed": 1}}) as (path, uuid):
        (path / "w").write_text("x")
assert (pathlib.Path({str(tmp_path / "ckpt")!r}) / uuid / "w").read_text() == "x"
try:
    det.keras
except AttributeError as e:
    assert "pip install det-plugin-keras" in str(e), e
else:
    raise AssertionError("det.keras should need det-plugin-keras")
times = subprocess.run([sys.executable, "-X", "importtime", "-c", "import determined"],
                       capture_output=True, text=True).stderr
for heavy in ("torch", "tensorflow", "fastapi", "uvicorn", "requests"):
    assert not any(line.rsplit("|", 1)[-1].strip().split(".")[0] == heavy for line in times.splitlines()), heavy
print("ok")
"""
    result = subprocess.run(
        [python, "-c", script], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith("ok")
