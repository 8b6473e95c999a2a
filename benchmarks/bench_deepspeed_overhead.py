"""Per-step cost of det's DeepSpeed Trainer over a plain ``deepspeed.initialize`` loop, side by side.

Same model (``nn.Linear(8, 1)``), same DeepSpeed config (micro batch 32, no accumulation, AdamW with
``torch_adam``, ZeRO stage ``--stage``), one thread, on CPU, a shuffled ``TensorDataset``. The plain
loop reads it with a torch DataLoader and calls ``engine(x)``, ``engine.backward``, ``engine.step``;
det's runs the same calls in a ``DeepSpeedTrial.train_batch`` under ``Trainer.fit`` (its
``det.pytorch.DataLoader``, metric reports every 100 steps, preemption checks, ...). The process CPU
time from the first to the last step, divided by the steps, is compared; start-up, the final
validation and checkpoint are not counted. Each process warms up, then alternates plain, det, plain,
det, ..., plain runs; each det run is divided by the mean of the plain runs just before and after it
(the load of a shared machine drifts over minutes), and the median of these ratios is reported.

Upstream Determined is not measured: its DeepSpeedTrial refuses to run without a GPU.

Run: ``.venv/bin/python benchmarks/bench_deepspeed_overhead.py [--steps N] [--rounds R] [--stage S]``
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
from typing import Any

BATCH = 32
FEATURES = 8


def _config(stage: int) -> dict[str, Any]:
    return {
        "train_batch_size": BATCH,
        "train_micro_batch_size_per_gpu": BATCH,
        "optimizer": {"type": "AdamW", "params": {"lr": 0.01, "torch_adam": True}},
        "zero_optimization": {"stage": stage},
        "steps_per_print": 10**9,
    }


def _dataset() -> Any:
    import torch

    x = torch.randn(BATCH * 256, FEATURES, generator=torch.Generator().manual_seed(0))
    return torch.utils.data.TensorDataset(x, x.sum(dim=1, keepdim=True) * 0.5)


def run_plain(steps: int, stage: int) -> float:
    import deepspeed
    import torch

    model = torch.nn.Linear(FEATURES, 1)
    engine, _, _, _ = deepspeed.initialize(
        model=model, model_parameters=model.parameters(), config=_config(stage)
    )
    loader = torch.utils.data.DataLoader(_dataset(), batch_size=BATCH, shuffle=True)
    done, start = 0, 0.0
    while done < steps:
        for x, y in loader:
            loss = torch.nn.functional.mse_loss(engine(x), y)
            engine.backward(loss)
            engine.step()
            done += 1
            if done == 1:
                start = time.process_time()
            if done == steps:
                break
    return (time.process_time() - start) / (steps - 1)


def run_trainer(steps: int, stage: int) -> float:
    import deepspeed
    import torch

    from determined import pytorch
    from determined.pytorch import deepspeed as det_ds

    dataset = _dataset()
    stamps: list[float] = []

    class Trial(det_ds.DeepSpeedTrial):
        def __init__(self, context: det_ds.DeepSpeedTrialContext) -> None:
            self.context = context
            model = torch.nn.Linear(FEATURES, 1)
            engine, _, _, _ = deepspeed.initialize(
                model=model, model_parameters=model.parameters(), config=_config(stage)
            )
            self.engine = context.wrap_model_engine(engine)

        def build_training_data_loader(self) -> pytorch.DataLoader:
            return pytorch.DataLoader(dataset, batch_size=BATCH, shuffle=True)

        def build_validation_data_loader(self) -> pytorch.DataLoader:
            return pytorch.DataLoader(dataset, batch_size=BATCH * 64)

        def train_batch(self, dataloader_iter, epoch_idx, batch_idx):  # type: ignore[no-untyped-def]
            x, y = next(dataloader_iter)
            loss = torch.nn.functional.mse_loss(self.engine(x), y)
            self.engine.backward(loss)
            self.engine.step()
            if batch_idx == 0 or batch_idx == steps - 1:  # as cheap as the plain loop's count
                stamps.append(time.process_time())
            return {"loss": loss}

        def evaluate_batch(self, dataloader_iter, batch_idx):  # type: ignore[no-untyped-def]
            x, y = next(dataloader_iter)
            return {"val_loss": torch.nn.functional.mse_loss(self.engine(x), y)}

    # checkpoints go to the user data dir: under the XDG_DATA_HOME main() sets
    with det_ds.init(hparams={}, enable_tensorboard_logging=False) as context:
        trial = Trial(context)
        det_ds.Trainer(trial, context).fit(
            max_length=pytorch.Batch(steps), checkpoint_policy="none"
        )
    return (stamps[-1] - stamps[0]) / (steps - 1)


def worker(steps: int, stage: int, repeats: int) -> None:
    """One process: after a warm-up, plain, det, plain, det, ..., plain; each det run is compared
    with the plain runs just before and after it (the load of a shared machine drifts)."""
    import logging

    import torch

    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("DeepSpeed").setLevel(logging.WARNING)
    torch.set_num_threads(1)
    # One process, no launcher: what det.pytorch.deepspeed.init() sets up, for the plain loop too.
    from determined.pytorch.deepspeed import _trainer

    with _trainer._single_process_env():
        _trainer._init_distributed()
        run_plain(steps, stage)  # warm up
        plain = [run_plain(steps, stage)]
        det: list[float] = []
        for _ in range(repeats):
            det.append(run_trainer(steps, stage))
            plain.append(run_plain(steps, stage))
    print(json.dumps({"plain": plain, "det": det}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3, help="processes")
    parser.add_argument("--repeats", type=int, default=3, help="det runs per process")
    parser.add_argument("--stage", type=int, default=0, choices=[0, 1, 2, 3])
    parser.add_argument("--worker", action="store_true")
    args = parser.parse_args()
    if args.worker:
        worker(args.steps, args.stage, args.repeats)
        return
    plain: list[float] = []
    det: list[float] = []
    ratios: list[float] = []
    with tempfile.TemporaryDirectory(prefix="bench-deepspeed-") as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith("DET_")}
        for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
            env.pop(name, None)
        env.update(OMP_NUM_THREADS="1", TMPDIR=tmp, XDG_DATA_HOME=str(pathlib.Path(tmp, "data")))
        cmd = [sys.executable, __file__, "--worker", "--steps", str(args.steps)]
        cmd += ["--stage", str(args.stage), "--repeats", str(args.repeats)]
        for _ in range(args.rounds):
            out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env)
            result = json.loads(out.stdout.strip().splitlines()[-1])
            plain += result["plain"]
            det += result["det"]
            for i, value in enumerate(result["det"]):
                ratios.append(value / ((result["plain"][i] + result["plain"][i + 1]) / 2))
    print(
        f"DeepSpeed engine on CPU (Linear({FEATURES},1), micro batch {BATCH}, AdamW, "
        f"ZeRO {args.stage}, 1 thread), {args.steps} steps per run, "
        f"{args.rounds} processes x {args.repeats} det runs"
    )
    print(
        "CPU time per step (median); ratio = a det run over the plain deepspeed loops run just "
        "before and after it in the same process (median, best)"
    )
    plain_us, det_us = statistics.median(plain) * 1e6, statistics.median(det) * 1e6
    ratio = statistics.median(ratios)
    print(f"{'runner':<8} {'us/step':>9} {'ratio':>8} {'+us':>7} {'best':>8}")
    print(f"{'plain':<8} {plain_us:>9.1f} {1.0:>7.3f}x")
    print(
        f"{'det':<8} {det_us:>9.1f} {ratio:>7.3f}x {(ratio - 1) * plain_us:>+7.1f} "
        f"{min(ratios):>7.3f}x"
    )


if __name__ == "__main__":
    main()
