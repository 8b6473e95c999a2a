"""Plain-text output: upstream's "presto" tables, CSV, JSON, YAML, times, sizes and colours.

Tables look like the ones upstream prints with ``tabulate(..., tablefmt="presto")``: one space of
padding, ``|`` between columns, a ``-``/``+`` rule under the header, numbers right-aligned,
multi-line cells (indented JSON of hyperparameters) spread over several lines.
"""

from __future__ import annotations

import csv
import datetime
import json
import math
import os
import sys
from collections.abc import Iterable, Sequence
from typing import IO, Any

import yaml

_ANSI = {"red": "31", "green": "32", "yellow": "33", "blue": "34"}


def use_color(stream: IO[str] | None = None) -> bool:
    """Colours only on a terminal, and never when ``NO_COLOR`` is set."""
    stream = stream if stream is not None else sys.stdout
    if os.environ.get("NO_COLOR"):
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def colored(text: str, color: str, stream: IO[str] | None = None) -> str:
    """``text`` wrapped in an ANSI colour when ``stream`` is a terminal."""
    if color not in _ANSI or not use_color(stream):
        return text
    return f"\x1b[{_ANSI[color]}m{text}\x1b[0m"


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return str(value)
        return format(value, "g")
    return str(value)


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """The rows as a presto-style table (as upstream's CLI prints them)."""
    rows = [list(r) for r in rows]
    ncols = len(headers)
    numeric = [
        bool(rows)
        and all(_is_number(r[i]) for r in rows if i < len(r) and r[i] is not None)
        and any(i < len(r) and r[i] is not None for r in rows)
        for i in range(ncols)
    ]
    header_lines = [str(h).split("\n") for h in headers]
    body = [[_cell(r[i] if i < len(r) else None).split("\n") for i in range(ncols)] for r in rows]
    widths = [
        max([len(x) for x in header_lines[i]] + [len(x) for row in body for x in row[i]])
        for i in range(ncols)
    ]

    def render(cells: list[list[str]]) -> list[str]:
        height = max((len(c) for c in cells), default=1)
        lines = []
        for k in range(height):
            parts = []
            for i, cell in enumerate(cells):
                text = cell[k] if k < len(cell) else ""
                padded = text.rjust(widths[i]) if numeric[i] else text.ljust(widths[i])
                parts.append(f" {padded} ")
            lines.append("|".join(parts).rstrip())
        return lines

    out = render(header_lines)
    out.append("+".join("-" * (w + 2) for w in widths))
    for row in body:
        out.extend(render(row))
    return "\n".join(out)


def print_table(
    headers: Sequence[str],
    rows: Iterable[Sequence[Any]],
    as_csv: bool = False,
    out: IO[str] | None = None,
) -> None:
    """Print a table, or CSV (header row first) with ``as_csv``."""
    out = out if out is not None else sys.stdout
    if as_csv:
        writer = csv.writer(out)
        writer.writerow(headers)
        writer.writerows([[_cell(v) for v in row] for row in rows])
        return
    print(table(headers, rows), file=out)


def print_json(data: Any) -> None:
    """Indented, key-sorted JSON on stdout."""
    print(json.dumps(data, indent=2, sort_keys=True, default=str))


def dump_yaml(data: Any) -> str:
    """Block-style YAML, keys in their given order."""
    return str(yaml.safe_dump(data, default_flow_style=False, sort_keys=False))


def parse_time(value: str | None) -> datetime.datetime | None:
    """An RFC 3339 timestamp from the master (``...Z``, up to nanoseconds) as an aware datetime."""
    if not value:
        return None
    text = value.strip().replace("Z", "+00:00")
    if "." in text:
        head, _, rest = text.partition(".")
        digits = ""
        while rest and rest[0].isdigit():
            digits, rest = digits + rest[0], rest[1:]
        text = f"{head}.{digits[:6].ljust(6, '0')}{rest}"
    try:
        parsed = datetime.datetime.fromisoformat(text)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=datetime.timezone.utc)
    return parsed


def format_time(value: str | None) -> str | None:
    """``2024-01-02 03:04:05+0000`` (UTC), as upstream prints times."""
    parsed = parse_time(value)
    if parsed is None:
        return value or None
    return parsed.astimezone(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S%z")


def format_percent(value: float | None) -> str | None:
    """``0.5`` -> ``50.0%``."""
    if value is None:
        return None
    return f"{value:.1%}"


def sizeof_fmt(value: float) -> str:
    """A byte count for people: ``1.5MB``."""
    size = float(value)
    for unit in ("", "K", "M", "G", "T", "P"):
        if abs(size) < 1024.0:
            return f"{size:3.1f}{unit}B"
        size /= 1024.0
    return f"{size:.1f}EB"


def format_resources(resources: dict[str, Any] | None) -> str:
    """The file names of a checkpoint, one a line."""
    return "\n".join(sorted((resources or {}).keys()))


def format_resource_sizes(resources: dict[str, Any] | None) -> str:
    """The total size of a checkpoint's files."""
    total = 0.0
    for size in (resources or {}).values():
        try:
            total += float(size)
        except (TypeError, ValueError):
            continue
    return sizeof_fmt(total)


def state_name(state: str | None) -> str:
    """``STATE_COMPLETED`` -> ``COMPLETED``."""
    return (state or "").replace("STATE_", "")


def yes_or_no(prompt: str) -> bool:
    """Ask on the terminal; no answer (end of input, Ctrl-C) means no."""
    while True:
        try:
            answer = input(f"{prompt} [y/n]: ").strip().lower()
        except (EOFError, KeyboardInterrupt):
            print()
            return False
        if answer in ("y", "yes"):
            return True
        if answer in ("n", "no"):
            return False
        print("Please respond with 'y' or 'n'")
