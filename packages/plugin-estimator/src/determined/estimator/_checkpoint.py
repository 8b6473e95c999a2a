"""EstimatorTrial checkpoints: the Estimator's model directory plus det's own state, as plain files.

A checkpoint directory holds
- the latest TensorFlow checkpoint of the model directory (``model.ckpt-N.*``), its ``checkpoint``
  state file (rewritten with a relative path, so the directory can move) and ``graph.pbtxt``;
- one SavedModel per serving input receiver function, under ``<name>/<timestamp>/``;
- ``det_estimator_state.json``: steps completed and the Python and NumPy RNG states (JSON, not
  pickle, unlike upstream's ``rng_state.pkl``);
- ``load_data.json`` (``{"trial_type": "EstimatorTrial"}``), as upstream wrote.
"""

from __future__ import annotations

import json
import logging
import pathlib
import random
import shutil
from typing import Any

import numpy as np
import tensorflow as tf

logger = logging.getLogger("determined.estimator")

STATE_FILE = "det_estimator_state.json"
LOAD_DATA_FILE = "load_data.json"
STATE_VERSION = 1


def rng_state() -> dict[str, Any]:
    """Python's and NumPy's global RNG states as JSON-ready lists."""
    version, internal, gauss = random.getstate()
    kind, keys, pos, has_gauss, cached = np.random.get_state(legacy=True)  # type: ignore[misc]
    return {
        "python": [version, list(internal), gauss],
        "numpy": [kind, [int(k) for k in keys], int(pos), int(has_gauss), float(cached)],
    }


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore what :func:`rng_state` returned."""
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    kind, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((kind, np.array(keys, dtype=np.uint32), pos, has_gauss, cached))


def latest_checkpoint_prefix(model_dir: pathlib.Path) -> pathlib.Path | None:
    """The prefix (``.../model.ckpt-N``) of the newest TensorFlow checkpoint in ``model_dir``."""
    found = tf.train.latest_checkpoint(str(model_dir))
    return pathlib.Path(found) if found else None


def _write_state_file(directory: pathlib.Path, prefix_name: str) -> None:
    """A ``checkpoint`` state file naming ``prefix_name`` relative to ``directory``."""
    (directory / "checkpoint").write_text(
        f'model_checkpoint_path: "{prefix_name}"\nall_model_checkpoint_paths: "{prefix_name}"\n'
    )


def copy_model_dir(model_dir: pathlib.Path, target: pathlib.Path) -> str:
    """Copy the latest TensorFlow checkpoint of ``model_dir`` into ``target``; its prefix name."""
    prefix = latest_checkpoint_prefix(model_dir)
    if prefix is None:
        raise RuntimeError(f"no TensorFlow checkpoint in the model directory {model_dir}")
    target.mkdir(parents=True, exist_ok=True)
    for path in prefix.parent.glob(prefix.name + ".*"):
        shutil.copy2(path, target / path.name)
    graph = model_dir / "graph.pbtxt"
    if graph.is_file():
        shutil.copy2(graph, target / graph.name)
    _write_state_file(target, prefix.name)
    return prefix.name


def restore_model_dir(checkpoint_dir: pathlib.Path, model_dir: pathlib.Path) -> int:
    """Fill ``model_dir`` from a det checkpoint; the global step it holds."""
    prefix = latest_checkpoint_prefix(checkpoint_dir)
    if prefix is None:
        raise ValueError(
            f"checkpoint {checkpoint_dir.name}: holds no TensorFlow checkpoint (model.ckpt-N files)"
        )
    model_dir.mkdir(parents=True, exist_ok=True)
    for path in checkpoint_dir.glob(prefix.name + ".*"):
        shutil.copy2(path, model_dir / path.name)
    _write_state_file(model_dir, prefix.name)
    return int(prefix.name.rsplit("-", 1)[1])


def write_state(target: pathlib.Path, steps_completed: int) -> None:
    state = {"version": STATE_VERSION, "steps_completed": steps_completed, "rng": rng_state()}
    (target / STATE_FILE).write_text(json.dumps(state))
    (target / LOAD_DATA_FILE).write_text(json.dumps({"trial_type": "EstimatorTrial"}))


def read_state(checkpoint_dir: pathlib.Path) -> dict[str, Any] | None:
    path = checkpoint_dir / STATE_FILE
    if not path.is_file():
        logger.warning("checkpoint has no %s: the RNG state is not restored", STATE_FILE)
        return None
    state: dict[str, Any] = json.loads(path.read_text())
    return state


def export_serving_models(
    estimator: tf.estimator.Estimator,
    serving_fns: dict[str, Any],
    target: pathlib.Path,
    checkpoint_prefix: str,
) -> None:
    """One SavedModel per serving input receiver function, under ``target/<name>/<timestamp>/``."""
    for name, fn in serving_fns.items():
        logger.info("exporting the serving model %r", name)
        estimator.export_saved_model(str(target / name), fn, checkpoint_path=checkpoint_prefix)


def load_estimator_from_checkpoint_path(path: str, tags: list[str] | None = None) -> Any:
    """Load the SavedModel exported into an EstimatorTrial checkpoint (``serve`` tag by default).

    Raises:
        ValueError: the checkpoint holds no export, or more than one (load one by its path then).
    """
    checkpoint_dir = pathlib.Path(path)
    load_data = checkpoint_dir / LOAD_DATA_FILE
    kind = json.loads(load_data.read_text()).get("trial_type") if load_data.is_file() else None
    if kind not in (None, "EstimatorTrial"):
        logger.warning("%s does not look like an EstimatorTrial checkpoint (%s)", path, kind)
    exports = sorted(checkpoint_dir.glob("**/saved_model.pb"))
    if not exports:
        raise ValueError(
            f"{path}: no SavedModel in this checkpoint (the trial defines no "
            "build_serving_input_receiver_fns)"
        )
    if len(exports) > 1:
        names = ", ".join(str(p.parent.relative_to(checkpoint_dir)) for p in exports)
        raise ValueError(f"{path}: several SavedModels ({names}); load one with tf.saved_model")
    return tf.compat.v1.saved_model.load_v2(str(exports[0].parent), tags or ["serve"])
