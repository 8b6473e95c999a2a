"""Trial workloads (training, validation and checkpoint reports) as ``describe`` tables show them."""

from __future__ import annotations

import json
from typing import Any

from determined import client
from determined.cli import _render


def trial_workloads(
    session: client.Session, trial_id: int, include_batch_metrics: bool = False
) -> list[dict[str, Any]]:
    """Every workload of a trial, in step order."""
    trials = client.TrialsClient(session)
    out: list[dict[str, Any]] = []
    offset = 0
    while True:
        params: dict[str, Any] = {"offset": offset, "limit": 500}
        if include_batch_metrics:
            params["includeBatchMetrics"] = "true"
        answer = trials.workloads(trial_id, params)
        page = answer.get("workloads") or []
        out.extend(page)
        pagination = answer.get("pagination") or {}
        end = int(pagination.get("endIndex", offset + len(page)))
        if not page or end >= int(pagination.get("total", end)):
            return out
        offset = end


def _detail(workload: dict[str, Any]) -> dict[str, Any]:
    return dict(
        workload.get("training") or workload.get("validation") or workload.get("checkpoint") or {}
    )


def _avg(detail: dict[str, Any] | None) -> dict[str, Any]:
    return dict(((detail or {}).get("metrics") or {}).get("avgMetrics") or {})


def workload_rows(
    trial_id: int,
    workloads: list[dict[str, Any]],
    training_names: list[str],
    validation_names: list[str],
) -> tuple[list[str], list[list[Any]]]:
    """Experiment ``describe``'s workload table: one row per step of a trial, merging the
    training, checkpoint and validation reports of that step (as upstream condenses them)."""
    headers = (
        ["Trial ID", "# of Batches", "State", "Report Time"]
        + [f"Training Metric: {n}" for n in training_names]
        + [
            "Checkpoint State",
            "Checkpoint Report Time",
            "Validation State",
            "Validation Report Time",
        ]
        + [f"Validation Metric: {n}" for n in validation_names]
    )
    by_step: dict[int, dict[str, Any]] = {}
    for w in workloads:
        detail = _detail(w)
        step = int(detail.get("totalBatches") or 0)
        row = by_step.setdefault(
            step,
            {"time": None, "training": None, "checkpoint": None, "validation": None},
        )
        end = detail.get("endTime")
        if end and (row["time"] is None or end > row["time"]):
            row["time"] = end
        for kind in ("training", "checkpoint", "validation"):
            if w.get(kind) and row[kind] is None:
                row[kind] = w[kind]
    rows = []
    for step in sorted(by_step):
        row = by_step[step]
        ckpt = row["checkpoint"]
        val = row["validation"]
        ckpt_state = _render.state_name(ckpt.get("state")) if ckpt else ""
        val_state = "COMPLETED" if val else ""
        training = _avg(row["training"])
        validation = _avg(val)
        rows.append(
            [trial_id, step, ckpt_state or val_state, _render.format_time(row["time"])]
            + [training.get(n) for n in training_names]
            + [
                ckpt_state,
                _render.format_time(ckpt.get("endTime")) if ckpt else None,
                val_state,
                _render.format_time(val.get("endTime")) if val else None,
            ]
            + [validation.get(n) for n in validation_names]
        )
    return headers, rows


def trial_workload_rows(
    workloads: list[dict[str, Any]], with_metrics: bool
) -> tuple[list[str], list[list[Any]]]:
    """Trial ``describe``'s workload table: one row per report."""
    headers = [
        "# of Batches",
        "Report Time",
        "Checkpoint",
        "Checkpoint UUID",
        "Checkpoint Metadata",
        "Validation Metrics",
    ]
    if with_metrics:
        headers.append("Workload Metrics")
    rows = []
    for w in workloads:
        detail = _detail(w)
        ckpt = w.get("checkpoint")
        if ckpt:
            state = ckpt.get("state")
            uuid = ckpt.get("uuid") if state in ("STATE_COMPLETED", "STATE_DELETED") else None
            ckpt_cells = [state, uuid, json.dumps(ckpt.get("metadata") or {}, indent=4)]
        else:
            ckpt_cells = [None, None, None]
        val = w.get("validation")
        row = [
            detail.get("totalBatches"),
            _render.format_time(detail.get("endTime")),
            *ckpt_cells,
            json.dumps(val.get("metrics") or {}, indent=4) if val else None,
        ]
        if with_metrics:
            train = w.get("training")
            row.append(json.dumps(train.get("metrics") or {}, indent=4) if train else None)
        rows.append(row)
    return headers, rows
