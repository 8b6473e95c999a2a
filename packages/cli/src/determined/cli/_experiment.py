"""``det experiment`` (alias ``e``): create, inspect, steer and clean up experiments."""

from __future__ import annotations

import argparse
import base64
import json
import pathlib
import pprint
import sys
import time
from collections.abc import Callable
from typing import Any

from determined import client
from determined.cli import _render, _session
from determined.cli._checkpoint import render_checkpoint
from determined.cli._config_file import (
    CONFIG_HELP,
    apply_overrides,
    parse_config,
    read_config_text,
)
from determined.cli._declarative import Arg, Cmd, Group
from determined.cli._download import download_checkpoint
from determined.cli._errors import CliError
from determined.cli._logs import LOG_ARGS, show_trial_logs
from determined.cli._workloads import trial_workloads, workload_rows

TERMINAL = ("STATE_COMPLETED", "STATE_CANCELED", "STATE_ERROR", "STATE_DELETED")
MAX_CONTEXT_SIZE = 95 * 1024 * 1024
"""Upstream's limit on an uploaded context (the master's 96 MiB request cap less 1 MiB)."""

WARNING_MESSAGES = {
    "LAUNCH_WARNING_CURRENT_SLOTS_EXCEEDED": (
        "Warning: The requested job requires more slots than currently available. "
        "You may need to increase cluster resources in order for the job to run."
    ),
}

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


def _paginated(args: argparse.Namespace, path: str, key: str, **params: Any) -> list[Any]:
    """Every item of a paginated listing (or one page with ``--pages 1``)."""
    offset = int(getattr(args, "offset", 0) or 0)
    limit = getattr(args, "limit", None)
    items: list[Any] = []
    while True:
        answer = _session.get(args, path, offset=offset, limit=limit, **params)
        page = answer.get(key) or []
        items.extend(page)
        pagination = answer.get("pagination") or {}
        end = int(pagination.get("endIndex", offset + len(page)))
        total = int(pagination.get("total", end))
        if getattr(args, "pages", "all") == "1" or end >= total or not page:
            return items
        offset = end


def get_experiment(args: argparse.Namespace, experiment_id: int | str) -> dict[str, Any]:
    """``GET /api/v1/experiments/{id}`` (the whole answer: experiment, config, jobSummary)."""
    return dict(_session.get(args, f"/api/v1/experiments/{experiment_id}"))


def get_trials(args: argparse.Namespace, experiment_id: int | str) -> list[dict[str, Any]]:
    """Every trial of an experiment, lowest id first."""
    answer = _session.get(args, f"/api/v1/experiments/{experiment_id}/trials")
    return sorted(answer.get("trials") or [], key=lambda t: int(t["id"]))


