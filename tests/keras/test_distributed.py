"""``core.DistributedContext.from_tf_config()`` under ``python -m determined.launch.tensorflow``: two
CPU workers of one container (Keras 3 environment; the full ``fit()`` runs in tests/keras/legacy)."""

from __future__ import annotations

import pathlib
import sys

from keras_helpers import HERE, launch_two_cpu_workers


def test_two_cpu_workers_share_a_multi_worker_strategy(tmp_path: pathlib.Path) -> None:
    result = launch_two_cpu_workers(sys.executable, HERE / "distributed_scenario.py", tmp_path)
    assert "[rank=0] worker 0 ok" in result.stdout, result.stdout
    assert "[rank=1] worker 1 ok" in result.stdout, result.stdout
