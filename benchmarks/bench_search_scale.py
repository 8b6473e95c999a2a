"""Search at scale: a 10,000-trial adaptive ASHA search of instant trials through det-master.

Two measurements, each on SQLite and on PostgreSQL (a real server, started as the tests do with
``tests/postgres_db.py``; skipped with a note when PostgreSQL is not installed):

1. **Searcher persistence per decision.** The master's own ``SearcherStates`` (the event log,
   compacted into the snapshot) on a real database, inside the master's lifecycle transactions: a
   decision is one searcher call (trial created, operation completed, trial exited, ...), and its
   persistence cost is the time spent in ``SearcherStates.snapshot`` plus flushing the session,
   as the master does after every batch of actions. The commit itself, shared with the trial rows
   a real transaction writes, is not counted. Reported over the whole run and over the last
   1,000 trials (at ~10,000 trials). Baseline, same run: the old whole-snapshot persistence
   (``compact_every=0``: the whole state JSON-serialised and written after every batch), timed
   on the final 10,000-trial state, and over a whole smaller search (``--baseline-trials``).
2. **Master overhead per trial, end to end.** An in-process det-master whose resource manager
   runs each trial as an instant HTTP client instead of a trial process (``_instant_trials``:
   process start-up is not what is measured): the "trial" speaks the trial protocol over HTTP
   with its allocation token, exactly as a Core API trial would (``GET .../searcher/operation``,
   ``POST .../searcher/completed_operation`` with the loss of its learning rate at that length,
   until the searcher says it is done) and then exits with code 0. The clients run in a child
   process (``--clients process``, the default), so the master's process does only the master's
   work; ``--clients thread`` runs them as threads of the master's process and subtracts their
   thread CPU, as this benchmark did until 2026-12-02 (their GIL contention was charged to the
   master: about 4 % more). Everything else is the real master: scheduling, allocations, launch
   specs, trial sessions, the searcher and its persistence, exit handling, the database. Master
   overhead per trial = wall time / trials, process CPU time / trials, and the master's CPU per
   trial (process CPU minus the client threads' own, with ``thread`` clients). Also printed: SQL
   statements and commits per trial (load-independent).
   The collector runs as ``det-master up`` sets it (its thresholds and ``gc.freeze()``), not with
   Python's defaults, which an in-process master would otherwise get.
   Anchor (not measured here): Ray Tune's published ~9 ms per trial end to end.

    .venv/bin/python benchmarks/bench_search_scale.py [--trials 10000] [--baseline-trials 1000]
        [--e2e-trials 10000] [--slots 16] [--no-postgres | --postgres-only] [--skip-e2e]
        [--clients process|thread]
"""

from __future__ import annotations

import argparse
import collections
import gc
import json
import pathlib
import shutil
import sys
import tempfile
import time
from typing import Any

import yaml

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from _instant_trials import loss, plugin

MAX_TIME = 1000
DIVISOR = 4


def asha_config(max_trials: int, concurrent: int = 16) -> dict[str, Any]:
    return {
        "name": "bench-search-scale",
        "entrypoint": "python3 -c pass",
        "searcher": {
            "name": "adaptive_asha",
            "metric": "loss",
            "smaller_is_better": True,
            "time_metric": "batches",
            "max_time": MAX_TIME,
            "max_trials": max_trials,
            "mode": "standard",
            "divisor": DIVISOR,
            "max_rungs": 5,
            "max_concurrent_trials": concurrent,
        },
        "hyperparameters": {"lr": {"type": "log", "minval": -5, "maxval": -1, "base": 10}},
        "reproducibility": {"experiment_seed": 1},
        "max_restarts": 0,
    }


# ------------------------------------------------------------------------------------------------
# 1. persistence per decision


