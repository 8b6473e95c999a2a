"""Instant trials for the search-scale benchmarks: a resource manager whose "trials" speak the trial
protocol over HTTP and exit at once (process start-up is not what is measured).

``InstantResourceManager`` (type ``instant``) is det's local RM, except that a launched trial is a
short HTTP client: it asks ``GET .../searcher/operation`` with its allocation token, posts
``.../searcher/completed_operation`` with the loss of its learning rate at that length until the
searcher says it is done, as det's client does, and exits with code 0. Each trial opens its own
connection, as a trial process would.

Where the clients run (``clients``):

- ``"process"`` (the default): in one child process with a thread per running trial, so the
  master's process does only the master's work, as with real trial processes;
- ``"thread"``: as threads of the master's own process, the trials' CPU measured with
  ``time.thread_time`` for the caller to subtract. The benchmarks measured this way until
  2026-12-02; it over-charges the master: 16 client threads contend for its GIL, which their own
  thread time does not count (benchmarks/RESULTS.md, twenty-fifth session).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import threading
import time
import types
from typing import Any

Job = tuple[str, str, str, str, str]
"""What a trial needs: (allocation id, master URL, trial id, allocation token, ``DET_HPARAMS``).
The trial decodes its hyperparameters itself, as a trial process does: the master's process only
passes the launch spec's string on."""


def loss(lr: float, batches: int) -> float:
    """A learning curve: the best lr is 1e-3, longer training helps."""
    return (math.log10(lr) + 3.0) ** 2 + 10.0 / batches


def run_trial(job: Job) -> int:
    """One instant trial: its operations until the searcher is done with it; its exit code."""
    import requests

    _, master, trial_id, token, hparams = job
    lr = float(json.loads(hparams)["lr"])
    base = f"{master.rstrip('/')}/api/v1/trials/{trial_id}"
    # the allocation token in its own header, as det's and upstream's trials send it
    headers = {"Grpc-Metadata-x-allocation-token": f"Bearer {token}"}
    try:
        with requests.Session() as http:
            answer = http.get(f"{base}/searcher/operation", headers=headers).json()
            while not answer.get("completed"):
                length = int(answer["op"]["validateAfter"]["length"])
                body = {"op": {"length": length}, "searcherMetric": loss(lr, length)}
                completed = http.post(
                    f"{base}/searcher/completed_operation", json=body, headers=headers
                )
                completed.raise_for_status()
                answer = completed.json().get("nextOperation") or (
                    http.get(f"{base}/searcher/operation", headers=headers).json()
                )
    except Exception as e:  # the trial "crashes"
        print("instant trial failed:", e, file=sys.stderr)
        return 1
    return 0


def _client_main() -> None:
    """The client process: a job per line of stdin (JSON), a thread per job; a line
    ``[allocation id, exit code]`` on stdout when it ends; end of input ends it."""
    lock = threading.Lock()

    def one(job: Job) -> None:
        code = run_trial(job)
        with lock:
            sys.stdout.write(json.dumps([job[0], code]) + "\n")
            sys.stdout.flush()

    for line in sys.stdin:
        job = tuple(json.loads(line))
        threading.Thread(target=one, args=(job,), daemon=True).start()


def plugin() -> types.ModuleType:
    """A plugin module whose ``det_resource_manager`` answers ``{"type": "instant", "slots": N,
    "clients": "process" | "thread"}``."""
    from determined.core.plugins import hookimpl
    from determined.master.rm import LocalResourceManager

    class InstantResourceManager(LocalResourceManager):
        """The local RM, but a launched trial is an instant HTTP client (module docstring)."""

        def __init__(self, slots: int, clients: str) -> None:
            super().__init__(slots=slots, slot_type="cpu")
            self._done: dict[str, threading.Event] = {}
            self.client_cpu = 0.0
            """CPU seconds the trials spent in this process (``thread`` clients), to subtract."""
            self._lock = threading.Lock()
            self.exited = 0
            """Trials that ended (the progress the end-to-end run samples its CPU against)."""
            self._child: subprocess.Popen[str] | None = None
            if clients == "process":
                self._child = subprocess.Popen(
                    [sys.executable, __file__],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    text=True,
                    bufsize=1,
                )
                threading.Thread(target=self._receive, daemon=True).start()

        def _is_launched_locked(self, allocation_id: str) -> bool:
            return allocation_id in self._done

        def _launch_locked(self, spec: Any, assignment: Any) -> threading.Event:
            done = threading.Event()
            self._done[spec.allocation_id] = done
            env = spec.env
            job = (
                spec.allocation_id,
                env["DET_MASTER"],
                env["DET_TRIAL_ID"],
                env["DET_SESSION_TOKEN"],
                env["DET_HPARAMS"],
            )
            self._notify("allocation_started", spec.allocation_id, 0)
            if self._child is not None:
                assert self._child.stdin is not None
                with self._lock:
                    self._child.stdin.write(json.dumps(job) + "\n")
            else:
                threading.Thread(target=self._in_thread, args=(job,), daemon=True).start()
            return done

        def _in_thread(self, job: Job) -> None:
            cpu0 = time.thread_time()
            code = run_trial(job)
            self._ended(job[0], code, time.thread_time() - cpu0)

        def _receive(self) -> None:
            assert self._child is not None and self._child.stdout is not None
            for line in self._child.stdout:
                allocation_id, code = json.loads(line)
                self._ended(allocation_id, code, 0.0)  # nothing of it ran in this process

        def _ended(self, allocation_id: str, code: int, client_cpu: float) -> None:
            with self._lock:
                self.client_cpu += client_cpu
                self.exited += 1
            self._notify("allocation_exited", allocation_id, code, None)
            with self._cond:
                done = self._done.get(allocation_id)
            if done is not None:
                done.set()

        def _signal_locked(self, allocation_id: str, signum: int) -> None:
            pass  # an instant trial ends on its own

        def _free_locked(self, allocation_id: str) -> None:
            self._done.pop(allocation_id, None)

        def close(self, timeout: float = 10.0) -> None:
            super().close(timeout)
            if self._child is not None:
                assert self._child.stdin is not None
                with self._lock:
                    self._child.stdin.close()
                self._child.wait(timeout=10)

    module = types.ModuleType("bench_instant_rm")

    @hookimpl
    def det_resource_manager(config: dict[str, Any]) -> Any:
        if config.get("type") != "instant":
            return None
        return InstantResourceManager(
            int(config.get("slots", 8)), str(config.get("clients", "process"))
        )

    module.det_resource_manager = det_resource_manager  # type: ignore[attr-defined]
    return module


if __name__ == "__main__":
    _client_main()
