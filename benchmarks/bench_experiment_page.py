"""Web UI: the server's time for the requests of an experiment page, 10,000 trials against 100.

Two experiments in one master (SQLite, rows inserted directly, each trial with a few training
reports and their chart tiles): one of ``--trials`` trials (default 10,000, the size of search
issue 23 names) and the baseline of 100. For each request the experiment page makes — the page
itself, its live refresh (every 2 s while the experiment runs), the learning curves, the
hyperparameter view — and for the REST API's first page of 100 trials, the time to the full
response (first request, then the median of ``--repeat``), its size, and the ratio of the large
experiment's median to the baseline's. A page that reads only what it shows stays near 1x; one that
reads every trial grows with them.

    .venv/bin/python benchmarks/bench_experiment_page.py [--trials 10000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

import requests
from _master import start_master
from bench_webui_curves import populate

POINTS = 20
"""Training reports per trial (the page's cost is per trial, not per report)."""


def paths(exp: int) -> dict[str, str]:
    return {
        "page": f"/experiments/{exp}",
        "live refresh": f"/ui/partials/experiments/{exp}",
        "curves": f"/ui/api/experiments/{exp}/curves?width=1200",
        "hparams": f"/ui/api/experiments/{exp}/hparams",
        "REST page of 100": f"/api/v1/experiments/{exp}/trials?limit=100",
    }


def timed(web: requests.Session, url: str, repeat: int) -> tuple[float, float, int]:
    """(ms of the first request, median ms of the next ``repeat``, bytes of the body)."""
    times = []
    size = 0
    for _ in range(repeat + 1):
        started = time.perf_counter()
        response = web.get(url, timeout=300)
        times.append((time.perf_counter() - started) * 1000)
        response.raise_for_status()
        size = len(response.content)
    return times[0], statistics.median(times[1:]), size


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    master, session = start_master(slots=1)
    try:
        started = time.perf_counter()
        small, _ = populate(master, 100, POINTS, name="page-100")
        large, _ = populate(master, args.trials, POINTS, name=f"page-{args.trials}")
        print(f"inserted 100 + {args.trials:,} trials in {time.perf_counter() - started:.1f} s")
        token = session.request(
            "POST", "/api/v1/auth/login", body={"username": "determined", "password": ""}
        )["token"]
        web = requests.Session()
        web.trust_env = False
        web.cookies.set("auth", token)
        web.headers["Authorization"] = f"Bearer {token}"
        print(
            f"\n{'request':18s} {'100 trials: first, median':>27s} "
            f"{f'{args.trials:,} trials: first, median':>30s} {'size':>9s} {'ratio':>7s}"
        )
        for name, path in paths(small).items():
            base = timed(web, master.url + path, args.repeat)
            big = timed(web, master.url + paths(large)[name], args.repeat)
            print(
                f"{name:18s} {base[0]:12.0f} ms {base[1]:8.1f} ms "
                f"{big[0]:15.0f} ms {big[1]:8.1f} ms {big[2] / 1024:7.0f} KiB "
                f"{big[1] / base[1]:6.1f}x"
            )
    finally:
        master.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
