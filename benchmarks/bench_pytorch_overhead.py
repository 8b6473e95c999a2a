"""Per-batch cost of a tiny model: a plain torch loop vs det's Trainer vs upstream Determined 0.38.1.

Same model (``nn.Linear(8, 1)``), batch 32, SGD, MSE, one thread, a shuffled ``TensorDataset`` read
by a torch DataLoader (det's and upstream's DataLoaders build one too). Each runner trains
``--batches`` batches; the process CPU time (all threads, so det's background metric shipper counts;
less disturbed by other load than wall time) from the first to the last batch is divided by the
batch count, so start-up, the final validation and the final checkpoint are not counted, but
everything the loop does between batches (metric reports every 100 batches, preemption checks, ...)
is. Each measurement runs in a fresh process between two plain loops, and the ratio to their mean
is what is compared (the load of a shared machine drifts over minutes, not seconds); runners
alternate for ``--rounds`` rounds and the median ratio is reported.

Upstream runs in its own venv, built on first use at ``.cache/upstream-pytorch-0.38.1``
(``python -m venv`` + ``pip install torch==2.13.0 determined==0.38.1``; ``--no-upstream`` skips it).
TensorBoard logging is off for both trainers (upstream's venv has no tensorboard); ``det+tb`` adds
det with TensorBoard logging on.

Run: ``.venv/bin/python benchmarks/bench_pytorch_overhead.py [--batches N] [--rounds R]``
"""

from __future__ import annotations

import argparse
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


def _setup() -> tuple:
    import torch

    torch.set_num_threads(1)
    torch.manual_seed(0)
    x = torch.randn(BATCH * 256, FEATURES)
    y = x.sum(dim=1, keepdim=True) * 0.5
    return torch.utils.data.TensorDataset(x, y), torch


def run_plain(batches: int) -> float:
    dataset, torch = _setup()
    model = torch.nn.Linear(FEATURES, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = torch.utils.data.DataLoader(dataset, batch_size=BATCH, shuffle=True)
    done, start = 0, 0.0
    while done < batches:
        for x, y in loader:
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            done += 1
            if done == 1:
                start = time.process_time()
            if done == batches:
                break
    return (time.process_time() - start) / (batches - 1)


def run_trainer(batches: int, tensorboard: bool) -> float:
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
            if batch_idx == 0 or batch_idx == batches - 1:  # as cheap as the plain loop's count
                stamps.append(time.process_time())
            return {"loss": loss}

        def evaluate_batch(self, batch, batch_idx):  # type: ignore[no-untyped-def]
            x, y = batch
            return {"val_loss": torch.nn.functional.mse_loss(self.model(x), y)}

    with pytorch.init(hparams={}, enable_tensorboard_logging=tensorboard) as context:
        trial = Trial(context)
        pytorch.Trainer(trial, context).fit(
            max_length=pytorch.Batch(batches), checkpoint_policy="none"
        )
    return (stamps[-1] - stamps[0]) / (batches - 1)


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
    print(json.dumps({"per_batch_s": value, "plain_s": (before + after) / 2}))


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


def measure(python: str, kind: str, batches: int, env: dict[str, str]) -> tuple[float, float]:
    out = subprocess.run(
        [python, __file__, "--worker", kind, "--batches", str(batches)],
        check=True,
        capture_output=True,
        text=True,
        env=env,
        cwd=env["BENCH_CWD"],
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    return float(result["per_batch_s"]), float(result["plain_s"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-upstream", action="store_true")
    parser.add_argument("--worker", choices=["plain", "det", "det+tb", "upstream"])
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.batches)
        return
    runners = {"plain": sys.executable, "det": sys.executable, "det+tb": sys.executable}
    if not args.no_upstream:
        runners["upstream"] = str(ensure_upstream_venv())
    results: dict[str, list[tuple[float, float]]] = {kind: [] for kind in runners}
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
        for _ in range(args.rounds):
            for kind, python in runners.items():
                results[kind].append(measure(python, kind, args.batches, env))
    print(
        f"tiny model (Linear({FEATURES},1), batch {BATCH}, SGD, 1 thread), {args.batches} batches"
    )
    print(
        f"{args.rounds} rounds; CPU time per batch (median over rounds); ratio = the runner over "
        "plain loops run just before and after it in the same process (median, best)"
    )
    print(f"{'runner':<10} {'us/batch':>9} {'plain us':>9} {'ratio':>8} {'+us':>7} {'best':>8}")
    for kind, pairs in results.items():
        ratios = [value / plain for value, plain in pairs]
        value = statistics.median(v for v, _ in pairs)
        plain = statistics.median(p for _, p in pairs)
        ratio = statistics.median(ratios)
        print(
            f"{kind:<10} {value * 1e6:>9.1f} {plain * 1e6:>9.1f} {ratio:>7.3f}x "
            f"{(ratio - 1) * plain * 1e6:>+7.1f} {min(ratios):>7.3f}x"
        )


if __name__ == "__main__":
    main()
