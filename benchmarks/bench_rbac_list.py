"""What RBAC costs the experiment listing: ``GET /api/v1/experiments`` (the route ``det e list``
and the web UI's experiment list call) on 10 workspaces x 1,000 experiments, RBAC on vs off.

One in-process master (SQLite by default, ``--db URL`` for PostgreSQL); the experiments are inserted
straight into its database (one project per workspace), then the listing is timed for

- ``admin``: a cluster admin (ClusterAdmin: no workspace filter either way),
- ``member``: a non-admin user with Viewer on 3 of the 10 workspaces (plus the default workspace),
  whose listing RBAC filters to 3,000 experiments,

with RBAC on (``security.authz.type: rbac``, the default) and off (``basic``). Both settings run on
the same master and data, alternating round by round (the master's ``Authz.configure``, which is
what the config setting calls), so load on the machine hits both alike. Baseline: RBAC off;
the ratio column is on/off for the same user and the same request.

    .venv/bin/python benchmarks/bench_rbac_list.py [--workspaces 10] [--per-workspace 1000]
        [--requests 30] [--limit 100] [--db URL]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from _master import start_master
from sqlalchemy import insert

from determined import client
from determined.master.db import Experiment, Project, User, Workspace


def populate(master: Any, workspaces: int, per_workspace: int) -> list[int]:
    """``workspaces`` workspaces with one project of ``per_workspace`` experiments each; their ids."""
    ids: list[int] = []
    with master.db.write() as session:
        owner = session.query(User).filter(User.username == "determined").one().id
        projects = []
        for i in range(workspaces):
            ws = Workspace(name=f"bench-ws-{i}")
            session.add(ws)
            session.flush()
            project = Project(name=f"bench-project-{i}", workspace_id=ws.id, key=f"B{i:03d}")
            session.add(project)
            session.flush()
            ids.append(ws.id)
            projects.append(project.id)
        config = {
            "name": "bench",
            "entrypoint": "python3 train.py",
            "searcher": {"name": "single", "metric": "loss", "smaller_is_better": True},
            "hyperparameters": {"lr": 0.1},
            "resources": {"slots_per_trial": 1},
        }
        for project_id in projects:
            rows = [
                {
                    "state": "COMPLETED",
                    "config": {**config, "name": f"bench-{project_id}-{n}"},
                    "owner_id": owner,
                    "project_id": project_id,
                    "labels": [],
                }
                for n in range(per_workspace)
            ]
            session.execute(insert(Experiment), rows)
    master.manager.authz.invalidate()
    return ids


def time_listing(api: client.Client, params: dict[str, Any], requests: int) -> list[float]:
    """Seconds of each of ``requests`` listings (after one warm-up)."""
    api.experiments.list(params)
    out = []
    for _ in range(requests):
        start = time.perf_counter()
        api.experiments.list(params)
        out.append(time.perf_counter() - start)
    return out


def time_checks(master: Any, user_id: int, workspace_id: int, n: int = 100_000) -> float:
    """Seconds per ``Authz.can`` call of a non-admin user, grants cached (what every route pays)."""
    from determined.master._core._authz import Permission

    with master.db.read() as session:
        user = session.get(User, user_id)
        session.expunge(user)
    authz = master.manager.authz
    authz.can(user, Permission.VIEW_EXPERIMENT_METADATA, workspace_id)
    start = time.perf_counter()
    for _ in range(n):
        authz.can(user, Permission.VIEW_EXPERIMENT_METADATA, workspace_id)
    return (time.perf_counter() - start) / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workspaces", type=int, default=10)
    parser.add_argument("--per-workspace", type=int, default=1000)
    parser.add_argument("--requests", type=int, default=30, help="timed listings per cell")
    parser.add_argument("--rounds", type=int, default=3, help="alternations of RBAC on/off")
    parser.add_argument("--limit", type=int, default=100, help="page size of the listing")
    parser.add_argument("--db", default=None, help="a database URL (default: SQLite)")
    args = parser.parse_args()

    settings: dict[str, Any] = {"slots": 0}
    if args.db:
        settings["db"] = args.db
    master, _ = start_master(**settings)
    try:
        started = time.perf_counter()
        workspace_ids = populate(master, args.workspaces, args.per_workspace)
        admin = client.Client(client.Session(master.url, _token(master.url, "admin")))
        member_name = "bench-member"
        member = admin.users.create(
            {"username": member_name, "active": True}, client.hash_password("")
        )["user"]
        for ws in workspace_ids[:3]:
            admin.rbac.assign(4, user_id=member["id"], workspace_id=ws)
        member_api = client.Client(client.Session(master.url, _token(master.url, member_name)))
        print(
            f"{args.workspaces} workspaces x {args.per_workspace} experiments inserted in "
            f"{time.perf_counter() - started:.1f}s; member has Viewer on 3 workspaces"
        )

        authz = master.manager.authz
        params = {"limit": args.limit}
        cells: dict[tuple[str, str], list[float]] = {}
        totals: dict[tuple[str, str], int] = {}
        for _ in range(args.rounds):
            for mode in ("off", "on"):
                authz.configure(mode == "on", "Editor")
                for who, api in (("admin", admin), ("member", member_api)):
                    cells.setdefault((who, mode), []).extend(
                        time_listing(api, params, args.requests)
                    )
                    totals[(who, mode)] = int(api.experiments.list(params)["pagination"]["total"])
        authz.configure(True, "Editor")
        per_check = time_checks(master, member["id"], workspace_ids[0])

        print(
            f"\nGET /api/v1/experiments?limit={args.limit}: median / p90 ms over "
            f"{args.rounds * args.requests} requests per cell\n"
        )
        print(f"{'user':8} {'visible (on)':>12} {'RBAC off':>18} {'RBAC on':>18} {'on/off':>8}")
        for who in ("admin", "member"):
            off, on = cells[(who, "off")], cells[(who, "on")]
            print(
                f"{who:8} {totals[(who, 'on')]:>12} {_fmt(off):>18} {_fmt(on):>18} "
                f"{statistics.median(on) / statistics.median(off):>8.2f}"
            )
        print(f"\none Authz.can() for the member (cached grants): {per_check * 1e9:.0f} ns")
        print(
            "\n(member with RBAC off sees all "
            f"{totals[('member', 'off')]} experiments; with RBAC on only its workspaces')"
        )
    finally:
        master.stop()


def _token(url: str, username: str) -> str:
    body = {"username": username, "password": ""}
    return str(client.Session(url).request("POST", "/api/v1/auth/login", body=body)["token"])


def _fmt(samples: list[float]) -> str:
    ordered = sorted(samples)
    p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
    return f"{statistics.median(samples) * 1000:.1f} / {p90 * 1000:.1f}"


if __name__ == "__main__":
    main()
