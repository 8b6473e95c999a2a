"""Instructions per trial of the search-scale end-to-end run, this tree against a git revision.

CPU time per trial on a shared 2-core host drifts by tens of percent within minutes, so an A/B of a
few-percent change in seconds says nothing. Instruction counts (valgrind's cachegrind, no cache
simulation) repeat to about 1 % between runs of one tree. This script runs
``bench_search_scale.end_to_end(None, N, 16)`` (an in-process master, instant trials, SQLite) under
cachegrind for two trial counts, on this working tree and on ``--base`` (a temporary git worktree
put first on ``PYTHONPATH``), and prints the per-trial slope between the two counts (start-up
cancels out) and its ratio to the base's. The count covers the whole process, the instant trials'
own HTTP client included. The run asks for the experiment's state every 5 s, not every 0.2 s
as the timed benchmark does: under valgrind a run takes minutes, and at 0.2 s those asks (a
request each, whose number follows the host's load) were a large and varying share of the count.

    .venv/bin/python benchmarks/bench_trial_instructions.py --base REV [--small 100] [--large 300]
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
    "r = b.end_to_end(None, int(sys.argv[1]), 16, poll_s=5.0); "
    "sys.exit(0 if r['state'] == 'STATE_COMPLETED' else 1)"
)


def instructions(trials: int, pythonpath: str | None) -> int:
    """Instructions cachegrind counted for one end-to-end run of ``trials`` trials."""
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
        ],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    found = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"the run of {trials} trials failed:\n{done.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", required=True, help="git revision to compare against")
    parser.add_argument("--small", type=int, default=100)
    parser.add_argument("--large", type=int, default=300)
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (Debian: apt-get install valgrind)")
    if args.large <= args.small:
        raise SystemExit("--large must be more trials than --small")
    worktree = pathlib.Path(tempfile.mkdtemp(prefix="det-base-")) / "tree"
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(worktree), args.base],
        check=True,
    )
    try:
        sources = sorted(worktree.glob("packages/*/src"))
        # compiled now, so that no counted run pays for compiling either tree
        subprocess.run([sys.executable, "-m", "compileall", "-q", *map(str, sources)], check=True)
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "packages")])
        base_path = os.pathsep.join(map(str, sources))
        counts = {
            (name, n): instructions(n, path)
            for name, path in (("this tree", None), (args.base, base_path))
            for n in (args.small, args.large)
        }
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(worktree)])
    print(f"| tree | {args.small} trials | {args.large} trials | per trial |")
    print("|---|---|---|---|")
    slopes = {}
    for name in ("this tree", args.base):
        small, large = counts[(name, args.small)], counts[(name, args.large)]
        slopes[name] = (large - small) / (args.large - args.small)
        print(
            f"| {name} | {small / 1e9:.2f} G | {large / 1e9:.2f} G | {slopes[name] / 1e6:.2f} M |"
        )
    ratio = slopes["this tree"] / slopes[args.base]
    print(
        f"instructions per trial, this tree / {args.base}: {ratio:.3f} ({(ratio - 1) * 100:+.1f} %)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
