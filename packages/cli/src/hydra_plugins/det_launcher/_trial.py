"""The trial side of the det launcher: ``python -m hydra_plugins.det_launcher._trial JOBS_FILE``.

The master starts this as the entrypoint of every trial of a launcher experiment. It reads its job
number from the trial's hyperparameters, restores Hydra's state from the jobs file, runs the job
exactly as Hydra's basic launcher would (``run_job``: output directory, ``.hydra/``, logging,
callbacks, the task function), then stores the result in the run's metadata and, when the task
returned a number, reports it as the searcher's validation metric.

The job's output directory is made inside the trial's working directory: an absolute
``hydra.sweep.dir`` of the launching machine becomes ``multirun/<its last part>`` here.
"""

from __future__ import annotations

import logging
import os
import pickle
import sys
from collections.abc import Sequence
from typing import Any

from hydra_plugins.det_launcher import _protocol

log = logging.getLogger(__name__)


def _localize_output_dir(config: Any) -> None:
    from omegaconf import open_dict, read_write

    sweep_dir = str(config.hydra.sweep.dir)
    if os.path.isabs(sweep_dir):
        with read_write(config.hydra), open_dict(config.hydra):
            config.hydra.sweep.dir = os.path.join(
                "multirun", os.path.basename(sweep_dir.rstrip(os.sep)) or "sweep"
            )


def _report(result: dict[str, Any], metric: str) -> None:
    import determined as det

    with det.core.init() as core_context:
        core_context.train.set_metadata({_protocol.METADATA_KEY: result})
        value = _protocol.number(result.get("return_value"))
        if result["status"] == "COMPLETED" and value is not None:
            core_context.train.report_validation_metrics(steps_completed=0, metrics={metric: value})


def main(argv: Sequence[str]) -> int:
    """Run this trial's Hydra job; exit status 0 when the task function returned."""
    import determined as det

    if len(argv) != 1:
        print(f"usage: python -m {_protocol.TRIAL_MODULE} JOBS_FILE", file=sys.stderr)
        return 2
    info = det.get_cluster_info()
    if info is None or info.trial is None:
        print(
            f"{_protocol.TRIAL_MODULE}: runs only as a trial of a det experiment", file=sys.stderr
        )
        return 2
    num = int(info.trial.hparams[_protocol.JOB_HPARAM])
    metric = ""
    try:
        with open(argv[0], "rb") as f:
            payload = pickle.load(f)
        metric = str(payload["metric"])
        completed, value, overrides = _run_job(num, payload)
    except Exception as exc:  # the runner itself failed (unpickling, Hydra's state): say so
        result = _protocol.encode_result(num, [], False, exc)
        print(
            f"hydra job #{num} could not run:\n{result['traceback']}", file=sys.stderr, flush=True
        )
        _report(result, metric)
        return 1
    result = _protocol.encode_result(num, overrides, completed, value)
    if completed:
        print(f"hydra job #{num} returned {result['return_value']!r}", flush=True)
    else:
        trace = result.get("traceback") or result["error"]
        print(f"hydra job #{num} failed:\n{trace}", file=sys.stderr, flush=True)
    _report(result, metric)
    return 0 if completed else 1


def _run_job(num: int, payload: dict[str, Any]) -> tuple[bool, Any, list[str]]:
    """Restore Hydra's state and run job ``num`` as the basic launcher would."""
    from hydra.core.singleton import Singleton
    from hydra.core.utils import JobStatus, run_job, setup_globals

    setup_globals()
    Singleton.set_state(payload["singleton_state"])
    config = payload["jobs"][num]
    _localize_output_dir(config)
    overrides = [str(o) for o in config.hydra.overrides.task]
    print(f"hydra job #{num}: {' '.join(overrides)}", flush=True)
    job = run_job(
        hydra_context=payload["hydra_context"],
        task_function=payload["task_function"],
        config=config,
        job_dir_key="hydra.sweep.dir",
        job_subdir_key="hydra.sweep.subdir",
    )
    # job.return_value would re-raise a failure: the result is reported, not raised
    return job.status == JobStatus.COMPLETED, job._return_value, overrides


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
