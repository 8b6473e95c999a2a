"""``det.pytorch.experimental.torch_batch_process``: off-cluster in one process and under the
torch_distributed launcher, and as a 2-slot experiment on a real master that is killed midway and
restarted by the master from its latest checkpoint, or paused and activated (the output holds every
item exactly once)."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
from typing import Any

import pytest
import torch

from determined.pytorch import experimental

HERE = pathlib.Path(__file__).resolve().parent
JOB = HERE / "batch_job"
PY = sys.executable


class Numbers(torch.utils.data.Dataset):  # type: ignore[type-arg]
    def __init__(self, count: int) -> None:
        self.count = count

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, index: int) -> int:
        return index


def job_env(tmp_path: pathlib.Path) -> dict[str, str]:
    """An off-cluster environment whose default checkpoint storage is under tmp_path."""
    drop = ("DET_CLUSTER_INFO", "RANK", "WORLD_SIZE", "LOCAL_RANK", "USE_TORCH_DISTRIBUTED")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    return env | {"XDG_DATA_HOME": str(tmp_path / "data"), "OMP_NUM_THREADS": "1"}


def read_items(out: pathlib.Path) -> list[int]:
    return sorted(i for path in out.glob("items-rank*.json") for i in json.loads(path.read_text()))


def read_calls(out: pathlib.Path, rank: int) -> list[tuple[int, int, list[int]]]:
    """``(pid, batch_idx, item ids)`` of every ``process_batch`` call of ``rank``, in order."""
    path = out / f"calls-rank{rank}.txt"
    calls = []
    for line in path.read_text().splitlines():
        pid, batch_idx, ids = line.split(" ", 2)
        calls.append((int(pid), int(batch_idx), json.loads(ids)))
    return calls


def local_checkpoints(storage: pathlib.Path) -> list[dict[str, Any]]:
    metadata = [json.loads(p.read_text()) for p in storage.glob("*/metadata.json")]
    return sorted(metadata, key=lambda m: m["steps_completed"])


# -- in process, off-cluster -----------------------------------------------------------------


class Collect(experimental.TorchBatchProcessor):
    seen: list[tuple[int, list[int]]] = []
    events: list[str] = []

    def __init__(self, context: experimental.TorchBatchProcessorContext) -> None:
        self.context = context
        assert context.device == torch.device("cpu") or torch.cuda.is_available()
        assert context.get_distributed_rank() == 0 and context.get_distributed_size() == 1
        self.total = context.wrap_reducer(sum, name="total")

    def process_batch(self, batch: Any, batch_idx: int) -> None:
        ids = [int(i) for i in batch]
        type(self).seen.append((batch_idx, ids))
        self.total.update(sum(ids))

    def on_checkpoint_start(self) -> None:
        type(self).events.append(f"checkpoint after {len(type(self).seen)}")
        with self.context.upload_path() as path:
            (path / f"upto-{len(type(self).seen)}.json").write_text(json.dumps(type(self).seen))

    def on_finish(self) -> None:
        type(self).events.append("finish")


@pytest.fixture
def collect(off_cluster: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> pathlib.Path:
    """Collect's records reset; checkpoints under ``<tmp>/data/determined``."""
    monkeypatch.setenv("XDG_DATA_HOME", str(off_cluster / "data"))
    Collect.seen, Collect.events = [], []
    return off_cluster / "data" / "determined"


def test_off_cluster_processes_every_item_once_and_checkpoints(collect: pathlib.Path) -> None:
    experimental.torch_batch_process(Collect, Numbers(10), batch_size=3, checkpoint_interval=2)
    assert Collect.seen == [(0, [0, 1, 2]), (1, [3, 4, 5]), (2, [6, 7, 8]), (3, [9])]
    assert Collect.events == ["checkpoint after 2", "checkpoint after 4", "finish"]
    checkpoints = local_checkpoints(collect)
    assert [c["steps_completed"] for c in checkpoints] == [2, 4]
    (output_id,) = {c["default_output_uuid"] for c in checkpoints}
    uploaded = sorted(p.name for p in (collect / output_id / "rank_0").iterdir())
    assert uploaded == ["upto-2.json", "upto-4.json"]


