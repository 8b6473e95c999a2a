"""``det resources``: historical resource allocation, as CSV (or JSON).

``allocations`` prints one row per allocation (who, which experiment, slots, times, slot hours),
``raw`` one row per allocation in upstream's older column set, ``aggregated`` the slot-seconds
per day or month by experiment label, user and resource pool. The master answers JSON; the CSV
is written here, with upstream's columns.
"""

from __future__ import annotations

import argparse
import csv
import sys
from typing import Any

from determined.cli import _render, _session
from determined.cli._declarative import Arg, Cmd


def _writer() -> Any:
    return csv.writer(sys.stdout, lineterminator="\n")


def _seconds(value: Any) -> str:
    return f"{float(value or 0.0):f}"


def _entries(args: argparse.Namespace) -> list[dict[str, Any]]:
    answer = _session.api(args).cluster.allocation_raw(args.timestamp_after, args.timestamp_before)
    return list(answer.get("resourceEntries") or [])


def allocations(args: argparse.Namespace) -> None:
    writer = _writer()
    writer.writerow(
        [
            "allocation_id",
            "task_type",
            "username",
            "workspace_name",
            "experiment_id",
            "slots",
            "start_time",
            "end_time",
            "imagepulling_time",
            "slot_hours",
            "resource_pool",
        ]
    )
    for entry in _entries(args):
        slot_hours = float(entry.get("seconds") or 0.0) * int(entry.get("slots") or 0) / 3600.0
        writer.writerow(
            [
                entry.get("allocationId", ""),
                entry.get("taskType", ""),
                entry.get("username", ""),
                "Uncategorized",
                entry.get("experimentId") or "",
                entry.get("slots", 0),
                entry.get("startTime") or "",
                entry.get("endTime") or "",
                "0.0",
                _seconds(slot_hours),
                entry.get("resourcePool", ""),
            ]
        )


def _escape_label(label: str) -> str:
    return label.replace("\\", "\\\\").replace(",", "\\,")


def raw(args: argparse.Namespace) -> None:
    entries = _entries(args)
    if args.json:
        _render.print_json({"resourceEntries": entries})
        return
    writer = _writer()
    writer.writerow(
        [
            "experiment_id",
            "kind",
            "username",
            "labels",
            "slots",
            "start_time",
            "end_time",
            "seconds",
        ]
    )
    for entry in entries:
        writer.writerow(
            [
                entry.get("experimentId", 0),
                entry.get("kind", ""),
                entry.get("username", ""),
                ",".join(_escape_label(str(x)) for x in entry.get("labels") or []),
                entry.get("slots", 0),
                entry.get("startTime") or "",
                entry.get("endTime") or "",
                _seconds(entry.get("seconds")),
            ]
        )


def aggregated(args: argparse.Namespace) -> None:
    answer = _session.api(args).cluster.allocation_aggregated(
        args.start_date, args.end_date, monthly=args.monthly
    )
    entries = list(answer.get("resourceEntries") or [])
    if args.json:
        _render.print_json({"resourceEntries": entries})
        return
    writer = _writer()
    writer.writerow(["aggregation_type", "aggregation_key", "date", "seconds"])
    for entry in entries:
        day = entry.get("periodStart", "")
        for kind, field in (
            ("experiment_label", "byExperimentLabel"),
            ("username", "byUsername"),
            ("resource_pool", "byResourcePool"),
        ):
            for key, seconds in (entry.get(field) or {}).items():
                writer.writerow([kind, key, day, _seconds(seconds)])
        writer.writerow(["total", "total", day, _seconds(entry.get("seconds"))])


_RANGE = [
    Arg("timestamp_after", help="start of the range (RFC 3339, e.g. 2024-01-01T00:00:00Z)"),
    Arg("timestamp_before", help="end of the range (RFC 3339)"),
]

COMMANDS = [
    Cmd(
        "res|ources",
        None,
        "query historical resource allocation",
        [
            Cmd(
                "alloc|ations",
                allocations,
                "get a detailed csv of resource allocation at an allocation level",
                _RANGE,
            ),
            Cmd(
                "raw",
                raw,
                "get raw allocation information",
                [*_RANGE, Arg("--json", action="store_true", help="output JSON rather than CSV")],
            ),
            Cmd(
                "agg|regated",
                aggregated,
                "get aggregated allocation information",
                [
                    Arg("start_date", help="first date to include (YYYY-MM-DD, or YYYY-MM)"),
                    Arg("end_date", help="last date to include"),
                    Arg("--json", action="store_true", help="output JSON rather than CSV"),
                    Arg("--monthly", action="store_true", help="aggregate by month, not by day"),
                ],
            ),
        ],
    )
]
