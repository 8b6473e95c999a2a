"""``det job list``: the queue of jobs holding or waiting for slots, as upstream prints it;
``det job update``/``update-batch`` change a job's priority or weight.

One row per job: its position in the queue (``#``, the number of jobs ahead of it), id, type,
name (``<name> (<experiment id>)`` for experiments), priority (weight under a fair-share
scheduler), submission time, slots acquired/needed, state and owner.
"""

from __future__ import annotations

import argparse
from typing import Any

from determined.cli import _render, _session
from determined.cli._declarative import Arg, Cmd, Group
from determined.cli._errors import CliError
from determined.cli._experiment_common import paginated


def _uses_priority(args: argparse.Namespace, pool: str | None) -> bool:
    """Whether the pool's scheduler orders by priority (else fair share: weight)."""
    pools = _session.api(args).cluster.resource_pools().get("resourcePools") or []
    for entry in pools:
        if (pool is None and entry.get("defaultComputePool", True)) or entry.get("name") == pool:
            kind = entry.get("schedulerType") or "SCHEDULER_TYPE_PRIORITY"
            return bool(kind == "SCHEDULER_TYPE_PRIORITY")
    raise CliError(f"resource pool {pool!r} not found")


def _name(job: dict[str, Any]) -> str:
    if job.get("type") == "TYPE_EXPERIMENT":
        return f"{job.get('name')} ({job.get('entityId')})"
    return str(job.get("name") or "")


def _row(job: dict[str, Any], by_priority: bool) -> list[Any]:
    summary = job.get("summary") or {}
    ahead = summary.get("jobsAhead")
    submitted = _render.format_time(job.get("submissionTime"))
    return [
        ahead if isinstance(ahead, int) and ahead > -1 else "N/A",
        job.get("jobId"),
        job.get("type"),
        _name(job),
        job.get("priority") if by_priority else job.get("weight"),
        submitted,
        f"{job.get('allocatedSlots', 0)}/{job.get('requestedSlots', 0)}",
        summary.get("state") or "N/A",
        job.get("username"),
    ]


def list_jobs(args: argparse.Namespace) -> None:
    by_priority = _uses_priority(args, args.resource_pool)
    params = {
        "resourcePool": args.resource_pool,
        "orderBy": "ORDER_BY_DESC" if args.reverse else "ORDER_BY_ASC",
    }
    wrapped = paginated(args, _session.api(args).cluster.jobs, "jobs", **params)
    jobs = [w.get("full") or w.get("limited") or {} for w in wrapped]
    if args.json:
        _render.print_json({"jobs": jobs})
        return
    if args.yaml:
        print(_render.dump_yaml({"jobs": jobs}), end="")
        return
    headers = [
        "#",
        "ID",
        "Type",
        "Job Name",
        "Priority" if by_priority else "Weight",
        "Submitted",
        "Slots (acquired/needed)",
        "State",
        "User",
    ]
    _render.print_table(headers, [_row(j, by_priority) for j in jobs], as_csv=args.csv)


def update(args: argparse.Namespace) -> None:
    change = {
        "jobId": args.job_id,
        "priority": args.priority,
        "weight": args.weight,
        "resourcePool": args.resource_pool,
    }
    _session.api(args).cluster.update_jobs([{k: v for k, v in change.items() if v is not None}])


def parse_operation(operation: str) -> dict[str, Any]:
    """``<jobID>.<operation>=<value>`` (operations: priority, weight, resource-pool) as an update.

    Raises:
        CliError: a malformed operation, or an unknown one.
    """
    job_id, dot, rest = operation.partition(".")
    if not dot or not job_id or "." in rest:
        raise CliError(
            f"Job {job_id} and its operation have an invalid format. Please ensure the update is"
            " formatted as <jobID>.<operation>=<value>."
        )
    name, equals, value = rest.partition("=")
    if not equals or "=" in value:
        raise CliError(
            f"The operation for job {job_id} has invalid format. Please ensure the operation is"
            " formatted as <operation>=<value>."
        )
    fields = {"priority": "priority", "weight": "weight", "resource_pool": "resourcePool"}
    field = fields.get(name.replace("-", "_"))
    if field is None:
        raise CliError(
            f"Invalid operation {name} specified for job {job_id}. Supported commands include:"
            " priority, weight, resource-pool."
        )
    try:
        parsed: Any = {"priority": int, "weight": float}.get(name, str)(value)
    except ValueError:
        raise CliError(f"job {job_id}: {name} must be a number, got {value!r}") from None
    return {"jobId": job_id, field: parsed}


def update_batch(args: argparse.Namespace) -> None:
    updates = [parse_operation(op) for op in args.operation]
    api = _session.api(args)
    for change in updates:
        api.cluster.update_jobs([change])


COMMANDS = [
    Cmd(
        "j|ob",
        None,
        "manage jobs",
        [
            Cmd(
                "list ls",
                list_jobs,
                "list jobs",
                [
                    Arg("-p", "--resource-pool", type=str, help="the target resource pool, if any"),
                    Arg("--limit", type=int, default=100, help="maximum items per page of results"),
                    Arg("--offset", type=int, default=0, help="number of items to skip"),
                    Arg(
                        "--pages",
                        choices=["1", "all"],
                        default="all",
                        help="'all': fetch every page; '1': fetch a single page",
                    ),
                    Arg("--reverse", action="store_true", help="list the queue back to front"),
                    Group(
                        Arg("--json", action="store_true", help="print as JSON"),
                        Arg("--yaml", action="store_true", help="print as YAML"),
                        Arg("--table", action="store_true", help="print as a table (default)"),
                        Arg("--csv", action="store_true", help="print as CSV"),
                    ),
                ],
                default=True,
            ),
            Cmd(
                "u|pdate",
                update,
                "update job",
                [
                    Arg("job_id", type=str, help="the target job ID"),
                    Group(
                        Arg("-p", "--priority", type=int, help="the new priority (1-99)"),
                        Arg("-w", "--weight", type=float, help="the new weight"),
                        Arg("--resource-pool", type=str, help="the pool to move the job to"),
                        required=True,
                    ),
                ],
            ),
            Cmd(
                "update-batch",
                update_batch,
                "batch update jobs",
                [
                    Arg(
                        "operation",
                        nargs="+",
                        type=str,
                        help="<jobID>.<operation>=<value>, operation one of priority, weight,"
                        " resource-pool",
                    )
                ],
            ),
        ],
    )
]
