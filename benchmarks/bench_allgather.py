"""Median round trip of ``DistributedContext.allgather`` of a small object, 4 ranks on one machine.

Measures det's allgather with the ranks as threads of one process and as separate processes, and, in
the same run, the baseline torch.distributed gloo ``all_gather_object`` with 4 processes.

Run: ``.venv/bin/python benchmarks/bench_allgather.py [--iterations N]``
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time

RANKS = 4
PAYLOAD = {"step": 123, "metric": 0.5, "name": "small"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def det_rank(rank: int, port: int, iterations: int) -> float:
    from determined.core._distributed import DistributedContext

    context = DistributedContext(
        rank=rank, size=RANKS, local_rank=rank, local_size=RANKS, cross_rank=0, cross_size=1,
        pub_port=port, timeout=120,
    )  # fmt: skip
    with context:
        for _ in range(50):  # warm up
            context.allgather(PAYLOAD)
        times = []
        for _ in range(iterations):
            start = time.perf_counter()
            context.allgather(PAYLOAD)
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def gloo_rank(rank: int, port: int, iterations: int) -> float:
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=RANKS)
    out: list[object] = [None] * RANKS
    for _ in range(50):
        dist.all_gather_object(out, PAYLOAD)
    times = []
    for _ in range(iterations):
        start = time.perf_counter()
        dist.all_gather_object(out, PAYLOAD)
        times.append(time.perf_counter() - start)
    dist.destroy_process_group()
    return statistics.median(times)


def in_threads(iterations: int) -> float:
    port = free_port()
    results: list[float] = [0.0] * RANKS

    def run(rank: int) -> None:
        results[rank] = det_rank(rank, port, iterations)

    threads = [threading.Thread(target=run, args=(r,)) for r in range(RANKS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results[0]


def in_processes(kind: str, iterations: int) -> float:
    port = free_port()
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, "--worker", kind, str(r), str(port), str(iterations)],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for r in range(RANKS)
    ]
    medians = [json.loads(proc.communicate(timeout=600)[0]) for proc in procs]
    return float(medians[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--worker", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        kind, rank, port, iterations = args.worker
        fn = det_rank if kind == "det" else gloo_rank
        print(json.dumps(fn(int(rank), int(port), int(iterations))))
        return
    threads = in_threads(args.iterations)
    processes = in_processes("det", args.iterations)
    gloo = in_processes("gloo", args.iterations)
    print(f"allgather of a small dict, {RANKS} ranks, median of {args.iterations} (rank 0):")
    print(f"  det threads          {threads * 1e6:8.1f} us")
    print(f"  det processes        {processes * 1e6:8.1f} us")
    print(f"  gloo all_gather_object processes (baseline) {gloo * 1e6:8.1f} us")
    print(f"  ratio det processes / gloo: {processes / gloo:.2f}")


if __name__ == "__main__":
    main()
