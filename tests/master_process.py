"""``python -m determined.master up`` as a subprocess, for tests that kill or restart the master.

Tests import this module as ``master_process`` (the root pytest config puts tests/ on the path) or
get one from the root fixtures (``make_master(process=True)``). The master's output goes to a file
in its data dir (a pipe nobody reads would block it once full).
"""

from __future__ import annotations

import pathlib
import signal
import subprocess
import sys
import time
import urllib.parse

from running_master import LoginHelpers


class MasterProcess(LoginHelpers):
    """One master on a free port of 127.0.0.1; ``url`` is set once it serves."""

    def __init__(
        self,
        data_dir: pathlib.Path,
        *,
        slots: int | None = 2,
        db: str | None = None,
        env: dict[str, str] | None = None,
        start_timeout: float = 90.0,
        config_file: pathlib.Path | None = None,
    ) -> None:
        data_dir.mkdir(parents=True, exist_ok=True)
        self.data_dir = data_dir
        self._argv = [sys.executable, "-m", "determined.master", "up"]
        self._argv += ["--data-dir", str(data_dir)]
        if slots is not None:
            self._argv += ["--slots", str(slots)]
        if db is not None:
            self._argv += ["--db", db]
        if config_file is not None:  # the flags above win over the file's settings
            self._argv += ["--config-file", str(config_file)]
        self._env = env
        self._start_timeout = start_timeout
        self.url = ""
        self._launch(0)

    def _launch(self, port: int) -> None:
        self.log_path = self.data_dir / f"master-{time.monotonic_ns()}.out"
        self._log = open(self.log_path, "w")  # noqa: SIM115 (closed in stop/kill)
        argv = [*self._argv, "--port", str(port)]
        self.proc = subprocess.Popen(
            argv, stdout=self._log, stderr=subprocess.STDOUT, env=self._env
        )
        self.url = ""
        deadline = time.monotonic() + self._start_timeout
        while not self.url:
            text = self.log_path.read_text()
            for line in text.splitlines():
                if "det-master serving on" in line:
                    self.url = line.strip().rsplit(" ", 1)[1]
            if self.url:
                break
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise AssertionError(f"det-master did not start:\n{text}")
            time.sleep(0.05)

    @property
    def running(self) -> bool:
        """The process has not exited."""
        return self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL: the master gets no chance to clean up (a crash)."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        self._log.close()

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 30 s."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()

    def restart(self) -> None:
        """Stop (if running; after :meth:`kill` it is not), then start again on the same port."""
        port = urllib.parse.urlsplit(self.url).port or 0
        self.stop()
        self._launch(port)
