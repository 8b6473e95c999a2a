"""``det experiment create --local``: a throw-away det master on this machine for one command.

Upstream's ``--local --test`` ran a Trial class in the CLI's own process. det's local mode runs any
entrypoint (scripts, Trial classes, launchers) here the way a master does: the CLI starts det-master
(``python -m determined.master up``) on a free loopback port with a temporary data directory, the
local resource manager runs the entrypoint on this machine with a real ClusterInfo, and the master
stops when the command ends. It needs the det-master distribution in the CLI's environment.
"""

from __future__ import annotations

import contextlib
import importlib.util
import pathlib
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator

from determined import client
from determined.cli._errors import CliError

START_TIMEOUT = 120.0
SERVING = "det-master serving on "


@contextlib.contextmanager
def local_master() -> Iterator[client.Session]:
    """A logged-in session to a det master started for this command; stopped on exit.

    Raises:
        CliError: det-master is not installed, or it did not start (with its output).
    """
    if importlib.util.find_spec("determined.master") is None:
        raise CliError(
            "--local starts a det master on this machine and needs the det-master distribution: "
            "pip install det-master"
        )
    with tempfile.TemporaryDirectory(prefix="det-local-") as tmp:
        data_dir = pathlib.Path(tmp)
        log_path = data_dir / "master.log"
        argv = [sys.executable, "-m", "determined.master", "up", "--host", "127.0.0.1"]
        argv += ["--port", "0", "--data-dir", str(data_dir / "master")]
        with open(log_path, "w") as log:
            proc = subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        try:
            url = _wait_serving(proc, log_path)
            print(f"Started a local det master at {url} for this command")
            sys.stdout.flush()
            store = client.TokenStore(data_dir / "auth.json")
            yield client.login(url, "determined", "", store=store)
        finally:
            _stop(proc)


def _wait_serving(proc: subprocess.Popen[bytes], log_path: pathlib.Path) -> str:
    deadline = time.monotonic() + START_TIMEOUT
    delay = 0.05
    while True:
        text = log_path.read_text(errors="replace")
        for line in text.splitlines():
            if SERVING in line:
                return line.split(SERVING, 1)[1].strip().split()[0]
        if proc.poll() is not None or time.monotonic() > deadline:
            raise CliError(f"the local det master did not start:\n{text[-4000:]}")
        time.sleep(delay)
        delay = min(delay * 1.5, 0.5)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM (the master stops its trials), then SIGKILL if it lingers."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
