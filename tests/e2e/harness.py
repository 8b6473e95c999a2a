"""The end-to-end harness: a logged-in HTTP client for a real det master."""

from __future__ import annotations

import os
import pathlib
import time
from collections.abc import Callable
from typing import Any

import yaml

from determined.client import Session, read_context_dir
from determined.master._core._trial_exits import UNSENT_SIGKILL

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
TERMINAL = {"STATE_COMPLETED", "STATE_CANCELED", "STATE_ERROR", "STATE_DELETED"}


class MasterAPI:
    """A logged-in HTTP session to a master, with the few calls the end-to-end tests need."""

    def __init__(self, url: str, username: str = "determined", password: str = "") -> None:
        self.url = url
        session = Session(url)
        token = session.request(
            "POST", "/api/v1/auth/login", body={"username": username, "password": password}
        )["token"]
        self.session = Session(url, token)

    def get(self, path: str, **params: Any) -> Any:
        return self.session.request("GET", path, params=params or None)

    def post(self, path: str, body: Any = None) -> Any:
        return self.session.request("POST", path, body=body if body is not None else {})

    def create_experiment(
        self,
        config: str | pathlib.Path | dict[str, Any],
        context_dir: pathlib.Path,
        *,
        overrides: dict[str, Any] | None = None,
        activate: bool = True,
    ) -> int:
        if isinstance(config, pathlib.Path):
            config = config.read_text()
        parsed = yaml.safe_load(config) if isinstance(config, str) else dict(config)
        for key, value in (overrides or {}).items():
            parsed[key] = value
        body = {
            "config": yaml.safe_dump(parsed),
            "modelDefinition": read_context_dir(context_dir),
            "activate": activate,
        }
        return int(self.post("/api/v1/experiments", body)["experiment"]["id"])

    def experiment(self, experiment_id: int) -> dict[str, Any]:
        return self.get(f"/api/v1/experiments/{experiment_id}")["experiment"]

    def trials(self, experiment_id: int) -> list[dict[str, Any]]:
        return self.get(f"/api/v1/experiments/{experiment_id}/trials")["trials"]

    def wait_for(self, predicate: Callable[[], Any], timeout: float = 60, what: str = "") -> Any:
        deadline = time.monotonic() + timeout
        delay = 0.02
        while True:
            value = predicate()
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out after {timeout}s waiting for {what or predicate}")
            time.sleep(delay)
            delay = min(delay * 1.5, 0.25)

    def wait_experiment(
        self, experiment_id: int, states: set[str] | None = None, timeout: float = 120
    ) -> str:
        states = states or TERMINAL

        def state() -> str | None:
            current = self.experiment(experiment_id)["state"]
            return current if current in states else None

        try:
            return str(self.wait_for(state, timeout, f"experiment {experiment_id} in {states}"))
        except TimeoutError:
            raise TimeoutError(self.debug(experiment_id)) from None

    def log_entries(self, trial_id: int) -> list[dict[str, Any]]:
        return list(self.session.stream(f"/api/v1/trials/{trial_id}/logs"))

    def logs(self, trial_id: int) -> list[str]:
        return [str(e.get("log") or e.get("message") or "") for e in self.log_entries(trial_id)]

    def wait_exited(self, trial_id: int, timeout: float = 120) -> None:
        """Wait until the master logged that the trial's process exited with code 0. A pause
        marks the trial PAUSED at once; its process checkpoints and exits after that, so read a
        paused trial's checkpoints only once this returns."""
        self.wait_for(
            lambda: any("exited with code 0" in text for text in self.logs(trial_id)),
            timeout,
            f"trial {trial_id} to exit with code 0",
        )

    def metrics(self, trial_id: int, group: str) -> list[dict[str, Any]]:
        chunks = self.session.stream(
            "/api/v1/trials/metrics/trial_metrics", params={"trialIds": trial_id, "group": group}
        )
        return [report for chunk in chunks for report in chunk["metrics"]]

    @staticmethod
    def steps(reports: list[dict[str, Any]]) -> list[int]:
        return [int(r["totalBatches"]) for r in reports]

    @staticmethod
    def values(report: dict[str, Any]) -> dict[str, Any]:
        """The averaged metrics of one report (upstream's Struct keeps them under ``avg_metrics``)."""
        return dict(report["metrics"]["avg_metrics"])

    def debug(self, experiment_id: int) -> str:
        """Everything useful when an end-to-end test times out (and, when a trial was killed
        from outside, this machine's memory: the out-of-memory killer is the usual sender)."""
        out = [f"experiment {experiment_id}: {self.experiment(experiment_id)['state']}"]
        for trial in self.trials(experiment_id):
            out.append(f"trial {trial['id']}: {trial['state']} restarts={trial.get('restarts')}")
            out.extend("  " + line.rstrip() for line in self.logs(trial["id"])[-40:])
        if any(UNSENT_SIGKILL in line for line in out):
            out.append(memory_picture())
        return "\n".join(out)


def memory_picture(top: int = 8) -> str:
    """This machine's available memory and its largest processes by resident size."""
    fields = pathlib.Path("/proc/meminfo").read_text(encoding="ascii").splitlines()
    meminfo = {line.split(":")[0]: line.split()[1] for line in fields}
    sizes = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/statm", encoding="ascii") as f:
                pages = int(f.read().split()[1])
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                command = f.read().replace(b"\0", b" ")[:100].decode(errors="replace")
        except (OSError, ValueError, IndexError):
            continue
        sizes.append((pages * os.sysconf("SC_PAGE_SIZE") >> 20, pid, command))
    lines = [
        f"memory: {int(meminfo['MemAvailable']) >> 10} MiB available of "
        f"{int(meminfo['MemTotal']) >> 10} MiB; largest processes (MiB):"
    ]
    lines += [f"  {mib:6d} {pid} {command}" for mib, pid, command in sorted(sizes)[::-1][:top]]
    return "\n".join(lines)
