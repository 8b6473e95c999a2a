"""``det trial``, ``det checkpoint`` and ``det model`` against one finished Core API experiment."""

from __future__ import annotations

import csv
import io
import json
import pathlib
from collections.abc import Callable
from typing import Any

import pytest
from cli.harness import Det, created_id, wait_state

from determined.client import Session


@pytest.fixture
def finished(
    det: Det, api: Session, write_config: Callable[..., pathlib.Path], context_dir: pathlib.Path
) -> dict[str, Any]:
    """A completed single-trial experiment with checkpoints at steps 2, 4 and 5."""
    config = write_config(
        hyperparameters={"steps": 5}, checkpoint_storage={"save_trial_latest": 10}
    )
    out = det.ok("e", "create", str(config), str(context_dir))
    exp_id = created_id(out)
    assert wait_state(api, exp_id) == "STATE_COMPLETED"
    trial = api.request("GET", f"/api/v1/experiments/{exp_id}/trials")["trials"][0]
    checkpoints = api.request("GET", f"/api/v1/trials/{trial['id']}/checkpoints")["checkpoints"]
    by_step = {int(c["metadata"]["steps_completed"]): c["uuid"] for c in checkpoints}
    return {"experiment": exp_id, "trial": int(trial["id"]), "checkpoints": by_step}


def test_trial_describe_and_logs(det: Det, finished: dict[str, Any]) -> None:
    trial = str(finished["trial"])
    text = det.ok("t", "describe", trial)
    assert "Workloads:" in text and str(finished["checkpoints"][5]) in text
    data = json.loads(det.ok("trial", "describe", trial, "--json"))
    assert data["trial"]["id"] == finished["trial"]
    kinds = [next(iter(w)) for w in data["workloads"]]
    assert kinds.count("training") == 5 and kinds.count("validation") == 1
    assert kinds.count("checkpoint") == 3
    summary = det.ok("t", "describe", trial, "--metrics", "--metrics-summary")
    assert "Workload Metrics" in summary and '"validation_loss"' in summary

    all_lines = det.ok("t", "logs", trial).splitlines()
    assert any("step 5" in line for line in all_lines)
    assert det.ok("t", "logs", trial, "--head", "2").splitlines() == all_lines[:2]
    assert det.ok("t", "logs", trial, "--tail", "2").splitlines() == all_lines[-2:]
    assert det.ok("t", "logs", trial, "--level", "WARNING").splitlines() == ["a warning line"]
    assert det.ok("t", "logs", trial, "--rank-id", "0").splitlines() == ["starting trial " + trial]
    entries = [json.loads(x) for x in _json_objects(det.ok("t", "logs", trial, "--json"))]
    assert entries and all("message" in e for e in entries)
    code, _, err = det.run("t", "logs", trial, "--head", "1", "--tail", "1")
    assert code == 2 and "not allowed with" in err


def test_list_checkpoints_best(det: Det, finished: dict[str, Any]) -> None:
    exp = str(finished["experiment"])
    rows = list(csv.DictReader(io.StringIO(det.ok("e", "lc", exp, "--csv"))))
    assert sorted(int(r["# of Batches"]) for r in rows) == [2, 4, 5]
    best = list(
        csv.DictReader(io.StringIO(det.ok("e", "list-checkpoints", exp, "--best", "1", "--csv")))
    )
    assert [r["UUID"] for r in best] == [finished["checkpoints"][5]]
    assert float(best[0]["Validation Metric"]) == pytest.approx(0.2)


