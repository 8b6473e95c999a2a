"""A batch job for the torch_batch_process tests: each rank records what it processes.

``python3 batch_job.py OUT ITEMS BATCH_SIZE CHECKPOINT_INTERVAL [HOLD_AT]``

- every ``process_batch`` call appends ``<pid> <batch_idx> <item ids>`` to ``OUT/calls-rank<r>.txt``;
- ``on_checkpoint_start`` writes the item ids processed since the last checkpoint to
  ``OUT/items-rank<r>-pid<pid>-<n>.json`` (what a real job would upload), and through
  ``upload_path()`` into the checkpoint storage;
- with HOLD_AT, the rank prints ``holding at batch HOLD_AT`` and waits there until ``OUT/release``
  exists, so a test can kill the job at a known point;
- a reducer counts the items of all ranks (reported as the validation metric ``items``).
"""

from __future__ import annotations

import json
import os
import pathlib
import sys
import time

import torch

from determined.pytorch import experimental


class Items(torch.utils.data.Dataset):  # type: ignore[type-arg]
    def __init__(self, count: int) -> None:
        self.count = count

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, index: int) -> torch.Tensor:
        return torch.tensor(index)


OUT = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else pathlib.Path(".")
HOLD_AT = int(sys.argv[5]) if len(sys.argv) > 5 else -1


class Recorder(experimental.TorchBatchProcessor):
    def __init__(self, context: experimental.TorchBatchProcessorContext) -> None:
        self.context = context
        self.rank = context.get_distributed_rank()
        self.pending: list[int] = []
        self.flushes = 0
        self.count = context.wrap_reducer(sum, name="items")
        self.calls = OUT / f"calls-rank{self.rank}.txt"
        (OUT / f"pid-rank{self.rank}").write_text(str(os.getpid()))
        print(
            f"processor rank {self.rank} of {context.get_distributed_size()} on {context.device}",
            flush=True,
        )

    def process_batch(self, batch: torch.Tensor, batch_idx: int) -> None:
        ids = [int(i) for i in self.context.to_device(batch).tolist()]
        with self.calls.open("a") as calls:
            calls.write(f"{os.getpid()} {batch_idx} {json.dumps(ids)}\n")
        self.pending.extend(ids)
        self.count.update(len(ids))
        if batch_idx == HOLD_AT and not (OUT / "release").exists():
            print(f"holding at batch {batch_idx}", flush=True)
            while not (OUT / "release").exists():
                time.sleep(0.05)

    def on_checkpoint_start(self) -> None:
        if not self.pending:
            return
        self.flushes += 1
        name = f"items-rank{self.rank}-pid{os.getpid()}-{self.flushes}.json"
        (OUT / name).write_text(json.dumps(self.pending))
        with self.context.upload_path() as path:
            (path / name).write_text(json.dumps(self.pending))
        self.pending = []

    def on_finish(self) -> None:
        (OUT / f"finished-rank{self.rank}").write_text(str(os.getpid()))


if __name__ == "__main__":
    items, batch_size, interval = (int(arg) for arg in sys.argv[2:5])
    experimental.torch_batch_process(
        Recorder, Items(items), batch_size=batch_size, checkpoint_interval=interval
    )
