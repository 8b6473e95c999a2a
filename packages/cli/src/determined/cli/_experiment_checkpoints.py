"""``det experiment list-checkpoints``, ``download`` and ``download-model-def``."""

from __future__ import annotations

import argparse
import base64
import pathlib
from typing import Any

from determined.cli import _render, _session
from determined.cli._checkpoint import render_checkpoint
from determined.cli._declarative import Arg, Cmd
from determined.cli._download import download_checkpoint
from determined.cli._errors import CliError
from determined.cli._experiment_common import (
    CSV_OR_JSON,
    experiment_id_arg,
    get_experiment,
    parse_bool,
)


def _searcher_of(args: argparse.Namespace, experiment_id: int) -> tuple[str, bool]:
    searcher = (get_experiment(args, experiment_id).get("config") or {}).get("searcher") or {}
    return str(searcher.get("metric") or ""), bool(searcher.get("smaller_is_better", True))


def _sorted_checkpoints(
    args: argparse.Namespace,
    experiment_id: int,
    metric: str | None = None,
    smaller_is_better: bool | None = None,
) -> list[dict[str, Any]]:
    """The experiment's checkpoints best first (by ``metric``, else the searcher metric)."""
    searcher_metric, searcher_smaller = _searcher_of(args, experiment_id)
    smaller = searcher_smaller if smaller_is_better is None else smaller_is_better
    params: dict[str, Any] = {"orderBy": "ORDER_BY_ASC" if smaller else "ORDER_BY_DESC"}
    if metric:
        params["sortByMetric"] = metric
    else:
        params["sortByAttr"] = "SORT_BY_SEARCHER_METRIC"
    answer = _session.api(args).experiments.checkpoints(experiment_id, params)
    name = metric or searcher_metric
    return [c for c in answer.get("checkpoints") or [] if _metric_value(c, name) is not None]


def _metric_value(checkpoint: dict[str, Any], metric: str) -> Any:
    validation = (checkpoint.get("training") or {}).get("validationMetrics") or {}
    return (validation.get("avgMetrics") or {}).get(metric)


def list_checkpoints(args: argparse.Namespace) -> None:
    metric, _ = _searcher_of(args, args.experiment_id)
    if args.best is not None:
        if args.best < 0:
            raise CliError(f"--best: must be >= 0, got {args.best}")
        checkpoints = _sorted_checkpoints(args, args.experiment_id)[: args.best]
    else:
        answer = _session.api(args).experiments.checkpoints(
            args.experiment_id, {"sortByAttr": "SORT_BY_END_TIME"}
        )
        checkpoints = answer.get("checkpoints") or []
    if args.json:
        _render.print_json(checkpoints)
        return
    rows = []
    for c in checkpoints:
        value = _metric_value(c, metric)
        rows.append(
            [
                (c.get("training") or {}).get("trialId"),
                (c.get("metadata") or {}).get("steps_completed"),
                c.get("state"),
                "" if value is None else str(value),
                c.get("uuid"),
                _render.format_resources(c.get("resources")),
                _render.format_resource_sizes(c.get("resources")),
            ]
        )
    _render.print_table(
        ["Trial ID", "# of Batches", "State", "Validation Metric", "UUID", "Resources", "Size"],
        rows,
        args.csv,
    )


def download(args: argparse.Namespace) -> None:
    if (args.sort_by is None) != (args.smaller_is_better is None):
        raise CliError("--sort-by and --smaller-is-better must be set together")
    if args.top_n < 1:
        raise CliError(f"--top-n: must be >= 1, got {args.top_n}")
    checkpoints = _sorted_checkpoints(
        args, args.experiment_id, args.sort_by, args.smaller_is_better
    )[: args.top_n]
    if not checkpoints:
        raise CliError(
            f"experiment {args.experiment_id} has no checkpoints with validation metrics"
        )
    top = pathlib.Path(args.output_dir)
    top.mkdir(parents=True, exist_ok=True)
    session = _session.setup_session(args)
    for checkpoint in checkpoints:
        path = download_checkpoint(session, checkpoint, str(top / checkpoint["uuid"]))
        if args.quiet:
            print(path)
        else:
            render_checkpoint(checkpoint, str(path))
            print()


def download_model_def(args: argparse.Namespace) -> None:
    answer = _session.api(args).experiments.model_def(args.experiment_id)
    target = pathlib.Path(args.output_dir) / f"experiment_{args.experiment_id}_model_def.tgz"
    target.write_bytes(base64.b64decode(answer.get("b64Tgz") or ""))
    print(f"Wrote {target}")


DOWNLOAD_MODEL_DEF = Cmd(
    "download-model-def",
    download_model_def,
    "download model definition",
    [experiment_id_arg(), Arg("--output-dir", default=".", help="output directory")],
)

LIST_CHECKPOINTS = Cmd(
    "list-checkpoints lc",
    list_checkpoints,
    "list checkpoints of experiment",
    [
        experiment_id_arg(),
        Arg(
            "--best",
            type=int,
            metavar="N",
            help="the best N checkpoints by the searcher metric (only checkpoints "
            "with a validation metric count)",
        ),
        CSV_OR_JSON,
    ],
)

DOWNLOAD = Cmd(
    "download",
    download,
    "download checkpoints for an experiment",
    [
        experiment_id_arg("experiment ID to download"),
        Arg(
            "-o",
            "--output-dir",
            default="checkpoints",
            help="top-level directory: checkpoints land in <output_dir>/<uuid>/",
        ),
        Arg("--top-n", type=int, default=1, help="how many of the best checkpoints"),
        Arg(
            "--sort-by",
            default=None,
            help="validation metric to sort by (default: the searcher metric); "
            "needs --smaller-is-better",
        ),
        Arg(
            "--smaller-is-better",
            type=parse_bool,
            default=None,
            help="sort order for --sort-by (true or false)",
        ),
        Arg("-q", "--quiet", action="store_true", help="only print the paths"),
    ],
)
