"""The PyTorchTrial checkpoint format: what goes into ``state_dict.pth`` and how it comes back.

Written: ``state_dict.pth`` with upstream's keys (``models_state_dict``, ``optimizers_state_dict``,
``lr_schedulers_state_dict``, ``callbacks``, ``rng_state``, ``scaler_state_dict``) plus det's
``det_trial_state`` (the loop position) and ``det_data_state`` (the shuffle seed, and the batch
metrics of a workload interrupted between two reports), and ``load_data.json``. Every value is a
tensor or a plain Python container, so the file loads with ``torch.load(weights_only=True)``; RNG
states are stored as tensors and lists, not NumPy objects (upstream pickled NumPy's tuple).

Read: det's files, and upstream's (``state_dict.pth`` under its four historical paths, NumPy RNG
tuples, ``trial_state.pkl`` / ``workload_sequencer.pkl``). Upstream's NumPy objects are loaded
through a narrow allowlist of NumPy array constructors, never with ``weights_only=False``; the
pickles are read by an unpickler that refuses every global (they hold plain dicts of ints).
"""

from __future__ import annotations

import collections
import io
import logging
import pathlib
import pickle
import random
from typing import Any

import numpy as np
import torch

logger = logging.getLogger("determined.pytorch")

STATE_FILE = "state_dict.pth"
LEGACY_STATE_FILES = (
    ("state_dict.pth",),
    ("determined", "state_dict.pth"),
    ("pedl", "state_dict.pth"),
    ("checkpoint.pt",),
)
FORMAT_VERSION = 1


def _numpy_safe_globals() -> list[Any]:
    core = np._core.multiarray  # type: ignore[attr-defined]
    allowed: list[Any] = [
        core._reconstruct,
        (core._reconstruct, "numpy.core.multiarray._reconstruct"),
        core.scalar,
        (core.scalar, "numpy.core.multiarray.scalar"),
        np.ndarray,
        np.dtype,
    ]
    for code in "?bBhHiIlLqQefdgFD":
        allowed.append(type(np.dtype(code)))
    return allowed


def torch_load(path: pathlib.Path | str | io.BytesIO, **kwargs: Any) -> Any:
    """``torch.load`` with ``weights_only=True`` and ``map_location="cpu"`` by default; files that
    hold NumPy arrays (upstream checkpoints) load through a NumPy-only allowlist."""
    kwargs.setdefault("map_location", "cpu")
    kwargs.setdefault("weights_only", True)
    if not kwargs["weights_only"]:
        return torch.load(path, **kwargs)
    try:
        return torch.load(path, **kwargs)
    except pickle.UnpicklingError:
        if isinstance(path, io.BytesIO):
            path.seek(0)
        with torch.serialization.safe_globals(_numpy_safe_globals()):
            return torch.load(path, **kwargs)


# ---- RNG ----------------------------------------------------------------------------------------


def get_rng_state(cuda_device: int | None) -> dict[str, Any]:
    """Every RNG the loop touches, as tensors and plain lists."""
    name, keys, pos, has_gauss, cached = np.random.get_state(legacy=True)  # type: ignore[misc]
    version, internal, gauss_next = random.getstate()
    state: dict[str, Any] = {
        "cpu_rng_state": torch.random.get_rng_state(),
        "np_rng_state": {
            "bit_generator": str(name),
            "keys": torch.from_numpy(np.asarray(keys, dtype=np.int64)),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached_gaussian": float(cached),
        },
        "random_rng_state": [int(version), [int(x) for x in internal], gauss_next],
    }
    if cuda_device is not None:
        state["gpu_rng_state"] = torch.cuda.get_rng_state(cuda_device)
    return state


