"""``det experiment list``, ``config``, ``describe``, ``logs`` and ``list-trials``."""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
from typing import Any

from determined.cli import _render, _session
from determined.cli._declarative import Arg, Cmd, Group
from determined.cli._errors import CliError
from determined.cli._experiment_common import (
    CSV_OR_JSON,
    PAGINATION_ARGS,
    experiment_id_arg,
    get_experiment,
    get_trials,
    paginated,
    parse_experiment_id,
)
from determined.cli._logs import LOG_ARGS, show_trial_logs
from determined.cli._workloads import trial_workloads, workload_rows


def list_experiments(args: argparse.Namespace) -> None:
    params: dict[str, Any] = {}
    if not args.all:
        params["archived"] = "false"
        params["users"] = [_session.current_username(args)]
    experiments = paginated(args, _session.api(args).experiments.list, "experiments", **params)
    if args.json:
        _render.print_json(experiments)
        return
    headers = ["ID", "Owner", "Name", "Parent ID", "State", "Progress", "Started", "Ended"]
    headers.append("Resource Pool")
    if args.show_project:
        headers = ["Workspace", "Project", *headers]
    if args.all:
        headers.append("Archived")
    rows = []
    for e in experiments:
        row: list[Any] = [
            e["id"],
            e.get("username"),
            e.get("name"),
            e.get("forkedFrom"),
            _render.state_name(e.get("state")),
            _render.format_percent(e.get("progress")),
            _render.format_time(e.get("startTime")),
            _render.format_time(e.get("endTime")),
            e.get("resourcePool"),
        ]
        if args.show_project:
            row = [e.get("workspaceName"), e.get("projectName"), *row]
        if args.all:
            row.append(e.get("archived"))
        rows.append(row)
    _render.print_table(headers, rows, args.csv)


def config(args: argparse.Namespace) -> None:
    sys.stdout.write(_render.dump_yaml(get_experiment(args, args.experiment_id)["config"]))


def _best_trial(
    experiment: dict[str, Any], trials: list[dict[str, Any]]
) -> tuple[dict[str, Any], float] | None:
    searcher = (experiment.get("config") or {}).get("searcher") or {}
    smaller = bool(searcher.get("smaller_is_better", True))
    scored = [
        (float(t["searcherMetricValue"]), t)
        for t in trials
        if isinstance(t.get("searcherMetricValue"), (int, float))
    ]
    if not scored:
        return None
    value, trial = (min if smaller else max)(scored, key=lambda pair: pair[0])
    return trial, value


