"""Fixtures of the det.pytorch.deepspeed tests: an off-cluster environment and a one-call trainer.

DeepSpeed's one-time op builds stay out of the test time: det.pytorch.deepspeed.init() skips the
CPU shared-memory op (test_trainer checks it), the trials use AdamW with ``torch_adam`` (no FusedAdam
build), and ``TORCH_EXTENSIONS_DIR`` points into the work tree's ``.cache/`` in case anything else
is ever built.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
os.environ.setdefault("TORCH_EXTENSIONS_DIR", str(ROOT / ".cache" / "torch_extensions"))

LAUNCHER_VARS = (
    "DET_CLUSTER_INFO", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_SIZE", "LOCAL_WORLD_SIZE",
    "MASTER_ADDR", "MASTER_PORT", "USE_DEEPSPEED", "USE_TORCH_DISTRIBUTED", "CROSS_RANK",
    "CROSS_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
)  # fmt: skip


@pytest.fixture
def off_cluster(monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path) -> pathlib.Path:
    """No ClusterInfo and no launcher variables: det.pytorch.deepspeed.init() sets up one process."""
    for name in LAUNCHER_VARS:
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "tmp").mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    return tmp_path


@pytest.fixture
def train(off_cluster: pathlib.Path) -> Callable[..., Any]:
    """``train(hparams, trial_class=LinTrial, **fit_kwargs) -> trial``: a local Trainer.fit run
    (checkpoints under ``<tmp>/ckpt``, seeded); the trial gets ``.weights`` and ``.storage``."""
    import lintrial

    from determined import pytorch
    from determined.pytorch import deepspeed as det_ds

    storage = off_cluster / "ckpt"

    def run(hparams: dict[str, Any], trial_class: type | None = None, **fit: Any) -> Any:
        with det_ds.init(
            hparams={**lintrial.HPARAMS, **hparams},
            exp_conf={"reproducibility": {"experiment_seed": 7}},
            checkpoint_storage=str(storage),
            enable_tensorboard_logging=False,
        ) as context:
            trial = (trial_class or lintrial.LinTrial)(context)
            fit.setdefault("max_length", pytorch.Batch(12))
            fit.setdefault("checkpoint_policy", "none")
            det_ds.Trainer(trial, context).fit(**fit)
            trial.weights = lintrial.weights(trial)
        trial.storage = storage
        return trial

    return run


@pytest.fixture(scope="session")
def two_rank_runs(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """``ds2_script.py`` on two CPU ranks under ``python -m determined.launch.deepspeed``: per ZeRO
    stage a straight, a stopped and a resumed run; one result dict per rank. Run once per test
    session: pytest-xdist workers share it through a lock in their common temporary directory."""
    from filelock import FileLock

    shared = tmp_path_factory.getbasetemp().parent
    out = shared / "deepspeed-two-ranks"
    with FileLock(str(shared / "deepspeed-two-ranks.lock")):
        if not (out / "rank1.json").exists():
            _run_two_ranks(out)
    return [json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1)]


def _run_two_ranks(out: pathlib.Path) -> None:
    out.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DET_")}
    for name in LAUNCHER_VARS:
        env.pop(name, None)
    env["PYTHONPATH"] = str(HERE)
    env["TMPDIR"] = str(out)
    result = subprocess.run(
        [
            sys.executable, "-m", "determined.launch.deepspeed", "--num_gpus", "2", "--",
            sys.executable, str(HERE / "ds2_script.py"), str(out),
        ],
        env=env, cwd=out, capture_output=True, text=True, timeout=280,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-5000:]
    assert "[rank=1]" in result.stdout + result.stderr
