"""Per-batch cost of a tiny model: a plain torch loop vs det's Trainer vs upstream Determined 0.38.1.

Same model (``nn.Linear(8, 1)``), batch 32, SGD, MSE, one thread, a shuffled ``TensorDataset`` read
by a torch DataLoader (det's and upstream's DataLoaders build one too). Each runner trains
``--batches`` batches and stamps the process CPU time (all threads, so det's background metric
shipper counts) every 100 batches: each 100-batch window holds exactly one of the trainers' metric
reports, so everything the loop does between batches (reports, preemption checks, ...) is counted,
while start-up, the final validation and the final checkpoint are not.

Each measurement runs in a fresh process between two plain loops, and is compared with them (the
load of a shared machine drifts over minutes, not seconds). Two statistics per round: ``median``
(the median window over the median plain window) and ``p10`` (the 10th-percentile windows: the
runs least disturbed by other work on the host; a VM's neighbours inflate some windows by 30 % and
more, and no fixed cost of the loop can hide in the fastest windows because every window has the
same work). Runners alternate for ``--rounds`` rounds; the median over rounds is reported. Every
worker is pinned to one CPU (``--cpu``, default 0; ``-1`` leaves scheduling alone).

Upstream runs in its own venv, built on first use at ``.cache/upstream-pytorch-0.38.1``
(``python -m venv`` + ``pip install torch==2.13.0 determined==0.38.1``; ``--no-upstream`` skips it).
TensorBoard logging is off for both trainers (upstream's venv has no tensorboard); ``det+tb`` adds
det with TensorBoard logging on.

``--instructions`` instead counts the instructions each runner executes per batch with valgrind's
cachegrind (``apt-get install valgrind``): each runner trains N and 3N batches in its own process
and the difference is divided by 2N, so start-up cancels out. The count does not depend on the
machine's load, so it separates what det adds from a VM's noise; it does not see cache or branch
effects, which time does.

Run: ``.venv/bin/python benchmarks/bench_pytorch_overhead.py [--batches N] [--rounds R]``
     ``.venv/bin/python benchmarks/bench_pytorch_overhead.py --instructions [--batches N]``
"""

from __future__ import annotations

import argparse
import concurrent.futures
import itertools
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
UPSTREAM_VENV = ROOT / ".cache" / "upstream-pytorch-0.38.1"
BATCH = 32
FEATURES = 8
WINDOW = 100  # batches per timed window: one metric report each (det's and upstream's default)


def _setup() -> tuple:
    import torch

    torch.set_num_threads(1)
    torch.manual_seed(0)
    x = torch.randn(BATCH * 256, FEATURES)
    y = x.sum(dim=1, keepdim=True) * 0.5
    return torch.utils.data.TensorDataset(x, y), torch


def windows(stamps: list[float]) -> list[float]:
    """Seconds per batch in each window between consecutive stamps."""
    return [(b - a) / WINDOW for a, b in itertools.pairwise(stamps)]


