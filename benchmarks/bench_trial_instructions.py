"""Instructions per trial of the search-scale end-to-end run, this tree against a git revision.

CPU time per trial on a shared 2-core host drifts by tens of percent within minutes, so an A/B of a
few-percent change in seconds says nothing. Instruction counts (valgrind's cachegrind, no cache
simulation) repeat to about 1 % between runs of one tree. This script runs
``bench_search_scale.end_to_end(None, N, 16)`` (an in-process master, instant trials, SQLite) under
cachegrind for two trial counts, on this working tree and on ``--base`` (a temporary git worktree
put first on ``PYTHONPATH``), and prints the per-trial slope between the two counts (start-up
cancels out) and its ratio to the base's (``--postgres``: on a fresh PostgreSQL database of the
test set-up's server instead). The count covers the master's process; the instant trials' HTTP
clients run in a child process valgrind does not follow (until 2026-12-02 they were threads of the
master's process and counted with it). The run asks for the experiment's state every 5 s, not every 0.2 s
as the timed benchmark does: under valgrind a run takes minutes, and at 0.2 s those asks (a
request each, whose number follows the host's load) were a large and varying share of the count.

    .venv/bin/python benchmarks/bench_trial_instructions.py --base REV [--small 100] [--large 300]

``--tree REV`` measures a revision in a second worktree instead of the working tree, so the working
tree can be edited while the run lasts (it takes minutes).
"""

from __future__ import annotations

import argparse
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
RUNNER = (
    "import sys; sys.path.insert(0, sys.argv[2]); import bench_search_scale as b; "
    "url = sys.argv[3] or None; "
    "r = b.end_to_end(url, int(sys.argv[1]), 16, poll_s=5.0); "
    "sys.exit(0 if r['state'] == 'STATE_COMPLETED' else 1)"
)


def instructions(trials: int, pythonpath: str | None, postgres: bool = False) -> int:
    """Instructions cachegrind counted for one end-to-end run of ``trials`` trials (on a fresh
    PostgreSQL database with ``postgres``: the server's own work is not counted, as it is not the
    master's)."""
    url = ""
    if postgres:
        sys.path.insert(0, str(ROOT / "tests"))
        import postgres_db

        url = postgres_db.postgres_url()
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # both trees run from compiled bytecode
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    done = subprocess.run(
        [
            "valgrind",
            "--tool=cachegrind",
            "--cache-sim=no",
            "--cachegrind-out-file=/dev/null",
            sys.executable,
            "-c",
            RUNNER,
            str(trials),
            str(HERE),
            url,
        ],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if postgres:
        postgres_db.drop_database(url)
    found = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"the run of {trials} trials failed:\n{done.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def _worktree(rev: str) -> pathlib.Path:
    """A temporary git worktree of ``rev`` (removed by the caller)."""
    tree = pathlib.Path(tempfile.mkdtemp(prefix="det-rev-")) / "tree"
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(tree), rev], check=True
    )
    return tree


def _sources(tree: pathlib.Path) -> str:
    """The ``PYTHONPATH`` that runs ``tree``'s packages, compiled now (no counted run pays for
    compiling)."""
    sources = sorted(tree.glob("packages/*/src"))
    subprocess.run([sys.executable, "-m", "compileall", "-q", *map(str, sources)], check=True)
    return os.pathsep.join(map(str, sources))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", required=True, help="git revision to compare against")
    parser.add_argument("--tree", help="measure this revision instead of the working tree")
    parser.add_argument("--postgres", action="store_true", help="on PostgreSQL, not SQLite")
    parser.add_argument("--small", type=int, default=100)
    parser.add_argument("--large", type=int, default=300)
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (Debian: apt-get install valgrind)")
    if args.large <= args.small:
        raise SystemExit("--large must be more trials than --small")
    worktrees = {args.base: _worktree(args.base)}
    if args.tree:
        worktrees[args.tree] = _worktree(args.tree)
    this = args.tree or "this tree"
    try:
        paths = {name: _sources(tree) for name, tree in worktrees.items()}
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "packages")])
        counts = {
            (name, n): instructions(n, paths.get(name), args.postgres)
            for name in (this, args.base)
            for n in (args.small, args.large)
        }
    finally:
        for tree in worktrees.values():
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)])
    print(f"| tree | {args.small} trials | {args.large} trials | per trial |")
    print("|---|---|---|---|")
    slopes = {}
    for name in (this, args.base):
        small, large = counts[(name, args.small)], counts[(name, args.large)]
        slopes[name] = (large - small) / (args.large - args.small)
        print(
            f"| {name} | {small / 1e9:.2f} G | {large / 1e9:.2f} G | {slopes[name] / 1e6:.2f} M |"
        )
    ratio = slopes[this] / slopes[args.base]
    print(f"instructions per trial, {this} / {args.base}: {ratio:.3f} ({(ratio - 1) * 100:+.1f} %)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
