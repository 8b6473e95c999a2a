"""The watchdog of tasks beyond trials: readiness, idle timeouts and kill deadlines.

One daemon thread looks at every live task a few times a second:
- a proxied task that runs but is not ready yet becomes ready once its port accepts a connection;
- a proxied task with an idle timeout that saw no request for that long is stopped (its exit
  status says so; a task that serves nothing has no traffic to measure, so no idle timeout);
- a task that was sent SIGTERM and still runs after the grace period gets SIGKILL.
Idle time counts from the later of the task's start and its last proxied request or WebSocket
message (``Tasks.touch``).
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from determined.master._core._task_runs import LiveTask, TaskRuns

logger = logging.getLogger("determined.master")

PERIOD_S = 0.25
"""How often the watchdog looks at the live tasks."""


def port_open(address: str, port: int, timeout: float = 0.2) -> bool:
    """Whether something accepts TCP connections on ``address:port``."""
    with contextlib.suppress(OSError), socket.create_connection((address, port), timeout=timeout):
        return True
    return False


class TaskWatchdog:
    """Checks the live tasks of a :class:`~determined.master._core._task_runs.TaskRuns` periodically."""

    def __init__(self, tasks: TaskRuns, period: float = PERIOD_S) -> None:
        self._tasks = tasks
        self._period = period
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="det-task-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(self._period):
            for task in self._tasks.live():
                try:
                    self.check(task, time.monotonic())
                except Exception:
                    logger.exception("master: watching task %s failed", task.task_id)

    def check(self, task: LiveTask, now: float) -> None:
        """Act on one task's readiness, idleness and kill deadline."""
        if task.exited:
            return
        if task.kill_at is not None and now >= task.kill_at:
            logger.info("master: task %s ignored SIGTERM; killing it", task.task_id)
            self._tasks.kill_now(task.task_id)
            return
        if not task.running or task.kill_reason is not None:
            return
        if task.proxied and not task.ready and task.port is not None:
            if port_open(task.address or "127.0.0.1", task.port):
                self._tasks.mark_ready(task.task_id)
            return
        idle = task.idle_timeout
        if task.proxied and idle is not None and now - task.last_activity > idle:
            seconds = f"{task.idle_timeout:g}"
            self._tasks.stop(task.task_id, f"killed after idle timeout of {seconds}s")
