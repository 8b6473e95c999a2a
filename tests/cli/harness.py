"""Helpers of the ``det`` CLI tests: the Core API test trial, its experiment config, running ``det``
in-process or as the installed script, and polling with a deadline."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import pytest

from determined.client import Session

DET = pathlib.Path(sys.executable).parent / "det"
DET_CLI = pathlib.Path(sys.executable).parent / "det-cli"
TERMINAL = ("STATE_COMPLETED", "STATE_CANCELED", "STATE_ERROR")

TRIAL = r"""
import pathlib
import time

import determined as det

info = det.get_cluster_info()
hp = info.trial.hparams
steps = int(hp.get("steps", 3))
print("[rank=0] starting trial", info.trial.trial_id, flush=True)
print("WARNING: a warning line", flush=True)
with det.core.init() as core:
    start = 0
    if info.latest_checkpoint:
        with core.checkpoint.restore_path(info.latest_checkpoint) as path:
            start = int((path / "step.txt").read_text())
    step = start
    while True:
        step += 1
        core.train.report_training_metrics(steps_completed=step, metrics={"loss": 1.0 / step})
        print(f"step {step}", flush=True)
        if hp.get("forever"):
            time.sleep(0.05)
            if core.preempt.should_preempt():
                with core.checkpoint.store_path({"steps_completed": step}) as (path, _):
                    (path / "step.txt").write_text(str(step))
                print("preempted", flush=True)
                break
            continue
        if step % 2 == 0 and step < steps:
            with core.checkpoint.store_path({"steps_completed": step}) as (path, _):
                (path / "step.txt").write_text(str(step))
        if step >= steps:
            break
    if not hp.get("forever"):
        value = float(hp.get("base", 1.0)) / step
        core.train.report_validation_metrics(
            steps_completed=step, metrics={"validation_loss": value}
        )
        with core.checkpoint.store_path({"steps_completed": step}) as (path, _):
            (path / "step.txt").write_text(str(step))
            (path / "weights.bin").write_bytes(b"0" * 64)
        print("trial done", flush=True)
"""


def experiment_config(**overrides: Any) -> dict[str, Any]:
    """A single-trial experiment running the Core API test trial."""
    config: dict[str, Any] = {
        "name": "cli-test",
        "entrypoint": "python3 train.py",
        "searcher": {"name": "single", "metric": "validation_loss", "smaller_is_better": True},
        "hyperparameters": {"steps": 4},
        "max_restarts": 0,
        "resources": {"slots_per_trial": 1},
    }
    config.update(overrides)
    return config


class Det:
    """Runs ``det`` against one master: in-process (``run``) or as the installed script (``sh``)."""

    def __init__(
        self, url: str, config_dir: pathlib.Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        self.url = url
        self.config_dir = config_dir
        self.capsys = capsys

    def run(self, *argv: str, input_text: str | None = None) -> tuple[int, str, str]:
        """``main(argv)`` in this process; returns (exit status, stdout, stderr)."""
        from determined.cli.__main__ import main

        self.capsys.readouterr()
        old_stdin = sys.stdin
        if input_text is not None:
            import io

            sys.stdin = io.StringIO(input_text)
        try:
            code = main(list(argv))
        finally:
            sys.stdin = old_stdin
        out, err = self.capsys.readouterr()
        return code, out, err

    def ok(self, *argv: str) -> str:
        code, out, err = self.run(*argv)
        assert code == 0, f"det {' '.join(argv)} failed ({code}): {err}\n{out}"
        return out

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update({"DET_MASTER": self.url, "DET_CONFIG_DIR": str(self.config_dir)})
        for name in ("DET_USER", "DET_PASS", "DET_USER_TOKEN"):
            env.pop(name, None)
        return env

    def sh(
        self, *argv: str, input_text: str | None = None, timeout: float = 120, script: Any = DET
    ) -> subprocess.CompletedProcess[str]:
        """The installed ``det`` script as a subprocess."""
        return subprocess.run(
            [str(script), *argv],
            capture_output=True,
            text=True,
            input=input_text if input_text is not None else "",
            env=self.env(),
            timeout=timeout,
        )


def wait_for(predicate: Callable[[], Any], what: str, timeout: float = 60.0) -> Any:
    """Poll ``predicate`` until it is truthy (AssertionError naming ``what`` on timeout)."""
    deadline = time.monotonic() + timeout
    delay = 0.02
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(delay)
        delay = min(delay * 1.5, 0.25)


def experiment_state(api: Session, experiment_id: int) -> str:
    return str(api.request("GET", f"/api/v1/experiments/{experiment_id}")["experiment"]["state"])


def wait_state(api: Session, experiment_id: int, *states: str, timeout: float = 60.0) -> str:
    wanted = states or TERMINAL
    return str(
        wait_for(
            lambda: (s := experiment_state(api, experiment_id)) in wanted and s,
            f"experiment {experiment_id} to reach {wanted}",
            timeout,
        )
    )


def created_id(output: str) -> int:
    """The id in ``Created experiment N``."""
    for line in output.splitlines():
        if line.startswith("Created experiment "):
            return int(line.split()[-1])
    raise AssertionError(f"no 'Created experiment' line in:\n{output}")