def describe(args: argparse.Namespace) -> None:
    ids = []
    for part in args.experiment_ids.split(","):
        try:
            ids.append(parse_experiment_id(part.strip()))
        except argparse.ArgumentTypeError as exc:
            raise CliError(str(exc)) from None
    answers = [get_experiment(args, i) for i in ids]
    if args.json:
        _render.print_json(answers)
        return
    outdir: pathlib.Path | None = args.outdir
    if outdir is not None:
        outdir.mkdir(parents=True, exist_ok=True)

    def emit(title: str, filename: str, headers: list[str], rows: list[list[Any]]) -> None:
        if outdir is None:
            print(title)
            _render.print_table(headers, rows, args.csv)
        else:
            with (outdir / filename).open("w", newline="") as out:
                _render.print_table(headers, rows, True, out)

    experiments = [a["experiment"] for a in answers]
    emit(
        "Experiment:",
        "experiments.csv",
        [
            "Experiment ID",
            "State",
            "Progress",
            "Started",
            "Ended",
            "Name",
            "Description",
            "Archived",
            "Resource Pool",
            "Labels",
        ],
        [
            [
                e["id"],
                _render.state_name(e.get("state")),
                _render.format_percent(e.get("progress")),
                _render.format_time(e.get("startTime")),
                _render.format_time(e.get("endTime")),
                e.get("name"),
                e.get("description"),
                e.get("archived"),
                e.get("resourcePool"),
                ", ".join(sorted(e.get("labels") or [])),
            ]
            for e in experiments
        ],
    )
    trials = {e["id"]: get_trials(args, e["id"]) for e in experiments}
    emit(
        "\nTrials:",
        "trials.csv",
        ["Trial ID", "Experiment ID", "State", "Started", "Ended", "H-Params"],
        [
            [
                t["id"],
                e["id"],
                _render.state_name(t.get("state")),
                _render.format_time(t.get("startTime")),
                _render.format_time(t.get("endTime")),
                json.dumps(t.get("hparams"), indent=4),
            ]
            for e in experiments
            for t in trials[e["id"]]
        ],
    )
    best_rows = []
    for e in experiments:
        best = _best_trial(e, trials[e["id"]])
        searcher = (e.get("config") or {}).get("searcher") or {}
        if best is not None:
            best_rows.append(
                [
                    e["id"],
                    best[0]["id"],
                    searcher.get("metric"),
                    best[1],
                    bool(searcher.get("smaller_is_better", True)),
                ]
            )
    emit(
        "\nBest Trial:",
        "best_trials.csv",
        ["Experiment ID", "Trial ID", "Searcher Metric", "Value", "Smaller Is Better"],
        best_rows,
    )
    workload_headers: list[str] = []
    all_rows: list[list[Any]] = []
    session = _session.setup_session(args)
    per_trial = {
        t["id"]: trial_workloads(session, t["id"]) for e in experiments for t in trials[e["id"]]
    }
    training_names: set[str] = set()
    validation_names: set[str] = set()
    if args.metrics:
        for workloads in per_trial.values():
            for w in workloads:
                if w.get("training"):
                    training_names |= set(
                        (w["training"].get("metrics") or {}).get("avgMetrics", {})
                    )
                if w.get("validation"):
                    validation_names |= set(
                        (w["validation"].get("metrics") or {}).get("avgMetrics", {})
                    )
    for trial_id, workloads in per_trial.items():
        workload_headers, rows = workload_rows(
            trial_id, workloads, sorted(training_names), sorted(validation_names)
        )
        all_rows.extend(rows)
    if not workload_headers:
        workload_headers, _ = workload_rows(0, [], [], [])
    emit("\nWorkloads:", "workloads.csv", workload_headers, all_rows)


def logs(args: argparse.Namespace) -> None:
    trials = get_trials(args, args.experiment_id)
    if not trials:
        raise CliError(f"experiment {args.experiment_id} has no trials yet")
    show_trial_logs(_session.setup_session(args), int(trials[0]["id"]), args)


def list_trials(args: argparse.Namespace) -> None:
    api = _session.api(args).experiments
    trials = paginated(args, lambda query: api.trials(args.experiment_id, query), "trials")
    if args.json:
        _render.print_json(trials)
        return
    rows = [
        [
            t["id"],
            _render.state_name(t.get("state")),
            json.dumps(t.get("hparams"), indent=4),
            _render.format_time(t.get("startTime")),
            _render.format_time(t.get("endTime")),
            t.get("totalBatchesProcessed"),
        ]
        for t in trials
    ]
    _render.print_table(
        ["Trial ID", "State", "H-Params", "Started", "Ended", "# of Batches"], rows, args.csv
    )


LIST = Cmd(
    "list ls",
    list_experiments,
    "list experiments",
    [
        Arg(
            "-a",
            "--all",
            action="store_true",
            help="show all experiments (including archived and other users')",
        ),
        Arg(
            "--show_project",
            action="store_true",
            help="include columns for workspace name and project name",
        ),
        *PAGINATION_ARGS,
        CSV_OR_JSON,
    ],
    default=True,
)

CONFIG = Cmd("config", config, "display experiment config", [experiment_id_arg()])

DESCRIBE = Cmd(
    "describe",
    describe,
    "describe experiment",
    [
        Arg("experiment_ids", help="comma-separated list of experiment IDs"),
        Arg("--metrics", action="store_true", help="display full metrics"),
        Group(
            Arg("--csv", action="store_true", help="print as CSV"),
            Arg("--json", action="store_true", help="print as JSON"),
            Arg("--outdir", type=pathlib.Path, help="directory to save CSV files to"),
        ),
    ],
)

LOGS = Cmd(
    "logs",
    logs,
    "fetch logs of the first trial of an experiment",
    [experiment_id_arg(), Arg("--json", action="store_true", help="print as JSON"), *LOG_ARGS],
)

LIST_TRIALS = Cmd(
    "list-trials lt",
    list_trials,
    "list trials of experiment",
    [experiment_id_arg(), *PAGINATION_ARGS, CSV_OR_JSON],
)
