"""examples/deepspeed: the blobs classifier off-cluster (in this process) and as const.yaml (one
slot) and distributed.yaml (two slots, ZeRO 3 through the hyperparameters) experiments."""

from __future__ import annotations

import importlib
import pathlib
import sys
from typing import Any

import pytest
import yaml
from e2e.harness import EXAMPLES, MasterAPI

from determined import pytorch
from determined.pytorch import deepspeed as det_ds

EXAMPLE = EXAMPLES / "deepspeed"


def test_example_trains_off_cluster(
    off_cluster: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(EXAMPLE)  # the DeepSpeed config is a file of the context directory
    monkeypatch.syspath_prepend(str(EXAMPLE))
    sys.modules.pop("model_def", None)
    model_def = importlib.import_module("model_def")
    train = importlib.import_module("train")
    try:
        with det_ds.init(
            hparams=train.LOCAL_HPARAMS,
            checkpoint_storage=str(off_cluster / "ckpt"),
            enable_tensorboard_logging=False,
        ) as context:
            trial = model_def.BlobsTrial(context)
            seen: list[dict[str, Any]] = []

            class Keep(pytorch.PyTorchCallback):
                def on_validation_end(self, metrics: dict[str, Any]) -> None:
                    seen.append(metrics)

            trial.build_callbacks = lambda: {"keep": Keep()}  # type: ignore[method-assign]
            det_ds.Trainer(trial, context).fit(
                max_length=pytorch.Batch(30), validation_period=pytorch.Batch(15)
            )
        assert context.get_global_batch_size() == 32
        assert context.get_num_micro_batches_per_slot() == 4  # 32 = 8 per micro batch x 4
        assert trial.engine.zero_optimization_stage() == 2
        assert seen[-1]["accuracy"] > 0.9
    finally:
        sys.modules.pop("model_def", None)
        sys.modules.pop("train", None)


def test_example_configs_parse() -> None:
    const = yaml.safe_load((EXAMPLE / "const.yaml").read_text())
    distributed = yaml.safe_load((EXAMPLE / "distributed.yaml").read_text())
    assert "resources" not in const or const["resources"].get("slots_per_trial", 1) == 1
    assert distributed["resources"]["slots_per_trial"] == 2
    assert distributed["entrypoint"].startswith("python3 -m determined.launch.deepspeed ")


@pytest.fixture
def api(make_master: Any) -> MasterAPI:
    """A master with 3 slots: the one-slot and the two-slot experiment run side by side."""
    return make_master(slots=3).api()  # type: ignore[no-any-return]


@pytest.mark.e2e
@pytest.mark.slow
def test_const_and_distributed_examples_on_a_master(api: MasterAPI) -> None:
    short = "--batches 20 --validate-every 10"
    const = api.create_experiment(
        EXAMPLE / "const.yaml", EXAMPLE, overrides={"entrypoint": f"python3 train.py {short}"}
    )
    distributed = api.create_experiment(
        EXAMPLE / "distributed.yaml",
        EXAMPLE,
        overrides={
            "entrypoint": f"python3 -m determined.launch.deepspeed python3 train.py {short}"
        },
    )
    for experiment in (const, distributed):
        state = api.wait_experiment(experiment, timeout=280)
        assert state == "STATE_COMPLETED", api.debug(experiment)
        (trial,) = api.trials(experiment)
        validation = [
            (int(r["totalBatches"]), api.values(r)) for r in api.metrics(trial["id"], "validation")
        ]
        assert [step for step, _ in validation] == [10, 20]
        assert validation[-1][1]["accuracy"] > 0.8
        checkpoints = api.get(f"/api/v1/trials/{trial['id']}/checkpoints")["checkpoints"]
        assert checkpoints
    (trial,) = api.trials(distributed)
    assert {0, 1} <= {entry.get("rankId") for entry in api.log_entries(trial["id"])}
    resources = api.get(f"/api/v1/trials/{trial['id']}/checkpoints")["checkpoints"][-1]
    files = set(resources.get("resources") or {})
    assert {"det_state_dict_rank0.pth", "det_state_dict_rank1.pth"} <= files
