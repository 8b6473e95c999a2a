"""``det trial`` (alias ``t``): describe, logs, kill and download of one trial."""

from __future__ import annotations

import argparse
import json
from typing import Any

from determined.cli import _render, _session
from determined.cli._checkpoint import render_checkpoint
from determined.cli._declarative import Arg, Cmd, Group
from determined.cli._download import DOWNLOADABLE, download_checkpoint
from determined.cli._errors import CliError
from determined.cli._logs import LOG_ARGS, show_trial_logs
from determined.cli._workloads import trial_workload_rows, trial_workloads


def _bool(text: str) -> bool:
    value = text.strip().lower()
    if value in ("y", "yes", "t", "true", "on", "1"):
        return True
    if value in ("n", "no", "f", "false", "off", "0"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def describe(args: argparse.Namespace) -> None:
    answer = _session.api(args).trials.get(args.trial_id)
    workloads = trial_workloads(_session.setup_session(args), args.trial_id, args.metrics)
    if args.json:
        data = dict(answer)
        data["workloads"] = workloads
        _render.print_json(data)
        return
    trial = answer["trial"]
    _render.print_table(
        ["Experiment ID", "State", "H-Params", "Summary Metrics", "Started", "Ended"],
        [
            [
                trial.get("experimentId"),
                trial.get("state"),
                json.dumps(trial.get("hparams"), indent=4),
                json.dumps(trial.get("summaryMetrics"), indent=4),
                _render.format_time(trial.get("startTime")),
                _render.format_time(trial.get("endTime")),
            ]
        ],
        args.csv,
    )
    headers, rows = trial_workload_rows(workloads, args.metrics)
    print()
    print("Workloads:")
    _render.print_table(headers, rows, args.csv)
    if args.metrics_summary:
        _render.print_json(trial.get("summaryMetrics"))


def logs(args: argparse.Namespace) -> None:
    show_trial_logs(_session.setup_session(args), args.trial_id, args)


def kill(args: argparse.Namespace) -> None:
    _session.api(args).trials.kill(args.trial_id, retry=False)
    print("Killed trial", args.trial_id)


def _trial_checkpoints(args: argparse.Namespace, **params: Any) -> list[dict[str, Any]]:
    answer = _session.api(args).trials.checkpoints(args.trial_id, params)
    return [c for c in answer.get("checkpoints") or [] if c.get("state") in DOWNLOADABLE]


def download(args: argparse.Namespace) -> None:
    if [args.latest, args.best, args.uuid is not None].count(True) != 1:
        raise CliError("exactly one of --latest, --best or --uuid must be set")
    if args.sort_by is not None and not args.best:
        raise CliError("--sort-by and --smaller-is-better can only be used with --best")
    if (args.sort_by is None) != (args.smaller_is_better is None):
        raise CliError("--sort-by and --smaller-is-better must be set together")
    if args.uuid is not None:
        checkpoint = dict(_session.api(args).checkpoints.get(args.uuid)["checkpoint"])
    else:
        if args.latest:
            candidates = _trial_checkpoints(
                args, sortByAttr="SORT_BY_BATCH_NUMBER", orderBy="ORDER_BY_DESC"
            )
        else:
            trial = _session.api(args).trials.get(args.trial_id)["trial"]
            exp = _session.api(args).experiments.get(trial["experimentId"])
            searcher = (exp.get("config") or {}).get("searcher") or {}
            metric = args.sort_by or searcher.get("metric")
            smaller = (
                args.smaller_is_better
                if args.smaller_is_better is not None
                else bool(searcher.get("smaller_is_better", True))
            )
            candidates = _trial_checkpoints(
                args,
                sortByMetric=metric,
                orderBy="ORDER_BY_ASC" if smaller else "ORDER_BY_DESC",
            )
            candidates = [
                c
                for c in candidates
                if metric
                in (
                    ((c.get("training") or {}).get("validationMetrics") or {}).get("avgMetrics")
                    or {}
                )
            ]
        if not candidates:
            raise CliError(f"no downloadable checkpoint found for trial {args.trial_id}")
        checkpoint = candidates[0]
    path = download_checkpoint(_session.setup_session(args), checkpoint, args.output_dir)
    if args.quiet:
        print(path)
    else:
        render_checkpoint(checkpoint, str(path))


COMMANDS = [
    Cmd(
        "t|rial",
        None,
        "manage trials",
        [
            Cmd(
                "describe",
                describe,
                "describe trial",
                [
                    Arg("trial_id", type=int, help="trial ID"),
                    Arg(
                        "--metrics-summary",
                        action="store_true",
                        help="display summary of metrics",
                    ),
                    Arg("--metrics", action="store_true", help="display full metrics"),
                    Group(
                        Arg("--csv", action="store_true", help="print as CSV"),
                        Arg("--json", action="store_true", help="print as JSON"),
                    ),
                ],
            ),
            Cmd(
                "download",
                download,
                "download a checkpoint of a trial",
                [
                    Arg("trial_id", type=int, help="trial ID"),
                    Group(
                        Arg("--best", action="store_true", help="the best checkpoint"),
                        Arg("--latest", action="store_true", help="the latest checkpoint"),
                        Arg("--uuid", help="a checkpoint by its UUID"),
                    ),
                    Arg("-o", "--output-dir", help="directory to download the checkpoint into"),
                    Arg("--sort-by", help="validation metric to pick the best by (with --best)"),
                    Arg(
                        "--smaller-is-better",
                        type=_bool,
                        default=None,
                        help="sort order for --sort-by (true or false)",
                    ),
                    Arg("-q", "--quiet", action="store_true", help="only print the path"),
                ],
            ),
            Cmd(
                "logs",
                logs,
                "fetch trial logs",
                [
                    Arg("trial_id", type=int, help="trial ID"),
                    Arg("--json", action="store_true", help="print each entry as JSON"),
                    *LOG_ARGS,
                ],
            ),
            Cmd(
                "kill",
                kill,
                "forcibly terminate a trial",
                [Arg("trial_id", type=int, help="trial ID")],
            ),
        ],
    )
]
