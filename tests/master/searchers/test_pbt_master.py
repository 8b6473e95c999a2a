"""PBT on a real master: copies start from their parent's checkpoint, and a master SIGKILL mid-search
gives the same trials as an uninterrupted run.

Both searches run the same seeded experiment: the reference on an in-process master, the crashed
one on ``python -m determined.master up`` subprocesses sharing one data dir, killed while a copy
is training in the middle of its first round. The "training" is deterministic: the loss depends on
the hyperparameter and on a state carried in checkpoints (so a copy's results depend on which
checkpoint it started from).
"""

from __future__ import annotations

import pathlib
import re
from collections.abc import Callable
from typing import Any

import pytest
import requests
import yaml
from cli.harness import Det
from process_tree import alive
from webui._site import login_token

from determined.master.db import Experiment, Run, User, utcnow

TRAIN = '''
"""Each batch moves a state towards x; the loss is how far the state is from 0.3."""
import json
import os
import pathlib
import time

import determined as det


def hang_once(name):
    marker_dir = os.environ.get("HANG_DIR")
    if not marker_dir:
        return
    marker = pathlib.Path(marker_dir) / name
    if not marker.exists():
        marker.write_text(str(os.getpid()))
        time.sleep(600)


info = det.get_cluster_info()
trial_id, x = info.trial.trial_id, info.trial.hparams["x"]
with det.core.init() as core_context:
    batches, state, origin = 0, 1.0, None
    if info.latest_checkpoint:
        with core_context.checkpoint.restore_path(info.latest_checkpoint) as path:
            saved = json.loads((path / "state.json").read_text())
        state, origin = saved["state"], saved["trial_id"]
        if origin == trial_id:
            batches = saved["batches"]  # our own checkpoint: a restart
    print(f"trial {trial_id} starts at batch {batches} from trial {origin}", flush=True)
    for op in core_context.searcher.operations():
        while batches < op.length:
            batches += 1
            state = state + 0.5 * (x - state)
            meta = {"steps_completed": batches}
            with core_context.checkpoint.store_path(meta) as (path, _):
                (path / "state.json").write_text(
                    json.dumps({"state": state, "trial_id": trial_id, "batches": batches})
                )
            if trial_id == 5 and batches == 1:
                hang_once("copy-mid-round")
        loss = (state - 0.3) ** 2
        core_context.train.report_validation_metrics(
            steps_completed=batches, metrics={"loss": loss, "batches": batches}
        )
        op.report_completed(loss)
'''

CONFIG: dict[str, Any] = {
    "name": "pbt",
    "entrypoint": "python3 train.py",
    "hyperparameters": {"x": {"type": "double", "minval": 0.0, "maxval": 1.0}},
    "searcher": {
        "name": "pbt",
        "metric": "loss",
        "population_size": 4,
        "num_rounds": 3,
        "length_per_round": {"batches": 2},
        "replace_function": {"truncate_fraction": 0.25},
        "explore_function": {"resample_probability": 0.0, "perturb_factor": 0.5},
    },
    "reproducibility": {"experiment_seed": 424242},
    "max_restarts": 0,
}


def _outcome(api: Any, exp_id: int) -> list[dict[str, Any]]:
    """Each trial's identity, hyperparameters, state, parent and validations by length."""
    out = []
    for trial in api.trials(exp_id):
        row = {key: trial[key] for key in ("requestId", "seed", "hparams", "state")}
        warm = trial["warmStartCheckpointUuid"]
        if warm:
            ckpt = api.get(f"/api/v1/checkpoints/{warm}")["checkpoint"]
            row["parent"] = (ckpt["training"]["trialId"], ckpt["metadata"]["steps_completed"])
        row["validations"] = {
            r["totalBatches"]: api.values(r)["loss"] for r in api.metrics(trial["id"], "validation")
        }
        out.append(row)
    return out


