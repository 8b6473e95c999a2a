"""What the launcher and its trials agree on: names, and a job's result as run metadata.

A trial learns which sweep point it runs from its hyperparameter ``hydra_job`` (the job number), runs
that job from the pickled jobs file shipped in the context, and stores its result in the run's
metadata under ``hydra``. Results travel as JSON only: the launcher never unpickles anything that
comes back from the master, so whoever can edit a run's metadata cannot run code on the machine
that launched the sweep.
"""

from __future__ import annotations

import json
import math
import traceback
from collections.abc import Mapping
from typing import Any

JOB_HPARAM = "hydra_job"
"""The categorical hyperparameter the grid searcher sweeps: the job numbers of the batch."""

OVERRIDES_HPARAM = "hydra_overrides"
"""A const hyperparameter: job number -> its overrides, so the experiment config says what ran."""

JOBS_FILE = "det_hydra_jobs.pkl"
"""The pickled jobs (configs, task function, Hydra's state), added to the experiment's context."""

METADATA_KEY = "hydra"
"""The run metadata key holding a job's result."""

TRIAL_MODULE = "hydra_plugins.det_launcher._trial"


def jsonable(value: Any) -> Any:
    """``value`` as JSON data: OmegaConf containers as plain ones, numpy scalars as numbers,
    tuples as lists, anything else as its ``repr``."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    try:
        from omegaconf import OmegaConf

        if OmegaConf.is_config(value):
            return jsonable(OmegaConf.to_container(value, resolve=True))
    except ImportError:  # pragma: no cover - omegaconf comes with hydra-core
        pass
    if isinstance(value, Mapping):
        return {str(key): jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(item) for item in value]
    item = getattr(value, "item", None)  # numpy / torch scalars
    if callable(item):
        try:
            return jsonable(item())
        except (TypeError, ValueError):
            pass
    return repr(value)


def encode_result(num: int, overrides: list[str], completed: bool, value: Any) -> dict[str, Any]:
    """The metadata a trial stores for its job: status, return value or error."""
    result: dict[str, Any] = {
        "job": num,
        "overrides": list(overrides),
        "status": "COMPLETED" if completed else "FAILED",
    }
    if completed:
        result["return_value"] = jsonable(value)
        json.dumps(result)  # jsonable() guarantees this; fail here rather than on the wire
    elif isinstance(value, BaseException):
        result["error_type"] = type(value).__name__
        result["error"] = str(value)
        result["traceback"] = "".join(traceback.format_exception(value))
    else:
        result["error_type"] = type(value).__name__
        result["error"] = repr(value)
    return result


def number(value: Any) -> float | None:
    """``value`` as a metric number, or ``None`` when it is not a real number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)
