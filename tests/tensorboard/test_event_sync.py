"""determined.tensorboard without a master: syncing trials' event files out of checkpoint storage
(local and S3 through a real moto server) and serving them with a real TensorBoard process."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import time
import urllib.request
from typing import Any

import pytest
from tb_testing import S3Server, write_scalars

from determined import storage
from determined.core import plugins
from determined.tensorboard import EventSync, Source, trial_storage_path


def _stage(root: pathlib.Path, exp_id: int, trial_id: int, tag: str, values: list[float]) -> None:
    directory = root / trial_storage_path(exp_id, trial_id)
    directory.mkdir(parents=True, exist_ok=True)
    write_scalars(directory, tag, values)


def _tree(root: pathlib.Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.name.startswith(".")
    }


def test_local_storage_one_run_per_trial_and_only_new_bytes(tmp_path: pathlib.Path) -> None:
    store = tmp_path / "store"
    _stage(store, 3, 7, "loss", [1.0, 0.5])
    _stage(store, 3, 8, "loss", [2.0])
    _stage(store, 4, 9, "acc", [0.1])
    config = {"type": "shared_fs", "host_path": str(store)}
    logdir = tmp_path / "logdir"
    events = EventSync([Source(3, config), Source(4, config, trial_ids=(9,))], logdir)
    assert events.sync() == 3
    layout = _tree(logdir)
    assert sorted(p.split("/")[0] for p in layout) == ["trial_7", "trial_8", "trial_9"]
    assert events.sync() == 0  # nothing changed

    # A trial's upload grows the same file (its writer appended): only the new bytes come over.
    (remote,) = (store / trial_storage_path(3, 7)).iterdir()
    local = logdir / "trial_7" / remote.name
    before = local.stat().st_ino
    remote.write_bytes(remote.read_bytes() + b"appended")
    assert events.sync() == 1
    assert local.read_bytes() == remote.read_bytes() and local.stat().st_ino == before

    # Any other file that changed is replaced whole (a rewritten config is not an append).
    config_file = store / trial_storage_path(3, 7) / "projector_config.pbtxt"
    config_file.write_bytes(b"a")
    assert events.sync() == 1
    config_file.write_bytes(b"bc")
    assert events.sync() == 1
    assert (logdir / "trial_7" / "projector_config.pbtxt").read_bytes() == b"bc"

    # A trial that appears later (the experiment was named whole) shows up on the next pass; a
    # trial of an experiment named by trial ids does not unless named.
    _stage(store, 3, 10, "loss", [3.0])
    _stage(store, 4, 11, "acc", [0.2])
    assert events.sync() == 1
    assert (logdir / "trial_10").is_dir() and not (logdir / "trial_11").exists()


def test_nothing_uploaded_yet_and_unreachable_storage_do_not_stop_the_others(
    tmp_path: pathlib.Path,
) -> None:
    store = tmp_path / "store"
    _stage(store, 1, 1, "loss", [1.0])
    good = {"type": "shared_fs", "host_path": str(store)}
    missing = {"type": "shared_fs", "host_path": str(tmp_path / "empty")}
    broken = {"type": "no-such-storage"}
    events = EventSync([Source(2, missing), Source(5, broken), Source(1, good)], tmp_path / "out")
    assert events.sync() == 1
    assert (tmp_path / "out" / "trial_1").is_dir()


def test_s3_storage_through_moto(tmp_path: pathlib.Path, s3_server: S3Server) -> None:
    config = s3_server.storage_config("sync-test")
    manager = plugins.checkpoint_storage(config)
    staging = tmp_path / "staging"
    _stage(staging, 5, 12, "loss", [1.0, 0.9, 0.8])
    _stage(staging, 5, 13, "loss", [1.5])
    for trial_id in (12, 13):
        manager.upload(staging / trial_storage_path(5, trial_id), trial_storage_path(5, trial_id))
    events = EventSync([Source(5, config)], tmp_path / "logdir")
    assert events.sync() == 2
    mirrored = _tree(tmp_path / "logdir")
    expected = {
        f"trial_{t}/{p.name}": p.read_bytes()
        for t in (12, 13)
        for p in (staging / trial_storage_path(5, t)).iterdir()
    }
    assert mirrored == expected

    # grown on S3: a ranged read of the tail, appended in place
    (remote_file,) = (staging / trial_storage_path(5, 12)).iterdir()
    remote_file.write_bytes(remote_file.read_bytes() + b"tail")
    manager.upload(staging / trial_storage_path(5, 12), trial_storage_path(5, 12))
    assert events.sync() == 1
    assert (tmp_path / "logdir" / "trial_12" / remote_file.name).read_bytes().endswith(b"tail")
    assert isinstance(manager, storage.FsspecStorageManager)


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as answer:
        return json.loads(answer.read())


def _wait(predicate: Any, timeout: float, what: str, process: subprocess.Popen[str]) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            raise AssertionError(f"TensorBoard exited ({process.returncode}) waiting for {what}")
        try:
            value = predicate()
        except OSError:
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


@pytest.mark.slow
def test_serve_under_a_path_prefix_and_pick_up_new_trials(tmp_path: pathlib.Path) -> None:
    store = tmp_path / "store"
    _stage(store, 2, 21, "Determined/loss", [4.0, 2.0, 1.0])
    port = plugins.free_ports(1)[0]
    spec = tmp_path / "spec.json"
    source = Source(2, {"type": "shared_fs", "host_path": str(store)})
    spec.write_text(json.dumps({"sources": [source.to_json()]}))
    process = subprocess.Popen(
        [sys.executable, "-m", "determined.tensorboard", "--spec", str(spec), "--port", str(port),
         "--path-prefix", "/proxy/abc", "--interval", "0.5"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    try:
        base = f"http://127.0.0.1:{port}/proxy/abc/data/plugin/scalars"
        tags = _wait(lambda: _get(f"{base}/tags"), 120, "the scalar tags", process)
        assert tags == {"trial_21": {"Determined/loss": {"displayName": "", "description": ""}}}
        points = _get(f"{base}/scalars?run=trial_21&tag=Determined/loss")
        assert [(step, value) for _, step, value in points] == [(0, 4.0), (1, 2.0), (2, 1.0)]

        _stage(store, 2, 22, "Determined/loss", [9.0])  # a trial that started later
        _wait(lambda: "trial_22" in _get(f"{base}/tags"), 60, "the new trial", process)
    finally:
        process.terminate()
        output, _ = process.communicate(timeout=30)
    assert process.returncode == 0, output
    assert "TensorBoard is serving at" in output
