"""A distributed PyTorchTrial experiment whose entrypoint is upstream's
``python3 -m determined.launch.torch_distributed --trial model_def:Trial``: it completes on 2
slots with 2 processes, each running the trial class."""

from __future__ import annotations

import pathlib
import shutil
from typing import Any

import pytest

HERE = pathlib.Path(__file__).resolve().parent
pytestmark = [pytest.mark.e2e, pytest.mark.slow]

MODEL_DEF = """
import importlib.metadata

import onevar

from determined.core import _hooks
from determined.pytorch import _runner

# Until det-plugin-pytorch is reinstalled with its entry point, register the trial runner by hand.
if not any(ep.name == "pytorch" for ep in importlib.metadata.entry_points(group="determined")):
    _hooks.register(_runner, name="pytorch")


class Trial(onevar.OneVarTrial):
    def __init__(self, context):
        print(
            f"trial class on rank {context.distributed.rank} of {context.distributed.size}",
            flush=True,
        )
        super().__init__(context)
"""


def test_torch_distributed_trial_entrypoint_on_two_slots(api: Any, tmp_path: pathlib.Path) -> None:
    context = tmp_path / "context"
    context.mkdir()
    shutil.copy(HERE / "onevar.py", context)
    (context / "model_def.py").write_text(MODEL_DEF)
    config = {
        "name": "torch-distributed-trial",
        "entrypoint": "python3 -m determined.launch.torch_distributed --trial model_def:Trial",
        "hyperparameters": {
            "global_batch_size": 4,
            "lr": 0.02,
            "dataset_len": 40,
            "val_len": 10,
            "shuffle": False,
            "noise": 0,
            "no_train_reducer": True,
        },
        "searcher": {
            "name": "single",
            "metric": "val_loss",
            "smaller_is_better": True,
            "max_length": {"batches": 20},
        },
        "min_validation_period": {"batches": 10},
        "scheduling_unit": 5,
        "resources": {"slots_per_trial": 2},
        "max_restarts": 0,
    }
    experiment = api.create_experiment(config, context)
    state = api.wait_experiment(experiment, timeout=300)
    assert state == "STATE_COMPLETED", api.debug(experiment)
    (trial,) = api.trials(experiment)
    entries = api.log_entries(trial["id"])
    for rank in (0, 1):  # the master keeps wrap_rank's "[rank=N] " prefix as the entry's rankId
        assert any(
            e.get("rankId") == rank and f"trial class on rank {rank} of 2" in str(e.get("log"))
            for e in entries
        ), api.debug(experiment)
    assert trial["totalBatchesProcessed"] == 20
    validation = [api.values(r) for r in api.metrics(trial["id"], "validation")]
    assert [v["fn_count"] for v in validation] == [6, 6]  # 10 records over 2 ranks, both counted
