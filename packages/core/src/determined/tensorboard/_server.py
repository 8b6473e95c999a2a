"""Run TensorBoard over a synced log directory: the process behind ``python -m determined.tensorboard``.

The files are synced once before TensorBoard starts (so its first load already sees every trial),
then on a thread while it runs. TensorBoard serves under the proxy's path prefix; the line
:data:`READY_MESSAGE` is printed once it answers HTTP.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from types import FrameType

from determined.tensorboard._sync import EventSync, Source

logger = logging.getLogger("determined.tensorboard")

READY_MESSAGE = "TensorBoard is serving"
"""Printed (with the URL) once TensorBoard answers HTTP."""


def tensorboard_command(
    logdir: str | os.PathLike[str],
    port: int,
    path_prefix: str = "",
    host: str = "127.0.0.1",
    reload_interval: float | None = None,
    extra_args: Sequence[str] = (),
) -> list[str]:
    """The ``tensorboard`` command line (run by this interpreter, so the same environment)."""
    command = [
        sys.executable,
        "-m",
        "determined.tensorboard._tensorboard_main",
        f"--logdir={os.fspath(logdir)}",
        f"--port={port}",
        f"--host={host}",
    ]
    if path_prefix:
        command.append(f"--path_prefix={'/' + path_prefix.strip('/')}")
    if reload_interval is not None:
        command.append(f"--reload_interval={reload_interval:g}")
    return command + list(extra_args)


def wait_responsive(
    url: str, process: subprocess.Popen[bytes], timeout: float = 120.0, poll: float = 0.1
) -> None:
    """Block until ``url`` answers 200; RuntimeError if TensorBoard exits or the timeout passes."""
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"TensorBoard exited with status {process.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=5) as answer:
                if answer.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"TensorBoard did not answer on {url} within {timeout:g} s")
        time.sleep(poll)


def serve(
    sources: Sequence[Source],
    *,
    port: int,
    path_prefix: str = "",
    host: str = "127.0.0.1",
    logdir: str | os.PathLike[str] | None = None,
    interval: float = 5.0,
    extra_args: Sequence[str] = (),
) -> int:
    """Sync ``sources`` into ``logdir`` (a temporary directory by default), run TensorBoard on it
    and keep syncing until TensorBoard exits or this process gets SIGTERM/SIGINT.

    Returns:
        TensorBoard's exit status (0 after a signal).
    """
    with tempfile.TemporaryDirectory(prefix="det-tensorboard-") as scratch:
        target = os.fspath(logdir) if logdir is not None else scratch
        events = EventSync(sources, target, interval=interval)
        started = time.monotonic()
        fetched = events.sync()
        logger.info(
            "tensorboard: %d files of %d sources synced in %.2f s",
            fetched,
            len(sources),
            time.monotonic() - started,
        )
        command = tensorboard_command(
            target, port, path_prefix, host, reload_interval=interval, extra_args=extra_args
        )
        process = subprocess.Popen(command)
        stopping = False

        def on_signal(signum: int, _frame: FrameType | None) -> None:
            nonlocal stopping
            stopping = True
            if process.poll() is None:
                process.terminate()

        previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            shown_host = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
            url = (
                f"http://{shown_host}:{port}{'/' + path_prefix.strip('/') if path_prefix else ''}/"
            )
            wait_responsive(url, process)
            print(f"{READY_MESSAGE} at {url}", flush=True)
            events.start()
            status = process.wait()
            return 0 if stopping else status
        finally:
            events.stop()
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