def set_rng_state(state: dict[str, Any], cuda_device: int | None) -> None:
    """Restore :func:`get_rng_state`'s output, or upstream's (NumPy tuple, ``random`` tuple)."""
    np_state = state.get("np_rng_state")
    if isinstance(np_state, dict):
        keys = np_state["keys"]
        keys = keys.numpy() if isinstance(keys, torch.Tensor) else np.asarray(keys)
        np.random.set_state(
            (
                np_state.get("bit_generator", "MT19937"),
                keys.astype(np.uint32),
                int(np_state["pos"]),
                int(np_state["has_gauss"]),
                float(np_state["cached_gaussian"]),
            )
        )
    elif np_state is not None:
        np.random.set_state(tuple(np_state))
    py_state = state.get("random_rng_state")
    if py_state is not None:
        version, internal, gauss_next = py_state
        random.setstate((int(version), tuple(int(x) for x in internal), gauss_next))
    if state.get("cpu_rng_state") is not None:
        torch.random.set_rng_state(state["cpu_rng_state"])
    if cuda_device is not None:
        if "gpu_rng_state" in state:
            torch.cuda.set_rng_state(state["gpu_rng_state"], device=cuda_device)
        else:
            logger.warning("the checkpoint has no GPU RNG state to restore")
    elif "gpu_rng_state" in state:
        logger.warning("the checkpoint has a GPU RNG state but this trial runs without a GPU")


# ---- files --------------------------------------------------------------------------------------


def find_state_file(directory: pathlib.Path) -> pathlib.Path | None:
    """The checkpoint's state file, trying upstream's historical locations newest first."""
    for parts in LEGACY_STATE_FILES:
        candidate = directory.joinpath(*parts)
        if candidate.exists():
            return candidate
    return None


class _NoGlobalsUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refusing to load {module}.{name} from a trial state pickle")


def read_plain_pickle(path: pathlib.Path) -> Any:
    """A pickle of plain data (dicts, lists, numbers, strings) and nothing else."""
    with path.open("rb") as f:
        return _NoGlobalsUnpickler(f).load()


def read_trial_state(directory: pathlib.Path, checkpoint: dict[str, Any]) -> dict[str, Any] | None:
    """The loop position saved with a checkpoint: det's key, else upstream's pickles."""
    state = checkpoint.get("det_trial_state")
    if isinstance(state, dict):
        return state
    pkl = directory / "trial_state.pkl"
    if pkl.exists():
        data = read_plain_pickle(pkl)
        return data if isinstance(data, dict) else None
    legacy = directory / "workload_sequencer.pkl"
    if legacy.exists():
        try:
            data = read_plain_pickle(legacy)
        except pickle.UnpicklingError as exc:
            logger.warning("ignoring %s: %s", legacy, exc)
            return None
        if isinstance(data, dict):
            return {
                "trial_id": data.get("trial_id"),
                "last_ckpt": data.get("last_ckpt"),
                "last_val": data.get("last_val"),
                "step_id": data.get("step_id"),
                "batches_trained": data.get("steps_completed"),
                "_legacy_epochs": True,
            }
    return None


def load_model_state(model: torch.nn.Module, state_dict: dict[str, Any]) -> None:
    """Load weights, adding or removing DDP's ``module.`` prefix when the two sides differ."""
    target_is_ddp = isinstance(model, torch.nn.parallel.DistributedDataParallel)
    keys = list(state_dict)
    has_prefix = bool(keys) and all(k.startswith("module.") for k in keys)
    if target_is_ddp and keys and not has_prefix:
        state_dict = _rename(state_dict, lambda k: "module." + k)
    elif not target_is_ddp and has_prefix:
        state_dict = _rename(state_dict, lambda k: k[len("module.") :])
    model.load_state_dict(state_dict)


def _rename(state_dict: dict[str, Any], rename: Any) -> dict[str, Any]:
    renamed: Any = collections.OrderedDict((rename(k), v) for k, v in state_dict.items())
    metadata = getattr(state_dict, "_metadata", None)
    if metadata is not None:
        renamed._metadata = collections.OrderedDict(
            (rename(k) if k else k, v) for k, v in metadata.items()
        )
    return dict(renamed) if metadata is None else renamed
