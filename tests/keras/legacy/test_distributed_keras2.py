"""DeterminedCallback under MultiWorkerMirroredStrategy on tf.keras 2.15: two CPU workers started by
``python -m determined.launch.tensorflow`` fit, checkpoint and resume in step."""

from __future__ import annotations

import pathlib
import sys

from keras_helpers import HERE, launch_two_cpu_workers


def test_two_cpu_workers_fit_checkpoint_and_resume(tmp_path: pathlib.Path) -> None:
    result = launch_two_cpu_workers(sys.executable, HERE / "distributed_scenario.py", tmp_path)
    assert "[rank=0] worker 0 ok" in result.stdout, result.stdout
    assert "[rank=1] worker 1 ok" in result.stdout, result.stdout
