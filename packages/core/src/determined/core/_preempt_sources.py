"""Where preemption signals come from: SIGTERM, and the master's long-poll (built-in plugin).

A source calls ``on_preempt()`` once it decides the process should stop. The master's long-poll carries
every reason the master has: a pause, a graceful kill, and a searcher that stopped the trial (upstream
Determined never told a running trial about the last one).
"""

from __future__ import annotations

import abc
import logging
import signal
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from determined.core._markers import hookimpl

if TYPE_CHECKING:
    from determined import ClusterInfo
    from determined.client import MasterClient

logger = logging.getLogger("determined.core")


class PreemptionSource(abc.ABC):
    """One source of "please stop now" signals, watched by a PreemptContext."""

    @abc.abstractmethod
    def start(self, on_preempt: Callable[[], None]) -> None:
        """Begin watching; call ``on_preempt`` (from any thread) when the process should stop."""

    def wait_ready(self, timeout: float | None = None) -> None:  # noqa: B027 - optional hook
        """Block until the source's first answer is known (e.g. the master's first poll)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Stop watching. Must not block for long."""


class _SigtermHandlers:
    """One process-wide SIGTERM handler that fans out to every active SigtermSource."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[], None]] = []
        self._previous: Any = None
        self._installed = False

    def add(self, callback: Callable[[], None]) -> bool:
        with self._lock:
            if not self._installed:
                if threading.current_thread() is not threading.main_thread():
                    return False  # signal handlers can only be installed from the main thread
                self._previous = signal.signal(signal.SIGTERM, self._handle)
                self._installed = True
            self._callbacks.append(callback)
            return True

    def remove(self, callback: Callable[[], None]) -> None:
        with self._lock:
            if callback in self._callbacks:
                self._callbacks.remove(callback)
            if (
                not self._callbacks
                and self._installed
                and threading.current_thread() is threading.main_thread()
            ):
                signal.signal(signal.SIGTERM, self._previous or signal.SIG_DFL)
                self._installed = False

    def _handle(self, signum: int, frame: Any) -> None:
        logger.warning("SIGTERM received: asking the trial to stop at its next preemption check")
        for callback in list(self._callbacks):
            callback()
        previous = self._previous
        if callable(previous):
            previous(signum, frame)


_sigterm = _SigtermHandlers()


class SigtermSource(PreemptionSource):
    """Fires when the process gets SIGTERM (what schedulers, Ray and ``kill`` send)."""

    def __init__(self) -> None:
        self._callback: Callable[[], None] | None = None

    def start(self, on_preempt: Callable[[], None]) -> None:
        if _sigterm.add(on_preempt):
            self._callback = on_preempt
        else:
            logger.debug(
                "not in the main thread: SIGTERM preemption is not watched by this context"
            )

    def close(self) -> None:
        if self._callback is not None:
            _sigterm.remove(self._callback)
            self._callback = None


class MasterPreemptionSource(PreemptionSource):
    """Long-polls the master's preemption signal (``MasterClient.get_preemption_signal``) from a
    daemon thread."""

    def __init__(self, client: MasterClient, allocation_id: str, poll_seconds: int = 60) -> None:
        self._client = client
        self._allocation_id = allocation_id
        self._poll_seconds = poll_seconds
        self._ready = threading.Event()
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, on_preempt: Callable[[], None]) -> None:
        self._thread = threading.Thread(
            target=self._watch, args=(on_preempt,), name="det-preemption-watcher", daemon=True
        )
        self._thread.start()

    def _watch(self, on_preempt: Callable[[], None]) -> None:
        timeout = 0
        while not self._closed.is_set():
            try:
                preempt = self._client.get_preemption_signal(self._allocation_id, timeout)
            except Exception as exc:  # the master may be restarting: keep watching
                if not self._ready.is_set():
                    logger.warning("preemption check failed, assuming no preemption: %s", exc)
                    self._ready.set()
                else:
                    logger.warning("preemption long-poll failed, retrying: %s", exc)
                self._closed.wait(1.0)
                continue
            self._ready.set()
            if preempt:
                on_preempt()
                return
            timeout = self._poll_seconds

    def wait_ready(self, timeout: float | None = None) -> None:
        self._ready.wait(timeout)

    def close(self) -> None:
        self._closed.set()


@hookimpl(trylast=True)
def det_preemption_sources(cluster_info: ClusterInfo | None) -> list[PreemptionSource]:
    sources: list[PreemptionSource] = [SigtermSource()]
    if cluster_info is not None and cluster_info.task_type == "TRIAL":
        from determined.client import MasterClient, Session

        session = Session(
            cluster_info.master_url,
            cluster_info.session_token,
            allocation_token=True,
            cert=_cert(cluster_info),
        )
        sources.append(MasterPreemptionSource(MasterClient(session), cluster_info.allocation_id))
    return sources


def _cert(cluster_info: ClusterInfo) -> str | bool | None:
    if cluster_info.master_cert_file == "noverify":
        return False
    return cluster_info.master_cert_file
