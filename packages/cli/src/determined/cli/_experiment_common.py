"""What the ``det experiment`` command modules share: fetching an experiment and its trials,
pagination and argument types."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from determined.cli import _session
from determined.cli._declarative import Arg, Group

TERMINAL = ("STATE_COMPLETED", "STATE_CANCELED", "STATE_ERROR", "STATE_DELETED")

PAGINATION_ARGS = [
    Arg("--limit", type=int, default=200, help="maximum items per page of results"),
    Arg("--offset", type=int, default=0, help="number of items to skip"),
    Arg(
        "--pages",
        choices=["1", "all"],
        default="all",
        help="'all': fetch every page; '1': fetch a single page",
    ),
]


def paginated(
    args: argparse.Namespace,
    list_page: Callable[[dict[str, Any]], dict[str, Any]],
    key: str,
    **params: Any,
) -> list[Any]:
    """Every item of a paginated listing that ``list_page(query)`` answers one page of (or one
    page with ``--pages 1``)."""
    offset = int(getattr(args, "offset", 0) or 0)
    limit = getattr(args, "limit", None)
    items: list[Any] = []
    while True:
        answer = list_page({**params, "offset": offset, "limit": limit})
        page = answer.get(key) or []
        items.extend(page)
        pagination = answer.get("pagination") or {}
        end = int(pagination.get("endIndex", offset + len(page)))
        total = int(pagination.get("total", end))
        if getattr(args, "pages", "all") == "1" or end >= total or not page:
            return items
        offset = end


def get_experiment(args: argparse.Namespace, experiment_id: int | str) -> dict[str, Any]:
    """The master's whole answer for one experiment: experiment, config, jobSummary."""
    return _session.api(args).experiments.get(experiment_id)


def get_trials(args: argparse.Namespace, experiment_id: int | str) -> list[dict[str, Any]]:
    """Every trial of an experiment, lowest id first."""
    answer = _session.api(args).experiments.trials(experiment_id)
    return sorted(answer.get("trials") or [], key=lambda t: int(t["id"]))


def parse_experiment_id(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid experiment ID {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"invalid experiment ID {text!r}")
    return value


def experiment_id_arg(help_text: str = "experiment ID") -> Arg:
    return Arg("experiment_id", type=parse_experiment_id, help=help_text)


def none_or_int(text: str) -> int | None:
    if text.strip().lower() in ("null", "none"):
        return None
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer or 'none', got {text!r}") from None


def parse_bool(text: str) -> bool:
    value = text.strip().lower()
    if value in ("y", "yes", "t", "true", "on", "1"):
        return True
    if value in ("n", "no", "f", "false", "off", "0"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


CSV_OR_JSON = Group(
    Arg("--csv", action="store_true", help="print as CSV"),
    Arg("--json", action="store_true", help="print as JSON (det)"),
)
