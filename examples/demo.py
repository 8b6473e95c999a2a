"""`make demo`: start an embedded det master, run a hyperparameter search on it, say where to look.

The master runs in the background (`det-master up --daemon`) with its data under `.demo/` in this
repository: a SQLite database, the trials' work directories and logs, and the checkpoints. The search is
`examples/core_api/3_hpsearch.yaml` (adaptive ASHA over 8 trials of a tiny model, 2 at a time).
"""

from __future__ import annotations

import pathlib
import socket
import subprocess
import sys
import time

import yaml

from determined.client import APIError, MasterNotFoundError, Session, read_context_dir

ROOT = pathlib.Path(__file__).resolve().parents[1]
DATA_DIR = ROOT / ".demo" / "master"
CONTEXT = ROOT / "examples" / "core_api"
CONFIG = CONTEXT / "3_hpsearch.yaml"
BIN = pathlib.Path(sys.executable).parent


def _port() -> int:
    """8080 when free (or already ours), else any free port."""
    url_file = DATA_DIR / "demo-url"
    if url_file.exists():
        return int(url_file.read_text().rsplit(":", 1)[1])
    with socket.socket() as s:
        if s.connect_ex(("127.0.0.1", 8080)) != 0:
            return 8080
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def ensure_master() -> str:
    port = _port()
    url = f"http://127.0.0.1:{port}"
    try:
        Session(url, max_retries=1).request("GET", "/api/v1/master")
        print(f"Using the demo master already running at {url}")
        return url
    except MasterNotFoundError:
        pass
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            str(BIN / "det-master"),
            "up",
            "--daemon",
            "--data-dir",
            str(DATA_DIR),
            "--port",
            str(port),
            "--slots",
            "2",
        ],
        check=True,
    )
    (DATA_DIR / "demo-url").write_text(url)
    return url


def main() -> int:
    url = ensure_master()
    anonymous = Session(url)
    token = anonymous.request(
        "POST", "/api/v1/auth/login", body={"username": "determined", "password": ""}
    )["token"]
    session = Session(url, token)
    body = {
        "config": CONFIG.read_text(),
        "modelDefinition": read_context_dir(CONTEXT),
        "activate": True,
    }
    try:
        experiment = session.request("POST", "/api/v1/experiments", body=body)["experiment"]
    except APIError as exc:
        print(f"could not create the experiment: {exc.message}", file=sys.stderr)
        return 1
    exp_id = experiment["id"]
    searcher = yaml.safe_load(CONFIG.read_text())["searcher"]
    print(
        f"Created experiment {exp_id}: {searcher['name']} search over {searcher['max_trials']} trials "
        f"of examples/core_api/3_hpsearch.py"
    )

    last = ""
    while True:
        exp = session.request("GET", f"/api/v1/experiments/{exp_id}")["experiment"]
        trials = session.request("GET", f"/api/v1/experiments/{exp_id}/trials")["trials"]
        states: dict[str, int] = {}
        for trial in trials:
            name = trial["state"].removeprefix("STATE_").lower()
            states[name] = states.get(name, 0) + 1
        line = (
            f"  {exp['state'].removeprefix('STATE_').lower():<10} progress {100 * (exp.get('progress') or 0):5.1f}%  "
            + ", ".join(f"{n} {s}" for s, n in sorted(states.items()))
        )
        if line != last:
            print(line, flush=True)
            last = line
        if exp["state"] in ("STATE_COMPLETED", "STATE_CANCELED", "STATE_ERROR"):
            break
        time.sleep(0.5)

    print()
    print(f"{'trial':>5}  {'lr':>8}  {'batches':>7}  {'validation_loss':>15}  state")
    for trial in sorted(trials, key=lambda t: t["id"]):
        metric = trial.get("searcherMetricValue")
        print(
            f"{trial['id']:>5}  {trial['hparams']['lr']:>8.4f}  {trial['totalBatchesProcessed']:>7}  "
            f"{metric if metric is None else f'{metric:.6f}':>15}  {trial['state'].removeprefix('STATE_').lower()}"
        )
    best = min(
        (t for t in trials if t.get("searcherMetricValue") is not None),
        key=lambda t: t["searcherMetricValue"],
        default=None,
    )
    print()
    if best is not None:
        print(
            f"Best trial: {best['id']} (lr={best['hparams']['lr']:.4f}), validation_loss "
            f"{best['searcherMetricValue']:.6f}"
        )
    print("Where to look:")
    print(
        f"  web UI          {url}/experiments/{exp_id}  (sign in as 'determined', empty password)"
    )
    print(f"  command line    {BIN / 'det'} -m {url} experiment describe {exp_id}")
    print(f"                  {BIN / 'det'} -m {url} trial logs <trial id>")
    print(
        f"  REST API        {url}/api/v1/experiments/{exp_id}  (OpenAPI docs at {url}/api/v1/docs)"
    )
    print(f"  data directory  {DATA_DIR}  (SQLite database, running trials' work dirs, master log)")
    print(f"  checkpoints     {DATA_DIR / 'checkpoints'}")
    print(f"  stop the master {BIN / 'det-master'} down --data-dir {DATA_DIR}")
    return 0 if exp["state"] == "STATE_COMPLETED" else 1


if __name__ == "__main__":
    sys.exit(main())