def test_off_cluster_max_batches_and_final_checkpoint(collect: pathlib.Path) -> None:
    experimental.torch_batch_process(
        Collect,
        Numbers(10),
        max_batches=3,
        checkpoint_interval=2,
        dataloader_kwargs={"batch_size": 2},
    )
    assert [ids for _, ids in Collect.seen] == [[0, 1], [2, 3], [4, 5]]
    assert Collect.events == ["checkpoint after 2", "checkpoint after 3", "finish"]
    with pytest.warns(UserWarning, match="max_batches=50"):
        experimental.torch_batch_process(Collect, Numbers(2), max_batches=50)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"checkpoint_interval": 0}, "checkpoint_interval"),
        ({"dataloader_kwargs": {"shuffle": True}}, "shuffle"),
        ({"dataloader_kwargs": {"sampler": [0, 1]}}, "sampler"),
        ({"dataloader_kwargs": {"batch_sampler": [[0, 1]]}}, "batch_sampler"),
        ({"batch_size": 2, "dataloader_kwargs": {"batch_size": 2}}, "batch_size"),
        ({"batch_size": 0}, "batch_size"),
    ],
)
def test_bad_arguments_are_clear_errors(
    collect: pathlib.Path, kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        experimental.torch_batch_process(Collect, Numbers(4), **kwargs)
    assert Collect.seen == []


def test_a_dataset_without_len_is_refused(collect: pathlib.Path) -> None:
    class Stream(torch.utils.data.IterableDataset):  # type: ignore[type-arg]
        def __iter__(self):  # type: ignore[no-untyped-def]
            return iter(range(3))

    with pytest.raises(TypeError, match="__len__"):
        experimental.torch_batch_process(Collect, Stream())  # type: ignore[arg-type]


def test_exports_match_upstream() -> None:
    assert sorted(experimental.__all__) == [
        "TorchBatchProcessor",
        "TorchBatchProcessorContext",
        "get_default_device",
        "torch_batch_process",
    ]
    import determined as det

    assert det.pytorch.experimental.torch_batch_process is experimental.torch_batch_process


# -- subprocesses, off-cluster ---------------------------------------------------------------


@pytest.mark.slow
def test_off_cluster_script_and_two_ranks_under_the_launcher(tmp_path: pathlib.Path) -> None:
    env = job_env(tmp_path)
    for name, launcher in (
        ("single", []),
        ("two", [PY, "-m", "determined.launch.torch_distributed", "--nproc_per_node", "2", "--"]),
    ):
        out = tmp_path / name
        out.mkdir()
        cmd = [*launcher, PY, str(JOB / "batch_job.py"), str(out), "21", "2", "3"]
        result = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=180)
        assert result.returncode == 0, result.stderr[-3000:]
        assert read_items(out) == list(range(21))  # each item exactly once
    # 21 items, batches of 2 on each of 2 ranks: 6 batches per rank, rank 1's last one empty
    assert [b for _, b, _ in read_calls(tmp_path / "two", 0)] == [0, 1, 2, 3, 4, 5]
    assert [b for _, b, _ in read_calls(tmp_path / "two", 1)] == [0, 1, 2, 3, 4]
    assert read_calls(tmp_path / "two", 1)[0][2] == [1, 3]  # rank 1's share of global batch 0
    assert (tmp_path / "two" / "finished-rank1").exists()


# -- on a master -------------------------------------------------------------------------------


def _batch_config(out: pathlib.Path, hold_at: int) -> dict[str, Any]:
    return {
        "name": "batch-inference",
        "entrypoint": (
            "python3 -m determined.launch.torch_distributed "
            f"python3 batch_job.py {out} 21 2 3 {hold_at}"
        ),
        "resources": {"slots_per_trial": 2},
        "searcher": {"name": "single", "metric": "items", "smaller_is_better": False},
        "max_restarts": 1,
    }