def _same_search(got: list[dict[str, Any]], expected: list[dict[str, Any]]) -> None:
    """The same trials, hyperparameters, parents and results.

    A member keeps training while the rest of the population finishes a round, so a member that
    is then stopped may have reported a round more or less (never judged): the validations must
    agree where both runs have them, and anything only one run has comes after those.
    """
    assert len(got) == len(expected)
    for mine, theirs in zip(got, expected, strict=True):
        mine, theirs = dict(mine), dict(theirs)
        mine_v, theirs_v = mine.pop("validations"), theirs.pop("validations")
        assert mine == theirs
        common = set(mine_v) & set(theirs_v)
        assert common and all(mine_v[n] == theirs_v[n] for n in common), (mine_v, theirs_v)
        # what only one run has came after everything both have (reports never judged)
        assert all(n > max(common) for n in (set(mine_v) | set(theirs_v)) - common)


@pytest.mark.slow
def test_pbt_warm_starts_copies_and_survives_a_master_sigkill(
    make_master: Callable[..., Any], tmp_path: pathlib.Path
) -> None:
    context = tmp_path / "context"
    context.mkdir()
    (context / "train.py").write_text(TRAIN)
    hang_dir = tmp_path / "hang"
    hang_dir.mkdir()

    reference = make_master(slots=8).api()
    reference_id = reference.create_experiment(CONFIG, context)

    crashed_config = dict(CONFIG, environment={"environment_variables": [f"HANG_DIR={hang_dir}"]})
    master = make_master(process=True, slots=8)
    api = master.api()
    exp_id = api.create_experiment(crashed_config, context)
    marker = hang_dir / "copy-mid-round"
    api.wait_for(lambda: marker.exists() and marker.read_text(), 240, "the copy to hang")
    pid = int(marker.read_text())
    master.kill()
    master.restart()
    api = master.api()
    api.wait_for(lambda: not alive(pid), 30, f"the orphaned trial {pid} to be reaped")

    assert api.wait_experiment(exp_id, timeout=300) == "STATE_COMPLETED", api.debug(exp_id)
    assert reference.wait_experiment(reference_id, timeout=300) == "STATE_COMPLETED"
    expected = _outcome(reference, reference_id)
    assert len(expected) == 4 + 1 * 2  # population 4, one copy after each of rounds 1 and 2
    _same_search(_outcome(api, exp_id), expected)
    assert [row.get("parent", (0, 0))[1] for row in expected] == [0, 0, 0, 0, 2, 4]

    # every copy started from its parent's checkpoint at the end of the decided round (the
    # crashed run has the same parents; its copy's first log lines may have died with the master)
    trials = reference.trials(reference_id)
    by_id = {t["id"]: t for t in trials}
    copies = [t for t in trials if t["warmStartCheckpointUuid"]]
    assert len(copies) == 2
    for copy in copies:
        ckpt = reference.get(f"/api/v1/checkpoints/{copy['warmStartCheckpointUuid']}")
        parent_id = ckpt["checkpoint"]["training"]["trialId"]
        assert parent_id in by_id and parent_id < copy["id"]
        log = "".join(reference.logs(copy["id"]))
        assert f"trial {copy['id']} starts at batch 0 from trial {parent_id}" in log
        assert f"Trial {copy['id']} is warm-started from trial {parent_id}'s checkpoint" in log
        # the copy explored: x moved by the perturb factor from its parent's
        parent_x = by_id[parent_id]["hparams"]["x"]
        assert copy["hparams"]["x"] in (
            pytest.approx(min(parent_x * 1.5, 1.0)),
            pytest.approx(parent_x * 0.5),
        )
    _check_web_ui(reference.url, reference_id, copies)

    # the crash hit trial 5 (the first copy) mid-round; it resumed from its own checkpoint
    log5 = "".join(api.logs(5))
    starts = re.findall(r"trial 5 starts at batch (\d+) from trial (\d+)", log5)
    assert starts[-1][0] == "1" and starts[-1][1] == "5", log5


def _web(url: str) -> requests.Session:
    session = requests.Session()
    session.cookies.set("auth", login_token(url))
    return session


