"""The searcher's event log: a master SIGKILLed mid-search resumes the exact same search.

The search is an adaptive ASHA search of a few hundred "instant" trials: the experiment is never
activated, so no trial process is launched; the test plays every trial over the searcher-operations
routes (``GET .../searcher/operation``, ``POST .../searcher/completed_operation``), one trial at a
time, always the lowest-id live trial, so the calls the searcher hears depend on nothing but its own
answers. ASHA stops every trial at its last rung at the latest, and a stopped trial that never ran
ends at once (the searcher hears it exit), so the search completes.

The crashed run's master is a subprocess that compacts its log every 100 calls; it is killed twice
once the log was compacted and more calls were logged after the snapshot (so a restart loads the
snapshot and replays the rows after it). The reference run is uninterrupted, on an in-process master.
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
import threading
from typing import Any

import pytest
from e2e.harness import MasterAPI

from determined.master._core._searcher_state import COMPACT_ENV, SearcherStates
from determined.master.db import Experiment

TRIALS = 200

CONFIG: dict[str, Any] = {
    "name": "asha-persistence",
    "entrypoint": "python3 -c pass",
    "hyperparameters": {"lr": {"type": "log", "minval": -5, "maxval": -1, "base": 10}},
    "searcher": {
        "name": "adaptive_asha",
        "metric": "loss",
        "time_metric": "batches",
        "max_time": 64,
        "max_trials": TRIALS,
        "mode": "standard",
        "divisor": 4,
        "max_rungs": 4,
        "max_concurrent_trials": 8,
    },
    "reproducibility": {"experiment_seed": 777},
    "max_restarts": 0,
}

TERMINAL = {"STATE_COMPLETED", "STATE_CANCELED", "STATE_ERROR"}


def _loss(lr: float, batches: int) -> float:
    return (math.log10(lr) + 3.0) ** 2 + 10.0 / batches


def _trials(api: MasterAPI, exp_id: int) -> list[dict[str, Any]]:
    rows = api.get(f"/api/v1/experiments/{exp_id}/trials", limit=10 * TRIALS)["trials"]
    return sorted(rows, key=lambda t: t["id"])


class _Player:
    """Plays the lowest-id live trial of the search until the searcher needs nothing more of it.

    Trials are listed again only when every trial of the last listing was played: a trial created
    since has a higher id than all of them, so the next trial is always the lowest-id live one,
    whatever was listed when (a restarted master just forces a new listing).
    """

    def __init__(self, api: MasterAPI, exp_id: int) -> None:
        self.api = api
        self.exp_id = exp_id
        self.queue: list[dict[str, Any]] = []

    def relist(self) -> None:
        self.queue = [t for t in _trials(self.api, self.exp_id) if t["state"] not in TERMINAL]

    def play_one(self) -> bool:
        """Play one trial; False once the search has no live trial."""
        if not self.queue:
            self.relist()
            if not self.queue:
                return False
        trial = self.queue.pop(0)
        api = self.api
        lr = float(trial["hparams"]["lr"])
        while True:
            answer = api.get(f"/api/v1/trials/{trial['id']}/searcher/operation")
            if answer["completed"]:
                break
            length = int(answer["op"]["validateAfter"]["length"])
            api.post(
                f"/api/v1/trials/{trial['id']}/searcher/completed_operation",
                {"op": {"length": length}, "searcherMetric": _loss(lr, length)},
            )
        return True


def _outcome(api: MasterAPI, exp_id: int) -> list[tuple[Any, ...]]:
    return [
        (t["requestId"], t["seed"], t["hparams"], t["state"], t["searcherMetricValue"])
        for t in _trials(api, exp_id)
    ]


def _log_state(db_path: str, exp_id: int) -> tuple[int, int]:
    """(the last event row the snapshot includes, event rows after it) in the crashed master's DB."""
    with sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=30) as conn:
        row = conn.execute(
            "SELECT content FROM experiment_snapshots WHERE experiment_id = ?", (exp_id,)
        ).fetchone()
        through = int(json.loads(row[0]).get("events_through") or 0) if row else 0
        (after,) = conn.execute(
            "SELECT count(*) FROM searcher_events WHERE experiment_id = ? AND seq > ?",
            (exp_id, through),
        ).fetchone()
    return through, int(after)


