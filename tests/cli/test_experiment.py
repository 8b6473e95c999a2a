"""``det experiment``: create, follow, lifecycle, inspection and attributes against a real master
with Core API trials (in-process ``main([...])``)."""

from __future__ import annotations

import csv
import io
import json
import pathlib
from collections.abc import Callable
from typing import Any

import yaml
from cli.harness import Det, created_id, wait_for, wait_state

from determined.client import Session


def _create(det: Det, config: pathlib.Path, context: pathlib.Path, *extra: str) -> int:
    return created_id(det.ok("e", "create", str(config), str(context), *extra))


def test_create_follow_prints_trial_logs(
    det: Det, api: Session, write_config: Callable[..., pathlib.Path], context_dir: pathlib.Path
) -> None:
    out = det.ok("e", "create", str(write_config()), str(context_dir), "-f")
    exp_id = created_id(out)
    assert "Preparing files to send to master..." in out
    assert "Waiting for first trial to begin..." in out
    assert "step 4" in out and "trial done" in out
    # -f returns when the trial's log stream ends, i.e. once the trial is terminal
    assert wait_state(api, exp_id, timeout=10) == "STATE_COMPLETED"


def test_config_overrides_reach_the_master(
    det: Det, api: Session, write_config: Callable[..., pathlib.Path], context_dir: pathlib.Path
) -> None:
    exp_id = _create(
        det,
        write_config(),
        context_dir,
        "--config",
        "name=overridden",
        "--config",
        "hyperparameters.steps=2",
        "--paused",
    )
    shown = yaml.safe_load(det.ok("e", "config", str(exp_id)))
    assert shown["name"] == "overridden"
    assert shown["hyperparameters"]["steps"]["val"] == 2
    assert api.request("GET", f"/api/v1/experiments/{exp_id}")["experiment"]["state"] == (
        "STATE_PAUSED"
    )
    det.ok("e", "kill", str(exp_id))


def test_pause_activate_kill_wait(
    det: Det, api: Session, write_config: Callable[..., pathlib.Path], context_dir: pathlib.Path
) -> None:
    exp_id = _create(det, write_config(hyperparameters={"forever": True}), context_dir)
    trial_id = wait_for(lambda: det_trials(api, exp_id), "a trial")[0]["id"]
    wait_for(lambda: "step 2" in logs_text(api, trial_id), "the trial to train")
    assert det.ok("e", "pause", str(exp_id)).strip() == f"Paused experiment {exp_id}"
    wait_state(api, exp_id, "STATE_PAUSED")
    wait_for(lambda: "preempted" in logs_text(api, trial_id), "the trial to save and exit")
    assert det.ok("e", "activate", str(exp_id)).strip() == f"Activated experiment {exp_id}"
    wait_state(api, exp_id, "STATE_RUNNING")  # ACTIVE again, its trial relaunched
    assert det.ok("e", "kill", str(exp_id)).strip() == f"Killed experiment {exp_id}"
    code, out, _ = det.run("e", "wait", str(exp_id), "--polling-interval", "0.1")
    assert code == 1, out  # not COMPLETED
    assert "CANCELED" in out


def test_wait_completed_and_describe(
    det: Det, api: Session, write_config: Callable[..., pathlib.Path], context_dir: pathlib.Path
) -> None:
    exp_id = _create(det, write_config(hyperparameters={"steps": 3, "base": 2.0}), context_dir)
    code, out, _ = det.run("e", "wait", str(exp_id), "--polling-interval", "0.1")
    assert code == 0 and "COMPLETED" in out
    text = det.ok("e", "describe", str(exp_id))
    assert text.startswith("Experiment:")
    for section in ("Trials:", "Best Trial:", "Workloads:"):
        assert section in text
    trial_id = det_trials(api, exp_id)[0]["id"]
    best_line = next(line for line in text.splitlines() if "validation_loss" in line)
    assert str(trial_id) in best_line and "0.666667" in best_line
    with_metrics = det.ok("e", "describe", str(exp_id), "--metrics")
    assert "Training Metric: loss" in with_metrics
    assert "Validation Metric: validation_loss" in with_metrics
    data = json.loads(det.ok("e", "describe", str(exp_id), "--json"))
    assert data[0]["experiment"]["id"] == exp_id
    assert data[0]["experiment"]["state"] == "STATE_COMPLETED"
    csv_text = det.ok("e", "describe", str(exp_id), "--csv")
    # titles as upstream prints them, each followed by a CSV block
    lines = csv_text.splitlines()
    assert lines[0] == "Experiment:"
    assert next(csv.reader(io.StringIO(lines[1])))[:2] == ["Experiment ID", "State"]