def persistence(db_url: str, trials: int, compact_every: int | None) -> dict[str, float]:
    """Drive ``trials`` instant trials through a searcher persisted by ``SearcherStates`` in the
    master's transactions; returns timings in seconds and counts."""
    from determined.master import Master, MasterConfig
    from determined.master._core._searcher_state import SearcherStates
    from determined.master.db import Experiment
    from determined.searcher import Create, Stop

    data_dir = tempfile.mkdtemp(prefix="det-bench-scale-")
    master = Master(MasterConfig(port=0, data_dir=data_dir, db=db_url, slots=0))
    master.start()  # the schema, the users, the transactions of a real master
    db = master.db
    txns = master.manager.transactions
    states = SearcherStates(db, compact_every=compact_every)
    config = asha_config(trials)
    with txns.txn() as session:
        exp = Experiment(config=config, state="PAUSED", owner_id=1, project_id=1)
        session.add(exp)
        session.flush()
        exp_id = exp.id
    spent = 0.0
    spent_tail = 0.0
    decisions = 0
    decisions_tail = 0
    pending: collections.deque[Create] = collections.deque()
    ran = 0

    def step(call: Any) -> set[str]:
        """One transaction: a searcher call and the creates it leads to, then persistence."""
        nonlocal spent, spent_tail, decisions, decisions_tail
        with txns.txn() as session:
            exp = session.get(Experiment, exp_id)
            searcher = states.of(exp)
            queue = collections.deque(call(searcher))
            made = 1
            stops = set()
            while queue:
                action = queue.popleft()
                if isinstance(action, Create):
                    pending.append(action)
                    queue.extend(searcher.trial_created(action.request_id))
                    made += 1
                elif isinstance(action, Stop):
                    stops.add(action.request_id)
            start = time.perf_counter()
            states.snapshot(session, exp)
            session.flush()
            took = time.perf_counter() - start
        spent += took
        decisions += made
        if ran > trials - 1000:
            spent_tail += took
            decisions_tail += made
        return stops

    states.create(_exp(db, exp_id))
    step(lambda s: s.initial_trials())
    start = time.perf_counter()
    while pending:
        create = pending.popleft()
        rid = create.request_id
        ran += 1
        lr = create.hparams["lr"]
        while True:
            length = states.searchers[exp_id].next_operation(rid)
            if length is None:
                break
            stops = step(
                lambda s, rid=rid, n=length, lr=lr: s.operation_completed(rid, n, loss(lr, n))
            )
            if rid in stops:
                break
        step(lambda s, rid=rid: s.trial_exited(rid))
    wall = time.perf_counter() - start
    # the old way at this size: the whole state written after a decision
    whole = []
    old = SearcherStates(db, compact_every=0)
    with txns.txn() as session:
        exp = session.get(Experiment, exp_id)
        searcher = old.of(exp)
        for _ in range(5):
            searcher.set_trial_progress("bench", time.time())  # a change to write
            begin = time.perf_counter()
            old.snapshot(session, exp)
            session.flush()
            whole.append(time.perf_counter() - begin)
        state_bytes = len(json.dumps(searcher.state_dict()))
    master.stop()
    shutil.rmtree(data_dir, ignore_errors=True)
    return {
        "trials": ran,
        "decisions": decisions,
        "spent": spent,
        "tail_decisions": decisions_tail,
        "tail_spent": spent_tail,
        "wall": wall,
        "whole_snapshot": sorted(whole)[len(whole) // 2],
        "state_bytes": state_bytes,
        "compactions": states.compactions,
    }


def _exp(db: Any, exp_id: int) -> Any:
    from determined.master.db import Experiment

    with db.read() as session:
        return session.get(Experiment, exp_id)


# ------------------------------------------------------------------------------------------------
# 2. end to end through the master


def _master_cpu_per_trial(
    samples: list[tuple[int, float, float]], start: float, end: float
) -> float:
    """Master CPU seconds per trial (trial threads' CPU subtracted) between the samples where the
    fractions ``start`` and ``end`` of the trials had ended: whether a trial late in a long search
    costs the master more than an early one."""
    total = samples[-1][0]
    lo = next(s for s in samples if s[0] >= start * total)
    hi = next(s for s in samples if s[0] >= end * total)
    if hi[0] <= lo[0]:
        return float("nan")
    return ((hi[1] - lo[1]) - (hi[2] - lo[2])) / (hi[0] - lo[0])


def end_to_end(
    db_url: str | None, trials: int, slots: int, poll_s: float = 0.2, clients: str = "process"
) -> dict[str, float]:
    """One search of ``trials`` instant trials through an in-process master; the experiment's
    state is asked every ``poll_s`` seconds (each ask costs the master a request: the
    instruction count of ``bench_trial_instructions.py`` polls rarely, as under valgrind a run's
    wall time, and so its number of asks, depends on the host's load). ``clients``: where the
    trials' HTTP clients run (``_instant_trials``: ``process``, or ``thread`` as until
    2026-12-02)."""
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    from determined.client import Session
    from determined.core import plugins
    from determined.master import Master, MasterConfig

    plugins.register(plugin(), name="bench_instant_rm")
    statements = [0, 0]

    def count_statement(*_: Any) -> None:
        statements[0] += 1

    def count_commit(*_: Any) -> None:
        statements[1] += 1

    event.listen(Engine, "before_cursor_execute", count_statement)
    event.listen(Engine, "commit", count_commit)
    data_dir = tempfile.mkdtemp(prefix="det-bench-scale-")
    master = Master(
        MasterConfig(
            port=0,
            data_dir=data_dir,
            db=db_url,
            resource_manager={"type": "instant", "slots": slots, "clients": clients},
        )
    )
    from determined.master.__main__ import GC_THRESHOLD

    saved_gc = gc.get_threshold()
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLD)
    master.start()
    try:
        token = Session(master.url).request(
            "POST", "/api/v1/auth/login", body={"username": "determined", "password": ""}
        )["token"]
        api = Session(master.url, token)
        statements[:] = [0, 0]
        cpu0, wall0 = time.process_time(), time.perf_counter()
        exp = api.request(
            "POST",
            "/api/v1/experiments",
            body={
                "config": yaml.safe_dump(asha_config(trials, slots)),
                "modelDefinition": [],
                "activate": True,
            },
        )["experiment"]
        exp_id = int(exp["id"])
        states = master.manager.searcher_states
        samples: list[tuple[int, float, float]] = []
        """(trials ended, process CPU, trial threads' CPU) about every 0.2 s."""
        while True:
            state = api.request("GET", f"/api/v1/experiments/{exp_id}")["experiment"]["state"]
            samples.append((master.rm.exited, time.process_time(), master.rm.client_cpu))
            if state in ("STATE_COMPLETED", "STATE_ERROR", "STATE_CANCELED"):
                break
            time.sleep(poll_s)
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        ran = len(api.request("GET", f"/api/v1/experiments/{exp_id}/trials?limit=100000")["trials"])
        return {
            "trials": ran,
            "wall": wall,
            "cpu": cpu,
            "client_cpu": master.rm.client_cpu,
            "state": state,
            "compactions": states.compactions,
            "statements": statements[0],
            "commits": statements[1],
            "first_fifth": _master_cpu_per_trial(samples, 0.0, 0.2),
            "last_fifth": _master_cpu_per_trial(samples, 0.8, 1.0),
        }
    finally:
        event.remove(Engine, "before_cursor_execute", count_statement)
        event.remove(Engine, "commit", count_commit)
        master.stop()
        gc.unfreeze()
        gc.set_threshold(*saved_gc)
        shutil.rmtree(data_dir, ignore_errors=True)