def _check_web_ui(url: str, exp_id: int, copies: list[dict[str, Any]]) -> None:
    """The experiment's hyperparameter views show each copy's parent (PBT's lineage)."""
    web = _web(url)
    page = web.get(f"{url}/experiments/{exp_id}", timeout=30)
    assert page.status_code == 200 and ">Parent</th>" in page.text
    view = web.get(f"{url}/ui/api/experiments/{exp_id}/hparams", timeout=30).json()
    parents = {t["id"]: t["parent"] for t in view["trials"]}
    assert len(parents) == 6 and list(parents.values())[:4] == [None] * 4
    for copy in copies:
        parent = parents[copy["id"]]
        assert parent is not None and parent < copy["id"]
        html = web.get(f"{url}/trials/{copy['id']}", timeout=30).text
        assert f'Warm-started from <a href="/trials/{parent}">trial {parent}</a>' in html
        assert f'<td class="num"><a href="/trials/{parent}">{parent}</a></td>' in page.text
        assert "population-based training copy" in html
    first = web.get(f"{url}/trials/1", timeout=30).text
    assert "Warm-started" not in first


def test_web_ui_renders_an_optuna_search(sqlite_master: Any) -> None:
    """A search from a plugin searcher (det-plugin-optuna's config) renders in every HP view."""
    config = {
        "name": "tpe",
        "searcher": {
            "name": "optuna",
            "sampler": "tpe",
            "metric": "loss",
            "smaller_is_better": True,
            "max_trials": 2,
            "time_metric": "batches",
            "max_time": 8,
            "pruner": {"type": "asha", "divisor": 2, "max_rungs": 2},
        },
        "hyperparameters": {"lr": {"type": "log", "minval": -4, "maxval": -1, "base": 10}},
    }
    with sqlite_master.db.write() as session:
        owner = session.query(User).filter(User.username == "admin").one()
        exp = Experiment(config=config, owner_id=owner.id, state="COMPLETED", labels=[])
        session.add(exp)
        session.flush()
        for i, lr in enumerate((1e-3, 3e-2)):
            session.add(
                Run(
                    experiment_id=exp.id,
                    request_id=f"r{i}",
                    task_id=f"{exp.id}.r{i}",
                    state="COMPLETED",
                    hparams={"lr": lr},
                    summary_metrics={},
                    last_activity=utcnow(),
                    run_id=1,
                    searcher_metric_value=0.5 - i * 0.1,
                )
            )
        session.flush()
        exp_id = exp.id
        trial_ids = [r.id for r in session.query(Run).filter(Run.experiment_id == exp_id)]
    url = str(sqlite_master.url)
    web = _web(url)
    page = web.get(f"{url}/experiments/{exp_id}", timeout=30)
    assert page.status_code == 200 and ">Parent</th>" not in page.text
    view = web.get(f"{url}/ui/api/experiments/{exp_id}/hparams", timeout=30).json()
    assert view["hparams"] == ["lr"] and view["metric"] == "loss"
    assert [t["parent"] for t in view["trials"]] == [None, None]
    for trial_id in trial_ids:
        page = web.get(f"{url}/trials/{trial_id}", timeout=30)
        assert page.status_code == 200 and "Warm-started" not in page.text


def test_det_preview_search_shows_pbt_and_optuna_bounds(
    sqlite_master: Any,
    tmp_path: pathlib.Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("DET_USER", "DET_PASS", "DET_USER_TOKEN", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DET_MASTER", str(sqlite_master.url))
    monkeypatch.setenv("DET_CONFIG_DIR", str(tmp_path / "det-config"))
    det = Det(str(sqlite_master.url), tmp_path / "det-config", capsys)
    pbt = tmp_path / "pbt.yaml"
    pbt.write_text(yaml.safe_dump(dict(CONFIG, entrypoint="python3 train.py")))
    out = det.ok("preview-search", str(pbt))
    assert "name: pbt" in out
    # 4 members up to 3 rounds of 2 batches, then one copy per later round
    rows = re.findall(r"^\s*(\d+) \| train for up to (\d+) batches", out, re.M)
    assert rows == [("4", "6"), ("1", "4"), ("1", "2")], out
    optuna = tmp_path / "optuna.yaml"
    searcher = {
        "name": "optuna",
        "sampler": "tpe",
        "metric": "loss",
        "max_trials": 64,
        "time_metric": "batches",
        "max_time": 100,
        "pruner": {"type": "asha", "divisor": 4, "max_rungs": 3},
    }
    optuna.write_text(
        yaml.safe_dump(dict(CONFIG, entrypoint="python3 train.py", searcher=searcher))
    )
    out = det.ok("preview-search", str(optuna))
    assert re.findall(r"^\s*(\d+) \| train for up to (\d+) batches", out, re.M) == [
        ("64", "100")
    ], out