def test_list_and_list_trials(
    det: Det, api: Session, write_config: Callable[..., pathlib.Path], context_dir: pathlib.Path
) -> None:
    exp_id = _create(det, write_config(name="listed"), context_dir)
    wait_state(api, exp_id)
    table = det.ok("e", "list")
    assert table.splitlines()[0].split("|")[0].strip() == "ID"
    assert any(line.split("|")[0].strip() == str(exp_id) for line in table.splitlines()[2:])
    rows = list(csv.DictReader(io.StringIO(det.ok("e", "list", "--csv"))))
    assert any(r["ID"] == str(exp_id) and r["Name"] == "listed" for r in rows)
    assert "Archived" in det.ok("experiment", "ls", "-a").splitlines()[0]
    assert det.ok("e") == det.ok("e", "list")  # list is the default sub-command
    trials = list(csv.DictReader(io.StringIO(det.ok("e", "lt", str(exp_id), "--csv"))))
    assert trials[0]["State"] == "COMPLETED"
    assert json.loads(trials[0]["H-Params"]) == {"steps": 4}
    assert exp_id in [e["id"] for e in json.loads(det.ok("e", "list", "--json"))]
    assert json.loads(det.ok("e", "lt", str(exp_id), "--json"))[0]["state"] == "STATE_COMPLETED"
    checkpoints = json.loads(det.ok("e", "lc", str(exp_id), "--json"))
    assert checkpoints and all(c["training"]["experimentId"] == exp_id for c in checkpoints)
    logs = det.ok("e", "logs", str(exp_id), "--head", "2")
    assert len(logs.splitlines()) == 2


def test_labels_and_attributes(
    det: Det, api: Session, write_config: Callable[..., pathlib.Path], context_dir: pathlib.Path
) -> None:
    exp_id = _create(det, write_config(), context_dir, "--paused")
    e = str(exp_id)
    det.ok("e", "label", "add", e, "red")
    det.ok("e", "label", "add", e, "blue")
    det.ok("e", "label", "remove", e, "red")
    det.ok("e", "set", "name", e, "renamed")
    det.ok("e", "set", "description", e, "a description")
    det.ok("e", "set", "priority", e, "7")
    det.ok("e", "set", "weight", e, "2.5")
    det.ok("e", "set", "max-slots", e, "3")
    out = det.ok(
        "e",
        "set",
        "gc-policy",
        e,
        "--save-experiment-best",
        "1",
        "--save-trial-best",
        "0",
        "--save-trial-latest",
        "2",
        "--yes",
    )
    assert "save_trial_latest" in out
    answer = api.request("GET", f"/api/v1/experiments/{exp_id}")
    experiment, config = answer["experiment"], answer["config"]
    assert experiment["labels"] == ["blue"]
    assert experiment["name"] == "renamed" and experiment["description"] == "a description"
    assert config["resources"]["priority"] == 7
    assert config["resources"]["weight"] == 2.5
    assert config["resources"]["max_slots"] == 3
    assert config["checkpoint_storage"]["save_trial_latest"] == 2
    described = det.ok("e", "describe", e)
    assert "blue" in described and "renamed" in described
    det.ok("e", "kill", e)


def test_archive_unarchive_delete(
    det: Det, api: Session, write_config: Callable[..., pathlib.Path], context_dir: pathlib.Path
) -> None:
    exp_id = _create(det, write_config(hyperparameters={"steps": 1}), context_dir)
    e = str(exp_id)
    code, _, err = det.run("e", "archive", e)
    if code != 0:  # still running: archiving needs a terminal experiment
        assert "terminal" in err
    wait_state(api, exp_id)
    assert det.ok("e", "archive", e).strip() == f"Archived experiment {exp_id}"
    assert api.request("GET", f"/api/v1/experiments/{exp_id}")["experiment"]["archived"] is True
    assert str(exp_id) not in [ln.split("|")[0].strip() for ln in det.ok("e", "ls").splitlines()]
    det.ok("e", "unarchive", e)
    # no --yes and no terminal answer: nothing is deleted
    code, out, _ = det.run("e", "delete", e, input_text="")
    assert code == 0 and "Aborting" in out
    assert det.ok("e", "delete", e, "--yes").strip().startswith("Deletion of experiment")
    code, _, err = det.run("e", "describe", e)
    assert code == 1 and "not found" in err


