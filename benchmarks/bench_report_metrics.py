"""Cost of one ``core_context.train.report_training_metrics`` call on the trial side.

The trial's client points at a local fake master (a real HTTP server on a loopback port). Baseline, in
the same run: the same report sent synchronously with ``MasterClient.report_trial_metrics`` — what a
client without a background shipper pays per call. Prints the median per-call cost of both and the ratio.

    .venv/bin/python benchmarks/bench_report_metrics.py
"""

from __future__ import annotations

import statistics
import sys
import time

from _fake_master import FakeMaster

from determined.client import MasterClient, Session
from determined.core._tensorboard import TensorboardMode
from determined.core._train import TrainContext

CALLS = 20_000
SYNC_CALLS = 1_000


def main() -> int:
    master = FakeMaster()
    client = MasterClient(Session(master.url, "token", allocation_token=True))
    train = TrainContext(
        client,
        trial_id=1,
        run_id=1,
        exp_id=1,
        tensorboard_mode=TensorboardMode.MANUAL,
        tensorboard_path=__import__("pathlib").Path("/tmp/unused"),
    )
    train._start()
    metrics = {"loss": 0.25, "accuracy": 0.9, "lr": 1e-3}
    timer = time.perf_counter_ns
    samples = []
    for step in range(CALLS):
        start = timer()
        train.report_training_metrics(step, metrics)
        samples.append(timer() - start)
    train._close()
    assert master.reports == CALLS, (master.reports, CALLS)
    async_us = statistics.median(samples) / 1000
    p99_async = sorted(samples)[int(0.99 * len(samples))] / 1000

    sync = []
    for step in range(SYNC_CALLS):
        start = timer()
        client.report_trial_metrics(1, 1, "training", metrics, steps_completed=step)
        sync.append(timer() - start)
    sync_us = statistics.median(sync) / 1000
    master.close()

    print(
        f"report_training_metrics (async shipper): median {async_us:.2f} us, p99 {p99_async:.2f} us "
        f"over {CALLS} calls; {master.requests - SYNC_CALLS} HTTP requests carried {CALLS} reports"
    )
    print(
        f"baseline synchronous POST per report:    median {sync_us:.1f} us over {SYNC_CALLS} calls"
    )
    print(
        f"ratio baseline/det: {sync_us / async_us:.0f}x; target <= 20 us: "
        f"{'met' if async_us <= 20 else 'MISSED'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