@pytest.mark.slow
def test_sigkill_mid_search_resumes_the_same_search(make_master: Any, tmp_path: Any) -> None:
    context = tmp_path / "context"
    context.mkdir()
    (context / "README").write_text("instant trials: nothing runs\n")

    reference = make_master().api()
    reference_id = reference.create_experiment(CONFIG, context, activate=False)
    played_ref: list[int] = []

    def play_reference() -> None:
        player = _Player(reference, reference_id)
        while player.play_one():
            played_ref.append(1)

    ref_thread = threading.Thread(target=play_reference)
    ref_thread.start()

    master = make_master(process=True, env={**os.environ, COMPACT_ENV: "100"})
    api = master.api()
    exp_id = api.create_experiment(CONFIG, context, activate=False)
    db_path = str(master.data_dir / "det.sqlite")
    played = 0
    kills: list[tuple[int, int, int]] = []
    player = _Player(api, exp_id)
    while player.play_one():
        played += 1
        if len(kills) < 2 and played >= 40 * (len(kills) + 1):
            through, after = _log_state(db_path, exp_id)
            if through > 0 and after > 0:
                kills.append((played, through, after))
                master.kill()
                master.restart()
                api = MasterAPI(master.url)
                player = _Player(api, exp_id)
    ref_thread.join(timeout=600)

    assert len(kills) == 2, f"the log was never compacted and extended before a kill: {kills}"
    assert api.wait_experiment(exp_id, timeout=60) == "STATE_COMPLETED", api.debug(exp_id)
    assert reference.wait_experiment(reference_id, timeout=60) == "STATE_COMPLETED"
    expected = _outcome(reference, reference_id)
    assert len(expected) == TRIALS
    assert _outcome(api, exp_id) == expected
    assert played == len(played_ref) == TRIALS


def _drive(player: _Player, trials: int) -> None:
    for _ in range(trials):
        assert player.play_one()


def test_restored_state_is_the_live_state(db_url: str, make_master: Any, tmp_path: Any) -> None:
    """After every few trials, a searcher rebuilt from the database (snapshot + replayed log) has
    exactly the live searcher's state, on SQLite and on PostgreSQL, with and without compactions."""
    context = tmp_path / "context"
    context.mkdir()
    (context / "README").write_text("instant trials\n")
    master = make_master(db_url)
    master.manager.searcher_states._compact_every = 7  # compact often: both paths are exercised
    api = master.api()
    config = dict(CONFIG, searcher=dict(CONFIG["searcher"], max_trials=30))
    exp_id = api.create_experiment(config, context, activate=False)
    states = master.manager.searcher_states
    compactions = states.compactions
    player = _Player(api, exp_id)
    for _ in range(4):
        _drive(player, 3)
        with master.db.read() as session:
            exp = session.get(Experiment, exp_id)
        live = json.loads(json.dumps(states.searchers[exp_id].state_dict()))
        rebuilt = SearcherStates(master.db).of(exp)
        assert json.loads(json.dumps(rebuilt.state_dict())) == live
    assert states.compactions > compactions


def test_a_plugin_method_without_replay_is_snapshotted(make_master: Any, tmp_path: Any) -> None:
    """A search method that does not declare ``supports_replay`` (det-plugin-optuna's) gets the
    whole snapshot after every batch and no event log."""
    pytest.importorskip("determined.optuna")
    context = tmp_path / "context"
    context.mkdir()
    (context / "README").write_text("instant trials\n")
    master = make_master()
    api = master.api()
    config = dict(
        CONFIG,
        searcher={
            "name": "optuna",
            "sampler": "random",
            "metric": "loss",
            "time_metric": "batches",
            "max_time": 8,
            "max_trials": 2,
        },
    )
    exp_id = api.create_experiment(config, context, activate=False)
    from sqlalchemy import func, select

    from determined.master.db import ExperimentSnapshot
    from determined.master.db._searcher_models import SearcherEvent

    with master.db.read() as session:
        snap = session.get(ExperimentSnapshot, exp_id)
        events = session.scalar(
            select(func.count())
            .select_from(SearcherEvent)
            .where(SearcherEvent.experiment_id == exp_id)
        )
    assert snap is not None and snap.content["searcher_state"]
    assert events == 0


