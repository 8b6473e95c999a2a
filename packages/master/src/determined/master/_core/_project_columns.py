"""The columns of a project's experiment table (upstream's ``GetProjectColumns``).

Upstream's CLI and web UI ask which columns a project's experiments have: the fixed experiment
columns, then per metric of the experiments' best trials (their summary metrics) the columns
``<group>.<metric>.last/max/mean/min`` (only ``.last`` for a metric that is not a number), then one
``hp.<name>`` column per hyperparameter its experiments searched.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from determined.master._core._best_runs import SUMMARY_STATISTICS, best_summaries
from determined.master.db import Experiment

_EXPERIMENT = "LOCATION_TYPE_EXPERIMENT"
_TEXT, _NUMBER, _DATE = "COLUMN_TYPE_TEXT", "COLUMN_TYPE_NUMBER", "COLUMN_TYPE_DATE"

EXPERIMENT_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("id", "ID", _NUMBER),
    ("name", "Name", _TEXT),
    ("description", "Description", _TEXT),
    ("tags", "Tags", _TEXT),
    ("forkedFrom", "Forked", _NUMBER),
    ("startTime", "Start time", _DATE),
    ("duration", "Duration", _NUMBER),
    ("numTrials", "Trial count", _NUMBER),
    ("state", "State", _TEXT),
    ("searcherType", "Searcher", _TEXT),
    ("resourcePool", "Resource pool", _TEXT),
    ("progress", "Progress", _NUMBER),
    ("checkpointSize", "Checkpoint size", _NUMBER),
    ("checkpointCount", "Checkpoints", _NUMBER),
    ("user", "User", _TEXT),
    ("searcherMetric", "Searcher Metric", _TEXT),
    ("searcherMetricsVal", "Searcher Metric Value", _NUMBER),
    ("externalExperimentId", "External Experiment ID", _TEXT),
    ("externalTrialId", "External Trial ID", _TEXT),
    ("archived", "Archived", "COLUMN_TYPE_UNSPECIFIED"),
)
"""``(column, display name, type)`` of the experiment-level columns, in upstream's order."""

_UNSPECIFIED = "COLUMN_TYPE_UNSPECIFIED"
_METRIC_TYPES = {"number": _NUMBER, "string": _TEXT, "date": _DATE}
"""Column type of a metric by the ``type`` of its summary (upstream's ``parseMetricsType``)."""

_GROUP_LOCATION = {
    "validation": "LOCATION_TYPE_VALIDATIONS",
    "training": "LOCATION_TYPE_TRAINING",
}


def _flat_hparams(prefix: str, hparams: dict[str, Any], out: dict[str, str]) -> None:
    for name, spec in hparams.items():
        path = f"{prefix}{name}"
        if isinstance(spec, dict) and "type" not in spec:
            _flat_hparams(f"{path}.", spec, out)
            continue
        kind = spec.get("type") if isinstance(spec, dict) else "const"
        value = spec.get("val") if isinstance(spec, dict) else spec
        numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
        if kind in ("int", "double", "log") or (kind == "const" and numeric):
            column_type = _NUMBER
        elif kind in ("const", "categorical"):
            column_type = _TEXT
        else:
            column_type = "COLUMN_TYPE_UNSPECIFIED"
        previous = out.get(path)
        out[path] = column_type if previous in (None, column_type) else "COLUMN_TYPE_UNSPECIFIED"


def project_columns(session: Session, project_id: int) -> list[dict[str, Any]]:
    """The columns of a project's experiments: fixed ones, metrics, then hyperparameters."""
    columns = [
        {"column": c, "displayName": d, "location": _EXPERIMENT, "type": t}
        for c, d, t in EXPERIMENT_COLUMNS
    ]
    live = (Experiment.project_id == project_id, Experiment.state != "DELETED")
    hparams: dict[str, str] = {}
    for config in session.scalars(select(Experiment.config).where(*live)):
        _flat_hparams("", (config or {}).get("hyperparameters") or {}, hparams)
    for name in sorted(hparams):
        columns.append(
            {
                "column": f"hp.{name}",
                "displayName": "",
                "location": "LOCATION_TYPE_HYPERPARAMETERS",
                "type": hparams[name],
            }
        )
    kinds: dict[tuple[str, str], set[str]] = {}
    for _, summary in best_summaries(session, project_id):
        for group, entries in summary.items():
            if isinstance(entries, dict):
                for name, entry in entries.items():
                    kind = entry.get("type") if isinstance(entry, dict) else None
                    kinds.setdefault((group, name), set()).add(str(kind))
    metric_columns: list[dict[str, Any]] = []
    for (group, name), found in sorted(kinds.items()):
        location = _GROUP_LOCATION.get(group, "LOCATION_TYPE_CUSTOM_METRIC")
        stats: tuple[str, ...]
        if found == {"number"}:
            stats, column_type = SUMMARY_STATISTICS, _NUMBER
        else:  # one column of the last value; its type only when every trial agrees
            stats = ("last",)
            column_type = (
                _METRIC_TYPES.get(found.pop(), _UNSPECIFIED) if len(found) == 1 else _UNSPECIFIED
            )
        metric_columns.extend(
            {
                "column": f"{group}.{name}.{stat}",
                "displayName": "",
                "location": location,
                "type": column_type,
            }
            for stat in stats
        )
    return columns[: len(EXPERIMENT_COLUMNS)] + metric_columns + columns[len(EXPERIMENT_COLUMNS) :]
