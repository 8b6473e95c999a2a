"""load_model_from_checkpoint_path: a TFKerasTrial's model, rebuilt and loaded from a checkpoint.

Reads ``load_data.json`` (which det's TFKerasTrial runner writes into every checkpoint, as
upstream's did), imports the trial class from the checkpoint's ``code/`` directory or from
``sys.path``, builds the model with ``build_model()`` and loads the checkpoint's weights into it.
Upstream's checkpoints load too where this Keras can read their weights: its HDF5 file
(``determined-keras-model.h5``) everywhere, its TensorFlow-format weights
(``determined-keras-model-weights``) on tf.keras 2 only.
"""

from __future__ import annotations

import importlib
import json
import logging
import pathlib
import sys
import tempfile
import warnings
from typing import Any

import determined as det
from determined.keras import _compat
from determined.keras._callback_files import MODEL_FILE, OPTIMIZER_FILE, load_optimizer
from determined.keras._trial import TFKerasTrial, TFKerasTrialContext

logger = logging.getLogger("determined.keras")

_UPSTREAM_WEIGHTS = ("determined-keras-model-weights", "determined-keras-model.h5")


def _read_load_data(directory: pathlib.Path) -> tuple[dict[str, Any], dict[str, Any], str]:
    """(experiment config, hyperparameters, ``module:Class``) of the checkpoint's trial."""
    load_data_file = directory / "load_data.json"
    metadata_file = directory / "metadata.json"
    if load_data_file.exists():
        data = json.loads(load_data_file.read_text())
        if data.get("trial_type") != "TFKerasTrial":
            logger.warning(
                "%s: a %s checkpoint, not a TFKerasTrial one; loading it anyway",
                directory,
                data.get("trial_type"),
            )
        return (
            dict(data.get("experiment_config") or {}),
            dict(data.get("hparams") or {}),
            str(data.get("trial_cls_spec") or ""),
        )
    metadata = json.loads(metadata_file.read_text()) if metadata_file.exists() else {}
    if "experiment_config" in metadata and "hparams" in metadata:
        # Determined <= 0.17.7 wrote these into metadata.json on Checkpoint.download().
        config = dict(metadata["experiment_config"])
        return config, dict(metadata["hparams"]), str(config.get("entrypoint") or "")
    raise FileNotFoundError(
        f"{directory}: no load_data.json; is this the directory of a TFKerasTrial checkpoint "
        "(e.g. from Checkpoint.download())? Checkpoints of DeterminedCallback hold only "
        f"weights: build your model and call model.load_weights('<dir>/{MODEL_FILE}')"
    )


def _import_trial_class(directory: pathlib.Path, spec: str) -> type[TFKerasTrial]:
    module_name, _, qualname = spec.partition(":")
    if not module_name or not qualname:
        raise ValueError(f"{directory}: cannot tell the trial class from {spec!r}")
    code = directory / "code"
    added = code.is_dir() and str(code) not in sys.path
    if added:
        sys.path.insert(0, str(code))
    try:
        found: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ImportError(
            f"cannot import {module_name!r}, the module of the trial class {qualname}: it is "
            f"neither in {code} nor on sys.path"
        ) from exc
    finally:
        if added:
            sys.path.remove(str(code))
    for part in qualname.split("."):
        found = getattr(found, part)
    if not (isinstance(found, type) and issubclass(found, TFKerasTrial)):
        raise TypeError(f"{spec} is not a det.keras.TFKerasTrial subclass")
    return found


def _loading_context(
    trial_class: type[TFKerasTrial], config: dict[str, Any], hparams: dict[str, Any]
) -> TFKerasTrialContext:
    """A context for building the trial outside training: one process, nothing reported."""
    info = det.ClusterInfo(
        master_url="http://127.0.0.1:1",  # never contacted
        cluster_id="local",
        agent_id="local",
        slot_ids=[],
        task_id="local",
        allocation_id="local",
        session_token="",
        task_type="TRIAL",
        trial_info=det.TrialInfo(
            trial_id=0,
            experiment_id=0,
            trial_seed=0,
            hparams=hparams,
            config=config,
            steps_completed=0,
            trial_run_id=0,
            debug=False,
            inter_node_network_interface=None,
        ),
    )
    core_context = det.core._dummy_init(
        distributed=det.core.DistributedContext(), checkpoint_storage=tempfile.gettempdir()
    )
    context_class = getattr(trial_class, "trial_context_class", TFKerasTrialContext)
    context: TFKerasTrialContext = context_class(core_context, info, None)
    return context


def _weights_file(directory: pathlib.Path) -> pathlib.Path:
    for name in (MODEL_FILE, *_UPSTREAM_WEIGHTS):
        candidate = directory / name
        if candidate.exists() or candidate.with_name(name + ".index").exists():
            return candidate
    raise FileNotFoundError(f"{directory}: no model weights ({MODEL_FILE})")


def load_model_from_checkpoint_path(path: str, tags: list[str] | None = None) -> Any:
    """The model of a TFKerasTrial checkpoint: built by the trial's ``build_model()``, with the
    checkpoint's weights (and optimizer state) loaded.

    Deprecated since Determined 0.38.0: with DeterminedCallback, build the model yourself and
    ``model.load_weights('<checkpoint dir>/model_checkpoint.weights.h5')``.

    Args:
        path: the checkpoint's local directory (e.g. from ``Checkpoint.download()``).
        tags: upstream's SavedModel tags; accepted and unused (upstream did not use them either:
            checkpoints hold weights, not SavedModels).
    """
    warnings.warn(
        "det.keras.load_model_from_checkpoint_path is deprecated since Determined 0.38.0 and "
        "will be removed: it loads TFKerasTrial checkpoints, and TFKerasTrial is deprecated. "
        "Train with det.keras.DeterminedCallback and restore with model.load_weights().",
        FutureWarning,
        stacklevel=2,
    )
    directory = pathlib.Path(path)
    config, hparams, spec = _read_load_data(directory)
    trial_class = _import_trial_class(directory, spec)
    weights = _weights_file(directory)
    trial = trial_class(_loading_context(trial_class, config, hparams))
    model = trial.build_model()
    _compat.build_optimizer(model)
    if weights.name != MODEL_FILE and _compat.KERAS_MAJOR >= 3 and weights.suffix != ".h5":
        raise ValueError(
            f"{weights}: upstream's TensorFlow-format weights load with tf.keras 2 only "
            "(TF_USE_LEGACY_KERAS=1 with tf_keras, or TensorFlow <= 2.15)"
        )
    model.load_weights(str(weights))
    if (directory / OPTIMIZER_FILE).exists():  # DeterminedCallback's optimizer state on Keras 2
        load_optimizer(model, directory / OPTIMIZER_FILE)
    return model
