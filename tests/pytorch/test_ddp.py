"""Two-process DDP through ``python -m determined.launch.torch_distributed`` (gloo on CPU)."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import onevar
import pytest

HERE = pathlib.Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def ddp_results(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    out = tmp_path_factory.mktemp("ddp")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DET_")}
    env["PYTHONPATH"] = str(HERE)
    env["TMPDIR"] = str(out)
    result = subprocess.run(
        [
            sys.executable, "-m", "determined.launch.torch_distributed",
            "--nproc_per_node", "2", "--",
            sys.executable, str(HERE / "ddp_script.py"), str(out),
        ],
        env=env, cwd=out, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    return [json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1)]


def test_ddp_trains_like_one_process(ddp_results: list[dict]) -> None:
    rank0, rank1 = ddp_results
    straight = rank0["straight"]
    assert straight["ddp"] and straight["size"] == 2
    # every rank holds the same weights, which follow the one-process SGD math
    assert straight["weight"] == rank1["straight"]["weight"]
    expected = onevar.expected_weights(0.05, 12)
    assert [b["w_after"] for b in straight["batches"]] == pytest.approx(expected, abs=1e-6)
    assert [w["batches"] for w in straight["workloads"]] == [3, 6, 9, 12]


def test_ddp_shards_samples_and_reduces_metrics(ddp_results: list[dict]) -> None:
    straight = ddp_results[0]["straight"]
    # 20 shuffled records, global batches of 4 split 2 + 2: each epoch (5 batches) covers every
    # record once, so the mean index over both ranks and 5 batches sums to 0 + 1 + ... + 19
    per_epoch = [b["index_sum"] for b in straight["batches"][:5]]
    assert sum(per_epoch) * 2 == sum(range(20))
    # validation over 10 records: batches of 2 + 2, 2 + 2, 1 + 1 across the two ranks
    validation = straight["validations"][0]
    assert validation["fn_count"] == 6 and validation["fn_sum"] == 10
    assert validation["records"] == pytest.approx(1.8)  # sample-weighted mean of batch sizes
    assert ddp_results[1]["straight"]["validations"] == straight["validations"]


def test_ddp_stop_on_one_rank_and_exact_resume(ddp_results: list[dict]) -> None:
    for rank in ddp_results:
        stopped, resumed, straight = rank["stopped"], rank["resumed"], rank["straight"]
        # rank 1 asked after batch 4; both ranks stopped together at the next boundary (6)
        assert [w["batches"] for w in stopped["workloads"]] == [3, 6]
        assert stopped["batches"] + resumed["batches"] == straight["batches"]
        assert stopped["validations"] + resumed["validations"] == straight["validations"]
        assert resumed["weight"] == straight["weight"]