def run_plain(batches: int) -> list[float]:
    dataset, torch = _setup()
    model = torch.nn.Linear(FEATURES, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = torch.utils.data.DataLoader(dataset, batch_size=BATCH, shuffle=True)
    stamps: list[float] = []
    done = 0
    while done <= batches:
        for x, y in loader:
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if done % WINDOW == 0:
                stamps.append(time.process_time())
            done += 1
            if done > batches:
                break
    return windows(stamps)


def run_trainer(batches: int, tensorboard: bool) -> list[float]:
    """The same training as a PyTorchTrial, with whichever ``determined`` this interpreter has."""
    dataset, torch = _setup()
    from determined import pytorch

    stamps: list[float] = []

    class Trial(pytorch.PyTorchTrial):
        def __init__(self, context: pytorch.PyTorchTrialContext) -> None:
            self.context = context
            self.model = context.wrap_model(torch.nn.Linear(FEATURES, 1))
            self.opt = context.wrap_optimizer(torch.optim.SGD(self.model.parameters(), lr=0.01))

        def build_training_data_loader(self) -> pytorch.DataLoader:
            return pytorch.DataLoader(dataset, batch_size=BATCH, shuffle=True)

        def build_validation_data_loader(self) -> pytorch.DataLoader:
            return pytorch.DataLoader(dataset, batch_size=BATCH * 64)

        def train_batch(self, batch, epoch_idx, batch_idx):  # type: ignore[no-untyped-def]
            x, y = batch
            loss = torch.nn.functional.mse_loss(self.model(x), y)
            self.context.backward(loss)
            self.context.step_optimizer(self.opt)
            if batch_idx % WINDOW == 0:  # as cheap as the plain loop's count
                stamps.append(time.process_time())
            return {"loss": loss}

        def evaluate_batch(self, batch, batch_idx):  # type: ignore[no-untyped-def]
            x, y = batch
            return {"val_loss": torch.nn.functional.mse_loss(self.model(x), y)}

    with pytorch.init(hparams={}, enable_tensorboard_logging=tensorboard) as context:
        trial = Trial(context)
        pytorch.Trainer(trial, context).fit(
            max_length=pytorch.Batch(batches + 1), checkpoint_policy="none"
        )
    return windows(stamps)


def worker(kind: str, batches: int) -> None:
    """One measurement: the trainer between two plain loops in this same process, so the ratio
    compares runs made seconds apart on the same interpreter (the machine's load drifts)."""
    import logging

    logging.basicConfig(level=logging.WARNING)
    run_plain(200)  # warm up: the first optimizer step imports torch._dynamo
    before = run_plain(batches)
    if kind == "plain":
        value = run_plain(batches)
    else:
        value = run_trainer(batches, tensorboard=kind == "det+tb")
    after = run_plain(batches)
    print(json.dumps({"windows": value, "plain_windows": before + after}))


def worker_once(kind: str, batches: int) -> None:
    """Train ``batches`` batches with ``kind`` and nothing else (for instruction counting)."""
    import logging

    logging.basicConfig(level=logging.WARNING)
    if kind == "plain":
        run_plain(batches)
    else:
        run_trainer(batches, tensorboard=kind == "det+tb")


def count_instructions(python: str, kind: str, batches: int, env: dict[str, str]) -> int:
    """Instructions (cachegrind's Ir) of one whole process training ``batches`` with ``kind``."""
    out = pathlib.Path(env["TMPDIR"], f"cachegrind.{kind}.{batches}")
    subprocess.run(
        [
            "valgrind",
            "--tool=cachegrind",
            "--cache-sim=no",
            f"--cachegrind-out-file={out}",
            python,
            __file__,
            "--worker",
            kind,
            "--once",
            "--batches",
            str(batches),
        ],
        check=True,
        capture_output=True,
        env=env,
        cwd=env["BENCH_CWD"],
    )
    for line in out.read_text().splitlines():
        if line.startswith("summary:"):
            return int(line.split()[1])
    raise RuntimeError(f"no summary line in {out}")


def instructions(runners: dict[str, str], batches: int, env: dict[str, str]) -> None:
    jobs = [(kind, python, n) for kind, python in runners.items() for n in (batches, 3 * batches)]
    with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        counts = dict(
            zip(
                [(kind, n) for kind, _, n in jobs],
                pool.map(lambda job: count_instructions(job[1], job[0], job[2], env), jobs),
                strict=True,
            )
        )
    per_batch = {
        kind: (counts[kind, 3 * batches] - counts[kind, batches]) / (2 * batches)
        for kind in runners
    }
    print(
        f"tiny model (Linear({FEATURES},1), batch {BATCH}, SGD, 1 thread): instructions per batch "
        f"(cachegrind, {3 * batches} minus {batches} batches)"
    )
    print(f"{'runner':<10} {'instr/batch':>12} {'ratio':>7} {'+instr':>8}")
    for kind, value in per_batch.items():
        plain = per_batch["plain"]
        print(f"{kind:<10} {value:>12,.0f} {value / plain:>6.3f}x {value - plain:>+8,.0f}")


def ensure_upstream_venv() -> pathlib.Path:
    python = UPSTREAM_VENV / "bin" / "python"
    marker = UPSTREAM_VENV / ".installed"
    if marker.exists():
        return python
    print(f"building {UPSTREAM_VENV} (once) ...", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(UPSTREAM_VENV)], check=True)
    pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, "torch==2.13.0"], check=True)
    subprocess.run([*pip, "determined==0.38.1"], check=True)
    marker.write_text("determined==0.38.1 torch==2.13.0\n")
    return python