def test_checkpoint_describe_download_delete(
    det: Det,
    api: Session,
    finished: dict[str, Any],
    tmp_path: pathlib.Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    uuid = finished["checkpoints"][5]
    text = det.ok("c", "describe", uuid)
    assert "Checkpoint UUID" in text and uuid in text
    assert json.loads(det.ok("c", "describe", uuid, "--json"))["uuid"] == uuid
    for mode in ("direct", "master", "auto"):
        target = tmp_path / mode
        out = det.ok("checkpoint", "download", uuid, "-o", str(target), "--mode", mode, "-q")
        assert out.strip() == str(target)
        assert (target / "step.txt").read_text() == "5"
        assert json.loads((target / "metadata.json").read_text())["steps_completed"] == 5
    monkeypatch.chdir(tmp_path)
    in_cwd = det.ok("c", "download", uuid)
    assert "Local checkpoint path:" in in_cwd
    assert (tmp_path / "checkpoints" / uuid / "step.txt").read_text() == "5"
    assert json.loads(det.ok("c", "describe", finished["checkpoints"][2], "--json"))["state"] == (
        "STATE_COMPLETED"
    )
    code, out, _ = det.run("c", "delete", finished["checkpoints"][2], input_text="n\n")
    assert code == 0 and "Stopping deletion" in out
    det.ok("c", "delete", finished["checkpoints"][2], "--yes")
    state = api.request("GET", f"/api/v1/checkpoints/{finished['checkpoints'][2]}")
    assert state["checkpoint"]["state"] == "STATE_DELETED"
    code, _, err = det.run("c", "download", finished["checkpoints"][2], "-o", str(tmp_path / "x"))
    assert code == 1 and "only COMPLETED or PARTIALLY_DELETED" in err


def test_trial_and_experiment_download(
    det: Det, finished: dict[str, Any], tmp_path: pathlib.Path
) -> None:
    trial = str(finished["trial"])
    latest = det.ok("t", "download", trial, "--latest", "-o", str(tmp_path / "latest"), "-q")
    assert (pathlib.Path(latest.strip()) / "step.txt").read_text() == "5"
    best = det.ok("t", "download", trial, "--best", "-o", str(tmp_path / "best"), "-q")
    assert (pathlib.Path(best.strip()) / "weights.bin").exists()
    uuid = finished["checkpoints"][4]
    by_uuid = det.ok("t", "download", trial, "--uuid", uuid, "-o", str(tmp_path / "u"), "-q")
    assert (pathlib.Path(by_uuid.strip()) / "step.txt").read_text() == "4"
    code, _, err = det.run("t", "download", trial, "--sort-by", "loss", "--latest")
    assert code == 1 and "--sort-by" in err
    out = det.ok("e", "download", str(finished["experiment"]), "-o", str(tmp_path / "e"), "-q")
    assert pathlib.Path(out.strip()).name == finished["checkpoints"][5]


def test_model_registry(det: Det, finished: dict[str, Any]) -> None:
    uuid = finished["checkpoints"][5]
    name = f"model-{finished['experiment']}"
    created = json.loads(det.ok("m", "create", name, "--description", "tiny", "--json"))
    assert created["name"] == name and created["description"] == "tiny"
    registered = det.ok("model", "register-version", name, uuid)
    assert "Version #" in registered and uuid in registered
    listed = json.loads(det.ok("m", "list", "--json"))
    assert name in [m["name"] for m in listed]
    assert name in det.ok("m", "ls")
    described = det.ok("m", "describe", name)
    assert uuid in described and "tiny" in described
    versions = json.loads(det.ok("m", "list-versions", name, "--json"))
    assert [v["checkpoint"]["uuid"] for v in versions["modelVersions"]] == [uuid]
    code, _, err = det.run("m", "describe", name, "--version", "7")
    assert code == 1 and "no version 7" in err
    det.ok("m", "delete", name)
    code, _, err = det.run("m", "describe", name)
    assert code == 1 and "not found" in err


def _json_objects(text: str) -> list[str]:
    """Split concatenated pretty-printed JSON objects."""
    out, depth, current = [], 0, []
    for line in text.splitlines():
        current.append(line)
        depth += line.count("{") - line.count("}")
        if depth == 0 and current:
            out.append("\n".join(current))
            current = []
    return out


def test_gc_policy_collects_a_finished_experiment(
    det: Det, api: Session, finished: dict[str, Any]
) -> None:
    from cli.harness import wait_for

    def states() -> dict[int, str]:
        return {
            step: api.request("GET", f"/api/v1/checkpoints/{uuid}")["checkpoint"]["state"]
            for step, uuid in finished["checkpoints"].items()
        }

    assert set(states().values()) == {"STATE_COMPLETED"}
    exp = str(finished["experiment"])
    det.ok(
        "e", "set", "gc-policy", exp, "--save-experiment-best", "0", "--save-trial-best", "0",
        "--save-trial-latest", "1", "--yes",
    )  # fmt: skip
    expected = {2: "STATE_DELETED", 4: "STATE_DELETED", 5: "STATE_COMPLETED"}
    wait_for(lambda: states() == expected, "GC under the new policy")


def test_checkpoint_rm_files(det: Det, api: Session, finished: dict[str, Any]) -> None:
    uuid = finished["checkpoints"][5]
    before = api.request("GET", f"/api/v1/checkpoints/{uuid}")["checkpoint"]["resources"]
    assert "weights.bin" in before
    out = det.ok("c", "rm", uuid, "--glob", "weights.bin", "--yes")
    assert out.strip() == f"Removal of files from checkpoints {uuid} is in progress."
    from cli.harness import wait_for

    def removed() -> dict[str, Any] | None:  # a GC task removes them, after the command returns
        checkpoint = api.request("GET", f"/api/v1/checkpoints/{uuid}")["checkpoint"]
        return checkpoint if "weights.bin" not in checkpoint["resources"] else None

    after = wait_for(removed, "the GC task removing weights.bin")
    assert "step.txt" in after["resources"]
    assert after["state"] == "STATE_PARTIALLY_DELETED"
    assert "refreshing resources" in det.ok("c", "rm", uuid)
