"""Fixtures of the det.pytorch tests: an off-cluster environment and a one-call local trainer."""

from __future__ import annotations

import pathlib
import sys
from collections.abc import Callable
from typing import Any

import pytest

_HERE = str(pathlib.Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)


@pytest.fixture
def off_cluster(monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path) -> pathlib.Path:
    """No ClusterInfo, no launcher variables, TensorBoard files under tmp_path."""
    for name in ("DET_CLUSTER_INFO", "RANK", "WORLD_SIZE", "LOCAL_RANK", "USE_TORCH_DISTRIBUTED"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    return tmp_path


@pytest.fixture
def train(off_cluster: pathlib.Path) -> Callable[..., Any]:
    """``train(TrialClass, hparams, **fit_kwargs) -> trial``: a local Trainer.fit run whose
    checkpoints go to ``<tmp>/ckpt``; ``fit_kwargs`` may include ``aggregation_frequency``."""
    from determined import pytorch

    storage = off_cluster / "ckpt"

    def run(trial_class: type, hparams: dict[str, Any], **fit_kwargs: Any) -> Any:
        init_kwargs = {
            "hparams": {"global_batch_size": 4, **hparams},
            "checkpoint_storage": str(storage),
            "enable_tensorboard_logging": fit_kwargs.pop("tensorboard", False),
        }
        for key in ("aggregation_frequency", "exp_conf"):
            if key in fit_kwargs:
                init_kwargs[key] = fit_kwargs.pop(key)
        with pytorch.init(**init_kwargs) as context:
            trial = trial_class(context)
            fit_kwargs.setdefault("max_length", pytorch.Batch(8))
            pytorch.Trainer(trial, context).fit(**fit_kwargs)
        trial.storage = storage
        return trial

    return run
