"""Random-number-generator state as plain data, so a Lightning checkpoint can carry it.

Lightning checkpoints hold no RNG state, so a resumed run would shuffle its next epoch differently
from an uninterrupted one. The states are stored as lists and tensors only: a checkpoint holding
them still loads with ``torch.load(weights_only=True)`` (no pickled numpy objects).
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import torch


def capture() -> dict[str, Any]:
    """The state of Python's, NumPy's and torch's global generators (CUDA too when present)."""
    version, internal, gauss = random.getstate()
    name, keys, position, has_gauss, cached = np.random.get_state(legacy=True)
    state: dict[str, Any] = {
        "python": [version, list(internal), gauss],
        "numpy": [
            str(name),
            np.asarray(keys).tolist(),
            int(position),
            int(has_gauss),
            float(cached),
        ],
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():  # type: ignore[no-untyped-call]
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore(state: dict[str, Any]) -> None:
    """Put back what :func:`capture` returned."""
    version, internal, gauss = state["python"]
    random.setstate((int(version), tuple(int(x) for x in internal), gauss))
    name, keys, position, has_gauss, cached = state["numpy"]
    np.random.set_state(
        (name, np.asarray(keys, dtype=np.uint32), int(position), int(has_gauss), float(cached))
    )
    torch.set_rng_state(state["torch"].cpu())
    cuda = state.get("cuda")
    if cuda is not None and torch.cuda.is_available() and len(cuda) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all([s.cpu() for s in cuda])