def measure(python: str, kind: str, batches: int, env: dict[str, str]) -> dict[str, float]:
    """One round of ``kind``: its median and 10th-percentile window, and the plain loops'."""
    out = subprocess.run(
        [python, __file__, "--worker", kind, "--batches", str(batches)],
        check=True,
        capture_output=True,
        text=True,
        env=env,
        cwd=env["BENCH_CWD"],
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    runner, plain = result["windows"], result["plain_windows"]
    return {
        "median": statistics.median(runner),
        "p10": _p10(runner),
        "plain_median": statistics.median(plain),
        "plain_p10": _p10(plain),
    }


def _p10(values: list[float]) -> float:
    return statistics.quantiles(values, n=10)[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-upstream", action="store_true")
    parser.add_argument("--cpu", type=int, default=0)
    parser.add_argument("--worker", choices=["plain", "det", "det+tb", "upstream"])
    parser.add_argument("--once", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--instructions", action="store_true")
    args = parser.parse_args()
    if args.cpu >= 0 and not args.instructions and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {args.cpu})  # inherited by the workers
    if args.worker:
        (worker_once if args.once else worker)(args.worker, args.batches)
        return
    runners = {"plain": sys.executable, "det": sys.executable}
    if not args.instructions:
        runners["det+tb"] = sys.executable
    if not args.no_upstream:
        runners["upstream"] = str(ensure_upstream_venv())
    results: dict[str, list[dict[str, float]]] = {kind: [] for kind in runners}
    with tempfile.TemporaryDirectory(prefix="bench-pytorch-") as tmp:
        env = {
            k: v for k, v in os.environ.items() if not k.startswith("DET_") and k != "PYTHONPATH"
        }
        env.update(
            OMP_NUM_THREADS="1",
            XDG_DATA_HOME=str(pathlib.Path(tmp, "data")),
            TMPDIR=tmp,
            TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD="1",
            # upstream copies the working directory into each checkpoint when off-cluster: run in
            # an empty directory that does not contain the checkpoints (or it copies itself)
            BENCH_CWD=str(pathlib.Path(tmp, "work")),
        )
        pathlib.Path(env["BENCH_CWD"]).mkdir()
        if args.instructions:
            instructions(runners, args.batches, env)
            return
        for _ in range(args.rounds):
            for kind, python in runners.items():
                results[kind].append(measure(python, kind, args.batches, env))
    print(
        f"tiny model (Linear({FEATURES},1), batch {BATCH}, SGD, 1 thread), {args.batches} batches "
        f"in {WINDOW}-batch windows, {args.rounds} rounds"
    )
    print(
        "CPU time per batch; ratio = the runner over the plain loops run just before and after it "
        "in the same process; median over rounds"
    )
    print(
        f"{'runner':<10} {'median us':>10} {'ratio':>7} {'+us':>7}   "
        f"{'p10 us':>8} {'ratio':>7} {'+us':>7}"
    )
    for kind, rounds in results.items():
        row = f"{kind:<10} "
        for stat, width in (("median", 10), ("p10", 8)):
            value = statistics.median(r[stat] for r in rounds)
            plain = statistics.median(r[f"plain_{stat}"] for r in rounds)
            ratio = statistics.median(r[stat] / r[f"plain_{stat}"] for r in rounds)
            row += f"{value * 1e6:>{width}.1f} {ratio:>6.3f}x {(ratio - 1) * plain * 1e6:>+7.1f}   "
        print(row.rstrip())


if __name__ == "__main__":
    main()
