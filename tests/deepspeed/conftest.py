"""Fixtures of the det.pytorch.deepspeed tests: an off-cluster environment and a one-call trainer.

DeepSpeed's one-time op builds stay out of the test time: det.pytorch.deepspeed.init() skips the
CPU shared-memory op (test_trainer checks it), the trials use AdamW with ``torch_adam`` (no FusedAdam
build), and ``TORCH_EXTENSIONS_DIR`` points into the work tree's ``.cache/`` in case anything else
is ever built.
"""

from __future__ import annotations

import os
import pathlib
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