# ------------------------------------------------------------------------------------------------


def databases(no_postgres: bool) -> list[tuple[str, Any, Any]]:
    """``(name, make_url, drop)`` of each database to measure on."""

    def sqlite_url() -> str:
        return f"sqlite:///{tempfile.mkdtemp(prefix='det-bench-scale-')}/det.sqlite"

    out: list[tuple[str, Any, Any]] = [("SQLite", sqlite_url, lambda url: None)]
    if no_postgres:
        return out
    try:
        import postgres_db

        if not postgres_db.available():
            raise RuntimeError("PostgreSQL is not installed")
        postgres_db.postgres_url()  # starts the server (or raises)
        out.append(("PostgreSQL", postgres_db.postgres_url, postgres_db.drop_database))
    except BaseException as e:  # pytest.skip raises a BaseException
        print(f"(PostgreSQL skipped: {e})")
    return out


def _persistence_figures(name: str, make_url: Any, drop: Any, trials: int, baseline: int) -> None:
    """Print the event log's cost per decision against the whole snapshot's, on one database."""
    url = make_url()
    try:
        new = persistence(url, trials, None)
    finally:
        drop(url)
    url = make_url()
    try:
        old = persistence(url, baseline, 0)
    finally:
        drop(url)
    us = new["spent"] / new["decisions"] * 1e6
    tail = new["tail_spent"] / max(new["tail_decisions"], 1) * 1e6
    print(f"== {name}: searcher persistence per decision")
    print(
        f"event log + compaction, {new['trials']} trials, {new['decisions']} decisions, "
        f"{new['compactions']} compactions: {us:.1f} us/decision over the run, "
        f"{tail:.1f} us/decision over the last 1,000 trials"
    )
    print(
        f"baseline whole snapshot at {new['trials']} trials "
        f"(state {new['state_bytes'] / 1e6:.1f} MB of JSON): "
        f"{new['whole_snapshot'] * 1e6:.0f} us/decision; over a whole "
        f"{old['trials']}-trial search: {old['spent'] / old['decisions'] * 1e6:.1f} us/decision"
    )
    print(
        f"ratio at {new['trials']} trials, event log / whole snapshot: "
        f"{tail / (new['whole_snapshot'] * 1e6):.4f}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--trials", type=int, default=10_000)
    parser.add_argument("--baseline-trials", type=int, default=1_000)
    parser.add_argument("--e2e-trials", type=int, default=10_000)
    parser.add_argument("--slots", type=int, default=16)
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--postgres-only", action="store_true")
    parser.add_argument("--skip-e2e", action="store_true")
    parser.add_argument("--clients", choices=("process", "thread"), default="process")
    parser.add_argument(
        "--skip-persistence", action="store_true", help="only the end-to-end run (--e2e-trials)"
    )
    args = parser.parse_args()

    for name, make_url, drop in databases(args.no_postgres):
        if args.postgres_only and name != "PostgreSQL":
            continue
        if not args.skip_persistence:
            _persistence_figures(name, make_url, drop, args.trials, args.baseline_trials)
        if args.skip_e2e:
            continue
        url = make_url()
        try:
            e2e = end_to_end(url, args.e2e_trials, args.slots, clients=args.clients)
        finally:
            drop(url)
        print(f"== {name}: end to end, {e2e['trials']} instant trials through det-master")
        print(
            f"{e2e['state']}: {e2e['wall']:.1f} s wall, {e2e['wall'] / e2e['trials'] * 1e3:.2f} "
            f"ms/trial wall, {e2e['cpu'] / e2e['trials'] * 1e3:.2f} ms/trial process CPU, of which "
            f"{(e2e['cpu'] - e2e['client_cpu']) / e2e['trials'] * 1e3:.2f} ms the master's "
            f"({args.clients} clients), {e2e['compactions']} compactions; "
            f"{e2e['statements'] / e2e['trials']:.1f} SQL statements and "
            f"{e2e['commits'] / e2e['trials']:.1f} commits per trial"
        )
        print(
            f"master CPU per trial over the first fifth of the trials "
            f"{e2e['first_fifth'] * 1e3:.2f} ms, over the last fifth "
            f"{e2e['last_fifth'] * 1e3:.2f} ms (ratio last/first "
            f"{e2e['last_fifth'] / e2e['first_fifth']:.2f}: 1.00 = no growth with trials run)"
        )
        print("anchor (not measured here): Ray Tune ~9 ms overhead per trial end to end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