@pytest.mark.e2e
@pytest.mark.slow
def test_two_ranks_killed_midway_and_restarted_skip_what_was_done(
    api: Any, tmp_path: pathlib.Path
) -> None:
    context = tmp_path / "context"
    context.mkdir()
    shutil.copy(JOB / "batch_job.py", context)
    out = tmp_path / "out"
    out.mkdir()
    experiment = api.create_experiment(_batch_config(out, hold_at=4), context)
    trial_id = api.wait_for(lambda: (api.trials(experiment) or [{}])[0].get("id"), what="a trial")

    # Both ranks hold at batch 4, after the checkpoint of batches 0-2 and with batch 3 done
    # but not yet checkpointed: kill both processes there.
    def holding() -> bool:
        ranks = {
            entry.get("rankId")
            for entry in api.log_entries(trial_id)
            if "holding at batch 4" in str(entry.get("log") or "")
        }
        return ranks >= {0, 1}

    try:
        api.wait_for(holding, 240, "both ranks holding at batch 4")
    except TimeoutError:
        pytest.fail(api.debug(experiment))
    logs = api.logs(trial_id)
    assert any("reported a checkpoint of 3 batches" in line for line in logs), logs[-30:]
    first_pids = {int((out / f"pid-rank{r}").read_text()) for r in (0, 1)}
    for pid in first_pids:
        os.kill(pid, signal.SIGKILL)
    (out / "release").touch()  # the restarted run does not hold

    state = api.wait_experiment(experiment, timeout=150)
    assert state == "STATE_COMPLETED", api.debug(experiment)
    (trial,) = api.trials(experiment)
    assert trial.get("restarts") == 1, api.debug(experiment)
    assert any("resuming after 3 batches" in line for line in api.logs(trial_id))

    # every item exactly once in the output, though batch 3 was processed by both runs
    assert read_items(out) == list(range(21))
    for rank in (0, 1):
        calls = read_calls(out, rank)
        first = [b for pid, b, _ in calls if pid in first_pids]
        second = [b for pid, b, _ in calls if pid not in first_pids]
        assert first == [0, 1, 2, 3, 4]
        assert second == ([3, 4, 5] if rank == 0 else [3, 4])  # skipped 0-2
    assert {int((out / f"finished-rank{r}").read_text()) for r in (0, 1)}.isdisjoint(first_pids)

    checkpoints = api.get(f"/api/v1/trials/{trial_id}/checkpoints")["checkpoints"]
    steps = sorted(c["metadata"]["steps_completed"] for c in checkpoints)
    assert steps[-1] == 6 and set(steps) <= {3, 6}  # 3 may be garbage-collected already
    assert len({c["metadata"]["default_output_uuid"] for c in checkpoints}) == 1
    # the reducer counted the 21 - 3 * 2 * 2 = 9 items of the restarted run, on both ranks
    (report,) = api.metrics(trial_id, "validation")
    assert api.values(report)["items"] == 9


@pytest.mark.e2e
@pytest.mark.slow
def test_paused_after_a_checkpoint_and_activated_continues_there(
    api: Any, tmp_path: pathlib.Path
) -> None:
    context = tmp_path / "context"
    context.mkdir()
    shutil.copy(JOB / "batch_job.py", context)
    out = tmp_path / "out"
    out.mkdir()
    config = _batch_config(out, hold_at=4)
    config["entrypoint"] = config["entrypoint"].replace(" 21 2 3 ", " 41 2 3 ")  # 11 batches/rank
    config["max_restarts"] = 0
    experiment = api.create_experiment(config, context)
    trial_id = api.wait_for(lambda: (api.trials(experiment) or [{}])[0].get("id"), what="a trial")
    try:
        api.wait_for(
            lambda: any("holding at batch 4" in line for line in api.logs(trial_id)), 240, "a hold"
        )
    except TimeoutError as timeout:
        raise AssertionError(f"{timeout}\n{api.debug(experiment)}") from None
    api.post(f"/api/v1/experiments/{experiment}/pause")
    api.wait_experiment(experiment, {"STATE_PAUSED"}, timeout=120)
    (out / "release").touch()
    api.wait_exited(trial_id)  # preempted right after its next checkpoint
    stopped = [line for line in api.logs(trial_id) if "preempted after" in line]
    assert stopped, api.debug(experiment)
    stopped_at = int(stopped[0].split("preempted after ")[1].split()[0])
    assert stopped_at in (6, 9)
    api.post(f"/api/v1/experiments/{experiment}/activate")
    state = api.wait_experiment(experiment, timeout=150)
    assert state == "STATE_COMPLETED", api.debug(experiment)

    assert read_items(out) == list(range(41))
    first_pid = int(read_calls(out, 0)[0][0])
    second = [b for pid, b, _ in read_calls(out, 0) if pid != first_pid]
    assert second == list(range(stopped_at, 11))  # continued after the pause checkpoint
