"""``determined.lightning.experimental.DetLogger``: upstream's import path and signature, and a
Lightning Trainer reporting an unmanaged run (``core_v2``) to a real master through it."""

from __future__ import annotations

import inspect
import os
import pathlib
import subprocess
import sys
import textwrap
import uuid
from typing import Any

import pytest

pl = pytest.importorskip("pytorch_lightning")

SCRIPT = textwrap.dedent(
    """
    import sys

    import pytorch_lightning as pl
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    from determined.experimental import core_v2
    from determined.lightning.experimental import DetLogger


    class Regression(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(2, 1)

        def training_step(self, batch, batch_idx):
            x, y = batch
            loss = torch.nn.functional.mse_loss(self.layer(x), y)
            self.log("train_loss", loss)
            return loss

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)


    torch.manual_seed(0)
    x = torch.randn(32, 2)
    data = DataLoader(TensorDataset(x, x.sum(dim=1, keepdim=True)), batch_size=8)
    logger = DetLogger(config=core_v2.Config(name=sys.argv[1]))
    trainer = pl.Trainer(
        max_steps=6, logger=logger, log_every_n_steps=1, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False, accelerator="cpu",
    )
    trainer.fit(Regression(), data)
    print("done")
    """
)


def test_upstream_path_and_signature() -> None:
    from determined.lightning import experimental
    from determined.pytorch.lightning import CoreV2DetLogger, DetLogger

    assert experimental.DetLogger is CoreV2DetLogger
    assert issubclass(CoreV2DetLogger, DetLogger) and issubclass(CoreV2DetLogger, pl.loggers.Logger)
    parameters = inspect.signature(CoreV2DetLogger).parameters
    assert list(parameters) == ["defaults", "unmanaged", "config", "client"]  # upstream 0.38.1
    assert all(p.kind is p.KEYWORD_ONLY and p.default is None for p in parameters.values())


def test_importing_the_module_loads_no_framework() -> None:
    code = (
        "import sys, determined.lightning.experimental as e\n"
        "print('torch' in sys.modules, 'pytorch_lightning' in sys.modules, dir(e))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False False ['DetLogger']"


def test_trainer_reports_an_unmanaged_run(module_master: Any, tmp_path: pathlib.Path) -> None:
    pytest.importorskip("determined.experimental.core_v2")
    from determined.experimental import Determined

    name = f"lightning-logger-{uuid.uuid4().hex[:8]}"
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DET_")}
    env.update(
        {
            "DET_MASTER": str(module_master.url),
            "DET_CONFIG_DIR": str(tmp_path / "det-config"),
            "XDG_DATA_HOME": str(tmp_path / "data"),
        }
    )
    proc = subprocess.run(
        [sys.executable, str(script), name],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0 and "done" in proc.stdout, proc.stdout + proc.stderr

    sdk = Determined(str(module_master.url), "determined", "")
    (exp,) = sdk.list_experiments(name=name)
    (trial,) = exp.list_trials()
    training = list(trial.iter_metrics("training"))
    steps = [m.steps_completed for m in training]
    assert steps == sorted(steps) and len(steps) == 6, steps
    assert all("train_loss" in m.metrics for m in training)
