"""Issue 11, item 3: ``det.pytorch.load_trial_from_checkpoint_path(
client.get_checkpoint(uuid).download())`` gives back a trial with the trained weights."""

from __future__ import annotations

import pathlib

import pytest
from sdk.harness import TRIALS, WAIT_S, trial_logs

from determined.experimental import CheckpointSortBy, ExperimentState, OrderBy, client
from determined.master import Master

# A real PyTorch trial process: importing torch there (and here) takes most of the 10-35 s.
pytestmark = [pytest.mark.slow]


def test_download_and_load_a_pytorch_trial(
    master: Master, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    import determined as det

    client.login(master.url, "determined", "")
    exp = client.create_experiment(
        {
            "name": "torch-roundtrip",
            "entrypoint": "python3 torch_train.py",
            "searcher": {"name": "single", "metric": "val_loss", "max_length": 6},
            "hyperparameters": {"global_batch_size": 4},
            "checkpoint_storage": {"save_trial_latest": 5, "save_trial_best": 5},
            "max_restarts": 0,
        },
        TRIALS,
    )
    assert exp.wait(interval=0.1, timeout=WAIT_S) == ExperimentState.COMPLETED, trial_logs(exp)
    (trial,) = exp.list_trials()
    weights = {
        m.steps_completed: m.metrics["w"]
        for m in client.iter_trials_metrics([trial.id], "validation")
    }
    assert sorted(weights) == [2, 4, 6] and 0 < weights[2] < weights[4] < weights[6] < 1

    by_step = exp.list_checkpoints(CheckpointSortBy.BATCH_NUMBER, OrderBy.ASC)
    assert [c.metadata["steps_completed"] for c in by_step] == [2, 4, 6]
    monkeypatch.syspath_prepend(str(TRIALS))  # the trial class, if the checkpoint has no code/
    for ckpt in (by_step[0], exp.list_checkpoints(max_results=1)[0]):
        steps = ckpt.metadata["steps_completed"]
        path = client.get_checkpoint(ckpt.uuid).download(str(tmp_path / ckpt.uuid))
        loaded = det.pytorch.load_trial_from_checkpoint_path(path)
        assert type(loaded).__name__ == "OneVarTrial"
        with torch.no_grad():
            out = loaded.model(torch.ones(1, 1))
        assert out.item() == pytest.approx(weights[steps], rel=1e-5)
