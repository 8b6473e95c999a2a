"""The local resource manager: allocations run as process groups on this machine.

The queue, the scheduling thread and signal delivery are :class:`ThreadedResourceManager`'s; this
class adds the slots of this machine (its GPUs, or CPU slots) and runs each launched allocation as a
:class:`ProcessGroup` (``_process``).
"""

from __future__ import annotations

import shlex
import signal
import threading
from collections.abc import Callable
from functools import partial
from typing import Any, Literal

from determined.master.rm._process import (
    ALLOCATION_ENV,
    BATCH_MAX_LINES,
    FLUSH_INTERVAL_S,
    ProcessGroup,
    reap_process_group,
)
from determined.master.rm._scheduler import DEFAULT_MAX_BYPASS, PriorityScheduler, Start
from determined.master.rm._slots import Gpu, cpu_slot_count, discover_gpus
from determined.master.rm._threaded import DEFAULT_POOL, ThreadedResourceManager
from determined.master.rm._types import AllocationRequest, Assignment, LaunchSpec

LOCAL_ADDRESS = "127.0.0.1"


class LocalResourceManager(ThreadedResourceManager):
    """Runs allocations as subprocess groups on this machine; its GPUs, or CPU slots, are the slots.

    Args:
        slots: number of slots. On GPUs: use the first ``slots`` GPUs (default all). On CPUs:
            the number of CPU slots (default: the CPUs this process may use). A CPU slot is a
            scheduling unit only; nothing pins the process.
        slot_type: ``"cuda"`` (this machine's NVIDIA GPUs, found with ``nvidia-smi -L``),
            ``"cpu"``, or ``"auto"`` (GPUs when there are any).
        max_bypass: the scheduler's backfilling bound (see ``_scheduler``).
        flush_interval: longest time (s) a log line waits before delivery.
        batch_lines: most lines per ``allocation_log`` call.
    """

    def __init__(
        self,
        slots: int | None = None,
        slot_type: Literal["auto", "cpu", "cuda"] = "auto",
        *,
        max_bypass: int = DEFAULT_MAX_BYPASS,
        flush_interval: float = FLUSH_INTERVAL_S,
        batch_lines: int = BATCH_MAX_LINES,
    ) -> None:
        if slot_type not in ("auto", "cpu", "cuda"):
            raise ValueError(f"slot_type must be 'auto', 'cpu' or 'cuda', got {slot_type!r}")
        if slots is not None and (
            not isinstance(slots, int) or isinstance(slots, bool) or slots < 0
        ):
            raise ValueError(f"slots must be an int >= 0 or None, got {slots!r}")
        super().__init__("local")
        gpus: list[Gpu] = discover_gpus() if slot_type in ("auto", "cuda") else []
        if slot_type == "cuda" and not gpus:
            raise ValueError("slot_type 'cuda': no NVIDIA GPU found (nvidia-smi -L lists none)")
        self._gpus: list[Gpu] = []
        if gpus:
            if slots is not None and slots > len(gpus):
                raise ValueError(
                    f"slots: {slots} asked for, but this machine has only {len(gpus)} GPUs"
                )
            self._gpus = gpus if slots is None else gpus[:slots]
            self._slot_type = "cuda"
            total = len(self._gpus)
        else:
            total = cpu_slot_count() if slots is None else slots
        self._flush_interval = flush_interval
        self._batch_lines = batch_lines
        self._scheduler = PriorityScheduler(total, max_bypass=max_bypass)
        self._schedulers[DEFAULT_POOL] = self._scheduler
        self._processes: dict[str, ProcessGroup] = {}

    # -------------------------------------------------------------------------------------------
    # requests and assignments

    def _check_request(self, request: AllocationRequest) -> None:
        if request.resource_pool != DEFAULT_POOL:
            raise ValueError(
                f"resource_pool: the local resource manager has only the pool 'default',"
                f" not {request.resource_pool!r}"
            )

    def _refusal(self, slots: int, resource_pool: str) -> str | None:
        if resource_pool != DEFAULT_POOL:
            return (
                f"resource_pool {resource_pool!r} does not exist: the local resource manager"
                " has one pool, 'default'"
            )
        total = self._scheduler.total_slots
        if slots > total:
            return f"slots_per_trial {slots} exceeds the {total} slots of this machine"
        return None

    def _on_start_locked(self, pool: str, start: Start) -> Callable[[], None]:
        """Assign at once: the slots are this machine's."""
        slot_ids = [self._slot_id(position) for position in start.slot_ids]
        gpu_uuids = [self._gpus[position].uuid for position in start.slot_ids] if self._gpus else []
        assignment = Assignment(
            allocation_id=start.request.allocation_id,
            slot_ids=slot_ids,
            container_addrs=[LOCAL_ADDRESS],
            container_slot_counts=[len(slot_ids)],
            gpu_uuids=gpu_uuids,
        )
        self._assigned_locked(assignment)
        return partial(self._notify, "allocation_assigned", start.request, assignment)

    def _slot_id(self, position: int) -> int:
        return self._gpus[position].index if self._gpus else position

    # -------------------------------------------------------------------------------------------
    # processes

    def _is_launched_locked(self, allocation_id: str) -> bool:
        return allocation_id in self._processes

    def _launch_locked(self, spec: LaunchSpec, assignment: Assignment) -> threading.Event:
        """Start the allocation's process group."""
        process = ProcessGroup(
            spec.allocation_id,
            self._cond,
            self._notify,
            flush_interval=self._flush_interval,
            batch_lines=self._batch_lines,
        )
        self._processes[spec.allocation_id] = process
        env = dict(spec.env)
        env.setdefault(ALLOCATION_ENV, spec.allocation_id)
        if self._slot_type == "cuda":
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in assignment.slot_ids)
            env.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")  # the order nvidia-smi uses
        argv = list(spec.argv)
        if spec.startup_hook:
            # Sourced, as upstream does, so variables the hook exports reach the trial.
            # ("./" keeps `.` from searching PATH for a bare file name.)
            hook = spec.startup_hook if "/" in spec.startup_hook else f"./{spec.startup_hook}"
            script = f". {shlex.quote(hook)} && exec {shlex.join(argv)}"
            argv = ["bash", "-c", script]
        process.start(argv, spec.cwd, env)
        return process.done

    def _signal_locked(self, allocation_id: str, signum: int) -> None:
        """``signum`` to the allocation's whole process group (children and grandchildren)."""
        process = self._processes.get(allocation_id)
        if process is not None:
            process.signal(signum)

    def _free_locked(self, allocation_id: str) -> None:
        process = self._processes.pop(allocation_id, None)
        if process is not None:
            process.signal(signal.SIGKILL)

    # -------------------------------------------------------------------------------------------
    # recovery, description

    def reap_orphan(self, pid: int, *, allocation_id: str | None = None) -> bool:
        """Kill process group ``pid`` if a member carries ``DET_ALLOCATION_ID`` (of ``allocation_id``).

        A previous master's trials keep running after it died; the new master calls this with
        the pids it recorded. A pid reused by an unrelated process lacks the marker and is left
        alone. Returns True when the group was killed.
        """
        return reap_process_group(pid, allocation_id)

    def describe(self) -> dict[str, Any]:
        """``{"type": "local", "slots", "slot_type", "used", "queued", "running", "gpus"}``."""
        with self._cond:
            return {
                "type": "local",
                "slots": self._scheduler.total_slots,
                "slot_type": self._slot_type,
                "used": self._scheduler.used_slots(),
                "queued": len(self._scheduler.queued()),
                "running": len(self._processes),
                "gpus": [{"index": g.index, "name": g.name, "uuid": g.uuid} for g in self._gpus],
            }