def _small_search(master: Any, tmp_path: Any) -> tuple[MasterAPI, int, dict[str, Any]]:
    """A paused search of 4 instant trials: its API client, id and first trial."""
    context = tmp_path / "context"
    context.mkdir()
    (context / "README").write_text("instant trials\n")
    api = master.api()
    config = dict(CONFIG, searcher=dict(CONFIG["searcher"], max_trials=4))
    exp_id = api.create_experiment(config, context, activate=False)
    return api, exp_id, _trials(api, exp_id)[0]


def test_a_rolled_back_transaction_reloads_the_searcher(sqlite_master: Any, tmp_path: Any) -> None:
    """A transaction that fed the searcher and then failed leaves nothing behind: the next use
    rebuilds the searcher from the database instead of keeping the calls that were rolled back."""
    api, exp_id, trial = _small_search(sqlite_master, tmp_path)
    length = api.get(f"/api/v1/trials/{trial['id']}/searcher/operation")["op"]["validateAfter"]
    manager = sqlite_master.manager
    states = manager.searcher_states
    before = json.loads(json.dumps(states.searchers[exp_id].state_dict()))
    with pytest.raises(RuntimeError, match="boom"), manager.transactions.txn() as session:
        exp = session.get(Experiment, exp_id)
        rid = trial["requestId"]
        manager.lifecycle.searcher_event(
            session, exp, lambda s: s.operation_completed(rid, int(length["length"]), 0.5)
        )
        assert states.searchers[exp_id].validated_time  # the live searcher heard it
        raise RuntimeError("boom")
    with sqlite_master.db.read() as session:
        exp = session.get(Experiment, exp_id)
    assert json.loads(json.dumps(states.of(exp).state_dict())) == before


def test_a_trials_first_question_is_stored_by_its_own_transaction(
    sqlite_master: Any, tmp_path: Any
) -> None:
    """A trial's first ``searcher/operation`` marks it as one on the operations protocol, and that
    mark is in the database once the answer is out (a master killed right after restores it),
    though nothing else the search does has been stored since."""
    api, exp_id, trial = _small_search(sqlite_master, tmp_path)
    states = sqlite_master.manager.searcher_states
    assert trial["requestId"] not in states.searchers[exp_id].op_lengths
    answer = api.get(f"/api/v1/trials/{trial['id']}/searcher/operation")
    assert not answer["completed"]
    assert trial["requestId"] in states.searchers[exp_id].op_lengths
    with sqlite_master.db.read() as session:
        exp = session.get(Experiment, exp_id)
    rebuilt = SearcherStates(sqlite_master.db).of(exp)
    assert rebuilt.op_lengths == states.searchers[exp_id].op_lengths
    assert json.loads(json.dumps(rebuilt.state_dict())) == json.loads(
        json.dumps(states.searchers[exp_id].state_dict())
    )


def test_one_transaction_writes_its_searcher_calls_as_one_row(
    sqlite_master: Any, tmp_path: Any
) -> None:
    """Several trials' calls of one searcher in one transaction (exits handled together) are one
    event row, written at the commit, and the searcher restores from it exactly."""
    from sqlalchemy import func, select

    from determined.master.db._searcher_models import SearcherEvent

    api, exp_id, _ = _small_search(sqlite_master, tmp_path)
    trials = _trials(api, exp_id)[:2]
    lengths = {
        t["requestId"]: int(
            api.get(f"/api/v1/trials/{t['id']}/searcher/operation")["op"]["validateAfter"]["length"]
        )
        for t in trials
    }
    manager = sqlite_master.manager

    def rows() -> int:
        with sqlite_master.db.read() as session:
            count = select(func.count()).select_from(SearcherEvent)
            return int(session.scalar(count.where(SearcherEvent.experiment_id == exp_id)) or 0)

    before = rows()
    with manager.transactions.txn() as session:
        exp = session.get(Experiment, exp_id)
        for rid, length in lengths.items():
            manager.lifecycle.searcher_event(
                session,
                exp,
                lambda s, rid=rid, length=length: s.operation_completed(rid, length, 0.5),
            )
        assert rows() == before  # nothing written before the commit
    assert rows() == before + 1
    states = manager.searcher_states
    with sqlite_master.db.read() as session:
        exp = session.get(Experiment, exp_id)
    rebuilt = SearcherStates(sqlite_master.db).of(exp)
    assert json.loads(json.dumps(rebuilt.state_dict())) == json.loads(
        json.dumps(states.searchers[exp_id].state_dict())
    )
    assert set(lengths) <= set(rebuilt.validated_time)