def _experiment_id(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid experiment ID {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"invalid experiment ID {text!r}")
    return value


def experiment_id_arg(help_text: str = "experiment ID") -> Arg:
    return Arg("experiment_id", type=_experiment_id, help=help_text)


# ---- create / continue --------------------------------------------------------------------------


def _context_files(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The context directory and includes as upstream's File list, refused when too large."""
    model_def = args.model_def
    includes = list(args.include)
    if model_def is not None and not pathlib.Path(model_def).exists():
        raise CliError(f"model definition directory '{model_def}' does not exist")
    if model_def is not None and not pathlib.Path(model_def).is_dir():
        # a single file is a context of that one file, as upstream allows
        includes.insert(0, model_def)
        model_def = None
    for include in includes:
        if not pathlib.Path(include).exists():
            raise CliError(f"include '{include}' does not exist")
    try:
        files = client.read_context_dir(model_def, includes, limit=sys.maxsize)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    sizes = {f["path"]: len(f.get("content") or "") * 3 // 4 for f in files}
    total = sum(sizes.values())
    if total > MAX_CONTEXT_SIZE:
        biggest = sorted(sizes.items(), key=lambda kv: kv[1], reverse=True)[:5]
        named = ", ".join(f"{path} ({_render.sizeof_fmt(size)})" for path, size in biggest)
        raise CliError(
            f"the context is {_render.sizeof_fmt(total)}, over the "
            f"{_render.sizeof_fmt(MAX_CONTEXT_SIZE)} limit; biggest files: {named}. "
            "List files to leave out in a .detignore file"
        )
    count = sum(1 for f in files if f.get("type") == ord("0"))
    print(f"Preparing files to send to master... {_render.sizeof_fmt(total)} and {count} files")
    return files


def _print_warnings(answer: dict[str, Any]) -> None:
    for warning in answer.get("warnings") or []:
        text = WARNING_MESSAGES.get(str(warning), f"Warning: {warning}")
        print(_render.colored(text, "yellow", sys.stderr), file=sys.stderr)
    for warning in answer.get("configWarnings") or []:
        print(_render.colored(f"Warning: {warning}", "yellow", sys.stderr), file=sys.stderr)


def follow_first_trial(args: argparse.Namespace, experiment_id: int) -> None:
    """Wait for the experiment's first trial and stream its logs until it ends."""
    print("Waiting for first trial to begin...")
    sys.stdout.flush()
    delay = 0.1
    while True:
        trials = get_trials(args, experiment_id)
        if trials:
            break
        state = get_experiment(args, experiment_id)["experiment"]["state"]
        if state in TERMINAL:
            raise CliError(
                f"experiment {experiment_id} ended ({_render.state_name(state)}) "
                "before any trial started"
            )
        time.sleep(delay)
        delay = min(delay * 1.5, 1.0)
    first = int(trials[0]["id"])
    print(f"Following first trial with ID {first}")
    sys.stdout.flush()
    follow = argparse.Namespace(follow=True, json=False)
    show_trial_logs(_session.setup_session(args), first, follow)


def create(args: argparse.Namespace) -> None:
    text = read_config_text(args.config_file)
    config = parse_config(text, args.config_file)
    if args.config:
        # Re-serialising drops the file's comments, so only do it when there are overrides.
        config = apply_overrides(config, args.config)
        text = _render.dump_yaml(config)
    files = _context_files(args)
    body: dict[str, Any] = {
        "config": text,
        "modelDefinition": files,
        "activate": not args.paused,
    }
    if args.project_id is not None:
        body["projectId"] = args.project_id
    answer = _session.post(args, "/api/v1/experiments", body)
    experiment_id = int(answer["experiment"]["id"])
    print(f"Created experiment {experiment_id}")
    sys.stdout.flush()
    _print_warnings(answer)
    if args.follow_first_trial and not args.paused:
        follow_first_trial(args, experiment_id)


def continue_experiment(args: argparse.Namespace) -> None:
    if args.config_file:
        config = parse_config(read_config_text(args.config_file), args.config_file)
        config = apply_overrides(config, args.config)
    else:
        config = apply_overrides({}, args.config)
    body = {"id": args.experiment_id, "overrideConfig": _render.dump_yaml(config) if config else ""}
    _session.post(args, "/api/v1/experiments/continue", body)
    print(f"Continued experiment {args.experiment_id}")
    if args.follow_first_trial:
        follow_first_trial(args, args.experiment_id)


# ---- lifecycle ------------------------------------------------------------------------------------


def _lifecycle(action: str, past: str) -> Callable[[argparse.Namespace], None]:
    def run(args: argparse.Namespace) -> None:
        _session.post(args, f"/api/v1/experiments/{args.experiment_id}/{action}")
        print(f"{past} experiment {args.experiment_id}")

    run.__name__ = action
    return run


def delete(args: argparse.Namespace) -> None:
    if args.yes or _render.yes_or_no(
        "Deleting an experiment will result in the unrecoverable \n"
        "deletion of all associated logs, checkpoints, and other \n"
        "metadata associated with the experiment. For a recoverable \n"
        "alternative, see the 'det archive' command. Do you still \n"
        "wish to proceed?"
    ):
        _session.delete(args, f"/api/v1/experiments/{args.experiment_id}")
        print(f"Deletion of experiment {args.experiment_id} is in progress")
    else:
        print("Aborting experiment deletion.")


def wait(args: argparse.Namespace) -> int:
    if args.polling_interval <= 0:
        raise CliError("--polling-interval: must be > 0")
    started = time.monotonic()
    tty = sys.stderr.isatty()
    while True:
        experiment = get_experiment(args, args.experiment_id)["experiment"]
        state = experiment["state"]
        if tty:
            elapsed = int(time.monotonic() - started)
            progress = _render.format_percent(experiment.get("progress")) or "-"
            sys.stderr.write(
                f"\rExperiment {args.experiment_id}: {_render.state_name(state)} "
                f"{progress} ({elapsed // 60}m{elapsed % 60:02d}s)   "
            )
            sys.stderr.flush()
        if state in TERMINAL:
            break
        time.sleep(args.polling_interval)
    if tty:
        sys.stderr.write("\n")
    print(f"Experiment {args.experiment_id} is {_render.state_name(state)}")
    return 0 if state == "STATE_COMPLETED" else 1


# ---- inspection -----------------------------------------------------------------------------------


def list_experiments(args: argparse.Namespace) -> None:
    params: dict[str, Any] = {}
    if not args.all:
        params["archived"] = "false"
        params["users"] = [_session.current_username(args)]
    experiments = _paginated(args, "/api/v1/experiments", "experiments", **params)
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
            ids.append(_experiment_id(part.strip()))
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
    trials = _paginated(args, f"/api/v1/experiments/{args.experiment_id}/trials", "trials")
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
    answer = _session.get(args, f"/api/v1/experiments/{experiment_id}/checkpoints", **params)
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
        answer = _session.get(
            args,
            f"/api/v1/experiments/{args.experiment_id}/checkpoints",
            sortByAttr="SORT_BY_END_TIME",
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
    answer = _session.get(args, f"/api/v1/experiments/{args.experiment_id}/model_def")
    target = pathlib.Path(args.output_dir) / f"experiment_{args.experiment_id}_model_def.tgz"
    target.write_bytes(base64.b64decode(answer.get("b64Tgz") or ""))
    print(f"Wrote {target}")


# ---- attributes -------------------------------------------------------------------------------------


def _patch(args: argparse.Namespace, body: dict[str, Any]) -> dict[str, Any]:
    return dict(_session.patch(args, f"/api/v1/experiments/{args.experiment_id}", body))


def add_label(args: argparse.Namespace) -> None:
    labels = list(get_experiment(args, args.experiment_id)["experiment"].get("labels") or [])
    if args.label not in labels:
        _patch(args, {"labels": [*labels, args.label]})
    print(f"Added label '{args.label}' to experiment {args.experiment_id}")


def remove_label(args: argparse.Namespace) -> None:
    labels = list(get_experiment(args, args.experiment_id)["experiment"].get("labels") or [])
    if args.label in labels:
        _patch(args, {"labels": [label for label in labels if label != args.label]})
    print(f"Removed label '{args.label}' from experiment {args.experiment_id}")


def set_description(args: argparse.Namespace) -> None:
    _patch(args, {"description": args.description})
    print(f"Set description of experiment {args.experiment_id} to '{args.description}'")


def set_name(args: argparse.Namespace) -> None:
    _patch(args, {"name": args.name})
    print(f"Set name of experiment {args.experiment_id} to '{args.name}'")


def set_max_slots(args: argparse.Namespace) -> None:
    _patch(args, {"resources": {"maxSlots": args.max_slots}})
    print(f"Set `max_slots` of experiment {args.experiment_id} to {args.max_slots}")


def set_weight(args: argparse.Namespace) -> None:
    _patch(args, {"resources": {"weight": args.weight}})
    print(f"Set `weight` of experiment {args.experiment_id} to {args.weight}")


def set_priority(args: argparse.Namespace) -> None:
    _patch(args, {"resources": {"priority": args.priority}})
    print(f"Set `priority` of experiment {args.experiment_id} to {args.priority}")


def set_gc_policy(args: argparse.Namespace) -> None:
    policy = {
        "save_experiment_best": args.save_experiment_best,
        "save_trial_best": args.save_trial_best,
        "save_trial_latest": args.save_trial_latest,
    }
    for name, value in policy.items():
        if value < 0:
            raise CliError(f"--{name.replace('_', '-')}: must be >= 0, got {value}")
    if args.yes or _render.yes_or_no(
        "Changing the checkpoint garbage collection policy of an experiment may result\n"
        "in the unrecoverable deletion of checkpoints.  Do you wish to proceed?"
    ):
        _patch(
            args,
            {
                "checkpointStorage": {
                    "saveExperimentBest": args.save_experiment_best,
                    "saveTrialBest": args.save_trial_best,
                    "saveTrialLatest": args.save_trial_latest,
                }
            },
        )
        print(f"Set GC policy of experiment {args.experiment_id} to\n{pprint.pformat(policy)}")
    else:
        print("Aborting operations.")


def _none_or_int(text: str) -> int | None:
    if text.strip().lower() in ("null", "none"):
        return None
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer or 'none', got {text!r}") from None


def _bool(text: str) -> bool:
    value = text.strip().lower()
    if value in ("y", "yes", "t", "true", "on", "1"):
        return True
    if value in ("n", "no", "f", "false", "off", "0"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


_EXP = experiment_id_arg
_CSV_OR_JSON = Group(
    Arg("--csv", action="store_true", help="print as CSV"),
    Arg("--json", action="store_true", help="print as JSON (det)"),
)

COMMANDS = [
    Cmd(
        "e|xperiment",
        None,
        "manage experiments",
        [
            Cmd(
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
                    _CSV_OR_JSON,
                ],
                default=True,
            ),
            Cmd("config", config, "display experiment config", [_EXP()]),
            Cmd(
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
            ),
            Cmd(
                "logs",
                logs,
                "fetch logs of the first trial of an experiment",
                [_EXP(), Arg("--json", action="store_true", help="print as JSON"), *LOG_ARGS],
            ),
            Cmd(
                "download-model-def",
                download_model_def,
                "download model definition",
                [_EXP(), Arg("--output-dir", default=".", help="output directory")],
            ),
            Cmd(
                "list-trials lt",
                list_trials,
                "list trials of experiment",
                [_EXP(), *PAGINATION_ARGS, _CSV_OR_JSON],
            ),
            Cmd(
                "list-checkpoints lc",
                list_checkpoints,
                "list checkpoints of experiment",
                [
                    _EXP(),
                    Arg(
                        "--best",
                        type=int,
                        metavar="N",
                        help="the best N checkpoints by the searcher metric (only checkpoints "
                        "with a validation metric count)",
                    ),
                    _CSV_OR_JSON,
                ],
            ),
            Cmd(
                "create",
                create,
                "create experiment",
                [
                    Arg("config_file", help="experiment config file (.yaml)"),
                    Arg(
                        "model_def",
                        nargs="?",
                        default=None,
                        help="directory containing the model definition (the context)",
                    ),
                    Arg(
                        "-i",
                        "--include",
                        action="append",
                        default=[],
                        help="additional files or directories to copy into the context",
                    ),
                    Arg("--project_id", type=int, help="place this experiment inside this project"),
                    Arg("--config", action="append", default=[], help=CONFIG_HELP),
                    Group(
                        Arg(
                            "-f",
                            "--follow-first-trial",
                            action="store_true",
                            help="follow the logs of the first trial that is created",
                        ),
                        Arg("--paused", action="store_true", help="do not activate the experiment"),
                    ),
                ],
            ),
            Cmd(
                "continue",
                continue_experiment,
                "resume or recover training for a single-searcher experiment",
                [
                    _EXP("experiment ID to continue"),
                    Arg("--config-file", help="experiment config file (.yaml) with overrides"),
                    Arg("--config", action="append", default=[], help=CONFIG_HELP),
                    Arg(
                        "-f",
                        "--follow-first-trial",
                        action="store_true",
                        help="follow logs of the trial that is being continued",
                    ),
                ],
            ),
            Cmd(
                "activate unpause",
                _lifecycle("activate", "Activated"),
                "activate experiment, i.e., unpause a paused experiment",
                [_EXP("experiment ID to activate")],
            ),
            Cmd(
                "cancel",
                _lifecycle("cancel", "Canceled"),
                "cancel experiment",
                [_EXP("experiment ID to cancel")],
            ),
            Cmd(
                "pause",
                _lifecycle("pause", "Paused"),
                "pause experiment",
                [_EXP("experiment ID to pause")],
            ),
            Cmd(
                "kill",
                _lifecycle("kill", "Killed"),
                "kill experiment",
                [_EXP()],
            ),
            Cmd(
                "archive",
                _lifecycle("archive", "Archived"),
                "archive experiment",
                [_EXP("experiment ID to archive")],
            ),
            Cmd(
                "unarchive",
                _lifecycle("unarchive", "Unarchived"),
                "unarchive experiment",
                [_EXP("experiment ID to unarchive")],
            ),
            Cmd(
                "delete",
                delete,
                "delete experiment",
                [
                    _EXP("experiment ID to delete"),
                    Arg("--yes", action="store_true", help="automatically answer yes to prompts"),
                ],
            ),
            Cmd(
                "download",
                download,
                "download checkpoints for an experiment",
                [
                    _EXP("experiment ID to download"),
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
                        type=_bool,
                        default=None,
                        help="sort order for --sort-by (true or false)",
                    ),
                    Arg("-q", "--quiet", action="store_true", help="only print the paths"),
                ],
            ),
            Cmd(
                "wait",
                wait,
                "wait for experiment to reach terminal state (exit 1 unless COMPLETED)",
                [
                    _EXP(),
                    Arg(
                        "--polling-interval",
                        type=float,
                        default=5,
                        help="the interval (in seconds) to poll for updated state",
                    ),
                ],
            ),
            Cmd(
                "label",
                None,
                "manage experiment labels",
                [
                    Cmd("add", add_label, "add label", [_EXP(), Arg("label", help="label")]),
                    Cmd(
                        "remove",
                        remove_label,
                        "remove label",
                        [_EXP(), Arg("label", help="label")],
                    ),
                ],
            ),
            Cmd(
                "set",
                None,
                "set experiment attributes",
                [
                    Cmd(
                        "description",
                        set_description,
                        "set experiment description",
                        [_EXP(), Arg("description", help="experiment description")],
                    ),
                    Cmd(
                        "name",
                        set_name,
                        "set experiment name",
                        [_EXP(), Arg("name", help="experiment name")],
                    ),
                    Cmd(
                        "gc-policy",
                        set_gc_policy,
                        "set experiment GC policy",
                        [
                            _EXP(),
                            Arg("--save-experiment-best", type=int, required=True),
                            Arg("--save-trial-best", type=int, required=True),
                            Arg("--save-trial-latest", type=int, required=True),
                            Arg("--yes", action="store_true", help="answer yes to prompts"),
                        ],
                    ),
                    Cmd(
                        "max-slots",
                        set_max_slots,
                        "set `max_slots` of experiment",
                        [_EXP(), Arg("max_slots", type=_none_or_int, help="max slots")],
                    ),
                    Cmd(
                        "weight",
                        set_weight,
                        "set `weight` of experiment",
                        [_EXP(), Arg("weight", type=float, help="weight")],
                    ),
                    Cmd(
                        "priority",
                        set_priority,
                        "set `priority` of experiment",
                        [_EXP(), Arg("priority", type=int, help="priority")],
                    ),
                ],
            ),
        ],
    )
]
