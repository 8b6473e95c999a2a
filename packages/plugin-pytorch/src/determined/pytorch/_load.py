"""Loading a trained PyTorchTrial back from a checkpoint directory, outside any training loop."""

from __future__ import annotations

import importlib
import json
import logging
import pathlib
import sys
import tempfile
import warnings
from typing import Any

from determined import core
from determined.pytorch import _checkpoint
from determined.pytorch._context import PyTorchTrialContext
from determined.pytorch._trial import PyTorchTrial

logger = logging.getLogger("determined.pytorch")


class CheckpointLoadContext(PyTorchTrialContext):
    """A context for building a trial outside training: the ``wrap_*`` calls hand objects back
    untouched (no device move, no DDP), nothing is reported anywhere.

    Use it to instantiate your trial class yourself (e.g. with extra constructor arguments) and
    then load weights; :func:`load_trial_from_checkpoint_path` does both.
    """

    def __init__(
        self, hparams: dict[str, Any] | None = None, exp_conf: dict[str, Any] | None = None
    ) -> None:
        super().__init__(
            core_context=core._dummy_init(
                distributed=core.DistributedContext(),
                checkpoint_storage=tempfile.gettempdir(),
            ),
            trial_seed=0,
            hparams=hparams,
            slots_per_trial=1,
            num_gpus=0,
            exp_conf=exp_conf,
            aggregation_frequency=1,
            steps_completed=0,
            managed_training=False,
            debug_enabled=False,
        )


def _read_load_data(path: pathlib.Path) -> dict[str, Any]:
    for name in ("load_data.json", "metadata.json"):
        candidate = path / name
        if candidate.exists():
            data = json.loads(candidate.read_text())
            if isinstance(data, dict) and ("trial_type" in data or name == "load_data.json"):
                return data
    raise FileNotFoundError(
        f"{path}: no load_data.json; is this a PyTorchTrial checkpoint directory?"
    )


def _import_trial_class(path: pathlib.Path, spec: str) -> type[PyTorchTrial]:
    module_name, _, qualname = spec.partition(":")
    if not module_name or not qualname:
        raise ValueError(f"load_data.json: bad trial_cls_spec {spec!r}")
    if module_name == "__main__":
        raise ValueError(
            f"the trial class {qualname!r} was defined in a script's __main__; pass "
            "trial_class= to load_trial_from_checkpoint_path()"
        )
    code = path / "code"
    added = code.is_dir() and str(code) not in sys.path
    if added:
        sys.path.insert(0, str(code))
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ImportError(
            f"cannot import {module_name!r} for the trial class (not in {code} nor on sys.path); "
            "pass trial_class= to load_trial_from_checkpoint_path()"
        ) from exc
    finally:
        if added:
            sys.path.remove(str(code))
    for part in qualname.split("."):
        obj = getattr(obj, part)
    if not (isinstance(obj, type) and issubclass(obj, PyTorchTrial)):
        raise TypeError(f"{spec} is not a PyTorchTrial subclass")
    return obj


def load_trial_from_checkpoint_path(
    path: str | pathlib.Path,
    trial_class: type[PyTorchTrial] | None = None,
    trial_kwargs: dict[str, Any] | None = None,
    torch_load_kwargs: dict[str, Any] | None = None,
    **kwargs: Any,
) -> PyTorchTrial:
    """A trial instance with the model weights of a PyTorchTrial checkpoint (det's or upstream's).

    Args:
        path: the checkpoint's local directory (e.g. from ``Checkpoint.download()``).
        trial_class: the trial class; by default imported from the checkpoint's ``code/`` (or
            from ``sys.path``) by the name it was saved under.
        trial_kwargs: extra keyword arguments for the trial's constructor.
        torch_load_kwargs: keyword arguments for ``torch.load``. Defaults differ from upstream:
            ``map_location="cpu"`` and ``weights_only=True``.
        **kwargs: deprecated spelling of ``torch_load_kwargs``.
    """
    torch_load_kwargs = dict(torch_load_kwargs or {})
    if kwargs:
        warnings.warn(
            "load_trial_from_checkpoint_path(**kwargs) is deprecated: use torch_load_kwargs=",
            FutureWarning,
            stacklevel=2,
        )
        torch_load_kwargs.update(kwargs)
    directory = pathlib.Path(path)
    load_data = _read_load_data(directory)
    trial_type = load_data.get("trial_type", "PyTorchTrial")
    if trial_type != "PyTorchTrial":
        raise ValueError(f"{directory} holds a {trial_type} checkpoint, not a PyTorchTrial one")
    if trial_class is None:
        spec = load_data.get("trial_cls_spec")
        if not spec:
            raise ValueError(f"{directory}: load_data.json names no trial class; pass trial_class=")
        trial_class = _import_trial_class(directory, str(spec))
    context = CheckpointLoadContext(
        hparams=load_data.get("hparams"), exp_conf=load_data.get("experiment_config")
    )
    trial = trial_class(context, **(trial_kwargs or {}))  # type: ignore[call-arg]
    state_file = _checkpoint.find_state_file(directory)
    if state_file is None:
        raise FileNotFoundError(f"{directory}: no state_dict.pth")
    checkpoint = _checkpoint.torch_load(state_file, **torch_load_kwargs)
    if "model_state_dict" in checkpoint:
        states = [checkpoint["model_state_dict"]]
    else:
        states = list(checkpoint.get("models_state_dict") or [])
    if len(states) != len(context.models):
        raise ValueError(
            f"the checkpoint holds {len(states)} model(s) but the trial wrapped "
            f"{len(context.models)}"
        )
    for model, state in zip(context.models, states, strict=True):
        _checkpoint.load_model_state(model, state)
    return trial