def test_continue_reruns_a_finished_trial(
    det: Det, api: Session, write_config: Callable[..., pathlib.Path], context_dir: pathlib.Path
) -> None:
    exp_id = _create(det, write_config(hyperparameters={"steps": 2}), context_dir)
    wait_state(api, exp_id)
    out = det.ok("e", "continue", str(exp_id), "--config", "hyperparameters.steps=5", "-f")
    assert out.startswith(f"Continued experiment {exp_id}")
    assert "step 5" in out
    assert wait_state(api, exp_id, timeout=10) == "STATE_COMPLETED"


def test_download_model_def(
    det: Det,
    write_config: Callable[..., pathlib.Path],
    context_dir: pathlib.Path,
    tmp_path: pathlib.Path,
) -> None:
    import tarfile

    exp_id = _create(det, write_config(), context_dir, "--paused")
    det.ok("e", "download-model-def", str(exp_id), "--output-dir", str(tmp_path))
    with tarfile.open(tmp_path / f"experiment_{exp_id}_model_def.tgz") as archive:
        assert any(name.endswith("train.py") for name in archive.getnames())
    det.ok("e", "kill", str(exp_id))


def test_context_limit_names_biggest_files_and_honours_detignore(
    det: Det,
    write_config: Callable[..., pathlib.Path],
    context_dir: pathlib.Path,
    monkeypatch: Any,
) -> None:
    from determined.client import _context_dir

    monkeypatch.setattr(_context_dir, "MAX_CONTEXT_SIZE", 8 * 1024)
    (context_dir / "data.bin").write_bytes(b"x" * 20_000)
    code, out, err = det.run("e", "create", str(write_config()), str(context_dir))
    assert code == 1 and "Created" not in out
    assert "over the 8.0KB limit" in err and "data.bin (19.5KB)" in err
    assert len(err.strip().splitlines()) == 1
    (context_dir / ".detignore").write_text("*.bin\n")
    exp_id = _create(det, write_config(), context_dir, "--paused")
    det.ok("e", "kill", str(exp_id))


def test_preview_search(det: Det, tmp_path: pathlib.Path) -> None:
    config = tmp_path / "search.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "entrypoint": "python3 train.py",
                "hyperparameters": {"lr": {"type": "double", "minval": 0.001, "maxval": 0.1}},
                "searcher": {
                    "name": "adaptive_asha",
                    "metric": "validation_loss",
                    "max_trials": 16,
                    "time_metric": "batches",
                    "max_time": 64,
                    "max_rungs": 3,
                },
            }
        )
    )
    out = det.ok("preview-search", str(config))
    assert out.startswith("Using search configuration:")
    assert "name: adaptive_asha" in out
    assert " Trials | Training Time" in out
    assert "train for 64 batches" in out
    single = tmp_path / "single.yaml"
    single.write_text(
        yaml.safe_dump({"entrypoint": "x", "searcher": {"name": "single", "metric": "m"}})
    )
    assert "train to completion" in det.ok("preview-search", str(single))


def det_trials(api: Session, exp_id: int) -> list[dict[str, Any]]:
    return list(api.request("GET", f"/api/v1/experiments/{exp_id}/trials")["trials"])


def logs_text(api: Session, trial_id: int) -> str:
    return "".join(str(e.get("message")) for e in api.stream(f"/api/v1/trials/{trial_id}/logs"))


def test_single_file_context_and_includes(
    det: Det,
    api: Session,
    write_config: Callable[..., pathlib.Path],
    context_dir: pathlib.Path,
    tmp_path: pathlib.Path,
) -> None:
    import tarfile

    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "helper.py").write_text("X = 1\n")
    exp_id = _create(det, write_config(), context_dir / "train.py", "-i", str(extra), "--paused")
    det.ok("e", "download-model-def", str(exp_id), "--output-dir", str(tmp_path))
    with tarfile.open(tmp_path / f"experiment_{exp_id}_model_def.tgz") as archive:
        names = {name.lstrip("./") for name in archive.getnames()}
    assert {"train.py", "extra/helper.py"} <= names
    det.ok("e", "kill", str(exp_id))
    code, _, err = det.run("e", "create", str(write_config()), "-i", "/nonexistent/inc")
    assert code == 1 and err.strip() == "include '/nonexistent/inc' does not exist"
