"""get_rng_state / set_rng_state: the random number generators a Keras trial draws from.

Python's ``random``, NumPy's global generator and, when TensorFlow is loaded, TensorFlow's global
``tf.random.Generator``; as upstream's, so that a restored state draws the same numbers again.
Keras 3's own seed generator is private to Keras (seed it with ``keras.utils.set_random_seed``).
"""

from __future__ import annotations

import importlib
import random
import sys
from typing import Any

import numpy as np


def get_rng_state() -> dict[str, Any]:
    """The generators' states, as a picklable dict (keys as upstream's)."""
    state: dict[str, Any] = {
        "np_rng_state": np.random.get_state(),
        "random_rng_state": random.getstate(),
    }
    tf = sys.modules.get("tensorflow")
    if tf is not None and hasattr(tf, "random") and tf.executing_eagerly():
        generator = tf.random.get_global_generator()
        state["tf2_rng_global_algorithm"] = generator.algorithm
        state["tf2_rng_global_state"] = np.asarray(generator.state)
    return state


def set_rng_state(rng_state: dict[str, Any]) -> None:
    """Put back what :func:`get_rng_state` returned (TensorFlow's part imports TensorFlow)."""
    np.random.set_state(rng_state["np_rng_state"])
    random.setstate(rng_state["random_rng_state"])
    if "tf2_rng_global_state" in rng_state and "tf2_rng_global_algorithm" in rng_state:
        tf: Any = importlib.import_module("tensorflow")
        generator = tf.random.Generator.from_state(
            rng_state["tf2_rng_global_state"], rng_state["tf2_rng_global_algorithm"]
        )
        tf.random.set_global_generator(generator)
    elif "tf_rng_global_seed" in rng_state:  # upstream's graph-mode (TensorFlow 1) form
        tf = importlib.import_module("tensorflow")
        tf.compat.v1.random.set_random_seed(rng_state["tf_rng_global_seed"])
