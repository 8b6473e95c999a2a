"""``det tensorboard start`` -> first scalar served through the master's proxy, for an experiment of
100 trials x 10k points each (event files written straight into its checkpoint storage).

det: from running ``det tensorboard start EXP --no-browser`` (a subprocess, as a user would) until the
proxied ``/data/plugin/scalars/scalars`` answers points of a trial, and until every trial is a run.
That covers the CLI, the task's launch, syncing the files out of storage and TensorBoard's start.
Baseline in the same run: plain ``tensorboard --logdir`` on the same local files (the installed
command, which imports TensorFlow when it is installed; det's task does not), timed from spawn to
the same answers; and TensorBoard started as det's task starts it, without TensorFlow, to show what
det itself adds (the CLI, the task's launch, the sync out of storage, the proxy).

    .venv/bin/python benchmarks/bench_tensorboard_start.py [--trials 100] [--points 10000] [--runs 1]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time
import types
import urllib.error
import urllib.request
from typing import Any

from _master import create_experiment, start_master, wait_for

from determined.core import plugins


def write_event_file(directory: pathlib.Path, points: int) -> pathlib.Path:
    """One event file with ``points`` scalars of tag ``loss``, written by TensorBoard's writer."""
    sys.modules.setdefault("tensorboard.compat.notf", types.ModuleType("notf"))
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    directory.mkdir(parents=True, exist_ok=True)
    writer = EventFileWriter(str(directory), max_queue_size=1000)
    start = time.time()
    for step in range(points):
        value = summary_pb2.Summary.Value(tag="loss", simple_value=1.0 / (step + 1))
        writer.add_event(
            event_pb2.Event(
                wall_time=start + step, step=step, summary=summary_pb2.Summary(value=[value])
            )
        )
    writer.close()
    (path,) = directory.glob("events.out.tfevents.*")
    return path


def get_json(url: str, headers: dict[str, str]) -> Any:
    request = urllib.request.Request(url, headers=headers)
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.loads(answer.read())


def time_until_served(
    base: str, headers: dict[str, str], run: str, trials: int, started: float
) -> tuple[float, float]:
    """Seconds from ``started`` until ``run`` serves scalars, and until every trial is a run."""

    def first() -> bool:
        try:
            return bool(get_json(f"{base}data/plugin/scalars/scalars?run={run}&tag=loss", headers))
        except (urllib.error.URLError, OSError, ValueError):
            return False

    def every() -> bool:
        try:
            return len(get_json(f"{base}data/plugin/scalars/tags", headers)) >= trials
        except (urllib.error.URLError, OSError, ValueError):
            return False

    wait_for(first, timeout=600, interval=0.05)
    first_s = time.perf_counter() - started
    wait_for(every, timeout=600, interval=0.1)
    return first_s, time.perf_counter() - started


def measure_det(
    url: str, token: str, exp_id: int, trials: int, first_trial: int, env: dict[str, str]
) -> tuple[float, float]:
    started = time.perf_counter()
    out = subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), "det"), "tensorboard", "start",
         str(exp_id), "--no-browser"],
        capture_output=True, text=True, env=env, timeout=600, check=True,
    ).stdout  # fmt: skip
    tensorboard_url = out.strip().splitlines()[-1].split("running at: ")[1]
    headers = {"Authorization": f"Bearer {token}"}
    result = time_until_served(tensorboard_url, headers, f"trial_{first_trial}", trials, started)
    tensorboard_id = tensorboard_url.rstrip("/").rsplit("/", 1)[1]
    subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), "det"), "tensorboard", "kill",
         tensorboard_id],
        capture_output=True, env=env, timeout=120, check=True,
    )  # fmt: skip
    return result


TENSORBOARD = [os.path.join(os.path.dirname(sys.executable), "tensorboard")]
"""The installed ``tensorboard`` command."""
TENSORBOARD_NO_TF = [sys.executable, "-m", "determined.tensorboard._tensorboard_main"]
"""TensorBoard as det's task starts it (without importing TensorFlow)."""


def measure_baseline(
    command: list[str], logdir: pathlib.Path, trials: int, first_trial: int
) -> tuple[float, float]:
    port = plugins.free_ports(1)[0]
    started = time.perf_counter()
    process = subprocess.Popen(
        [*command, f"--logdir={logdir}", f"--port={port}", "--host=127.0.0.1"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        base = f"http://127.0.0.1:{port}/"
        return time_until_served(base, {}, f"trial/{first_trial}", trials, started)
    finally:
        process.terminate()
        process.wait(timeout=30)


def median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--points", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()

    master, session = start_master(slots=2)
    scratch = pathlib.Path(tempfile.mkdtemp(prefix="det-bench-tb-"))
    (scratch / "context").mkdir()
    (scratch / "context" / "noop.py").write_text("print('noop')\n")
    config = {"name": "tb-bench", "entrypoint": "python3 noop.py",
              "searcher": {"name": "single", "metric": "loss"}}  # fmt: skip
    exp_id = create_experiment(session, config, scratch / "context")
    storage = session.request("GET", f"/api/v1/experiments/{exp_id}")["config"][
        "checkpoint_storage"
    ]
    root = pathlib.Path(storage["host_path"]) / "tensorboard" / "experiment" / str(exp_id)

    made = time.perf_counter()
    template = write_event_file(scratch / "template", args.points)
    for trial in range(1, args.trials + 1):
        (root / "trial" / str(trial)).mkdir(parents=True)
        shutil.copy(template, root / "trial" / str(trial) / template.name)
    size_mb = template.stat().st_size * args.trials / 1e6
    print(f"wrote {args.trials} trials x {args.points} points ({size_mb:.0f} MB) "
          f"in {time.perf_counter() - made:.1f} s")  # fmt: skip

    env = {**os.environ, "DET_MASTER": master.url, "DET_USER": "determined",
           "DET_CONFIG_DIR": str(scratch / "det-config")}  # fmt: skip
    det_runs: list[tuple[float, float]] = []
    base_runs: list[tuple[float, float]] = []
    no_tf_runs: list[tuple[float, float]] = []
    for _ in range(args.runs):
        det_runs.append(measure_det(master.url, session.token or "", exp_id, args.trials, 1, env))
        base_runs.append(measure_baseline(TENSORBOARD, root, args.trials, 1))
        no_tf_runs.append(measure_baseline(TENSORBOARD_NO_TF, root, args.trials, 1))
    master.stop()
    shutil.rmtree(scratch, ignore_errors=True)

    def pick(runs: list[tuple[float, float]], index: int) -> float:
        return median([run[index] for run in runs])

    det_first, det_all = pick(det_runs, 0), pick(det_runs, 1)
    base_first, base_all = pick(base_runs, 0), pick(base_runs, 1)
    print(
        f"det tensorboard start -> first scalar served: {det_first:.2f} s; "
        f"all {args.trials} runs listed: {det_all:.2f} s (median of {args.runs})"
    )
    print(
        f"baseline tensorboard --logdir (same files) -> first scalar: {base_first:.2f} s; "
        f"all runs: {base_all:.2f} s"
    )
    print(f"ratio det/baseline: first scalar {det_first / base_first:.2f}x, "
          f"all runs {det_all / base_all:.2f}x")  # fmt: skip
    no_tf_first = pick(no_tf_runs, 0)
    print(f"TensorBoard without TensorFlow, as det starts it, on the same files -> first scalar: "
          f"{no_tf_first:.2f} s; det's overhead over it (CLI, task launch, sync, proxy): "
          f"{det_first - no_tf_first:+.2f} s")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
