"""The launcher's work: one batch of Hydra jobs -> one det experiment -> one JobReturn per job.

For each job the launcher composes the sweep config and prepares the local output directory
exactly as Hydra's basic launcher does (``<sweep dir>/<subdir>/.hydra/{config,hydra,overrides}.yaml``).
The jobs (their configs, the task function and Hydra's global state, pickled with cloudpickle) go
to the master with the app's code as the experiment's context; a ``grid`` searcher over the job
numbers (a ``categorical`` hyperparameter) runs one trial per job. When the experiment ends, each
job's result comes back from its run's metadata and the trial's logs are written to
``<job output dir>/<job name>.log``.
"""

from __future__ import annotations

import copy
import logging
import os
import pathlib
import shutil
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobRuntime, JobStatus, configure_log, setup_globals
from hydra.errors import CompactHydraException
from hydra.types import HydraContext, TaskFunction
from hydra_plugins.det_launcher import _protocol
from hydra_plugins.det_launcher._config import DetLauncherConf
from omegaconf import DictConfig, OmegaConf, open_dict, read_write

log = logging.getLogger(__name__)

TERMINAL_STATES = frozenset({"STATE_COMPLETED", "STATE_CANCELED", "STATE_ERROR", "STATE_DELETED"})
STAGING_LIMIT = 1 << 30
"""Copying more than this from the context directory stops the launch (a wrong context_dir)."""


class DetLauncherError(CompactHydraException):
    """A launch that cannot go ahead; Hydra prints the message as one line."""


class DetJobError(RuntimeError, CompactHydraException):
    """A job's task function raised in its trial, or the job never ran.

    The message names the error, the trial and the job's log file; Hydra prints it as is (the
    remote traceback is in that log file, not in a local stack trace).
    """


def launch(
    settings: DetLauncherConf,
    *,
    hydra_context: HydraContext,
    task_function: TaskFunction,
    config: DictConfig,
    job_overrides: Sequence[Sequence[str]],
    initial_job_idx: int,
) -> list[JobReturn]:
    """Run ``job_overrides`` as one experiment and return their results in order."""
    from determined import client

    setup_globals()
    configure_log(config.hydra.hydra_logging, config.hydra.verbose)
    pathlib.Path(str(config.hydra.sweep.dir)).mkdir(parents=True, exist_ok=True)
    url = client.master_address(settings.master)
    log.info(f"Launching {len(job_overrides)} jobs as one experiment on the det master at {url}")

    returns: list[JobReturn] = []
    jobs: dict[int, DictConfig] = {}
    for offset, overrides in enumerate(job_overrides):
        num = initial_job_idx + offset
        log.info(f"\t#{num} : {' '.join(o for o in overrides if not o.startswith('hydra.'))}")
        sweep_config = hydra_context.config_loader.load_sweep_config(config, list(overrides))
        with open_dict(sweep_config):
            sweep_config.hydra.job.id = num
            sweep_config.hydra.job.num = num
        returns.append(prepare_job(sweep_config))
        jobs[num] = resolved_output_dir(sweep_config)

    source = (
        pathlib.Path(settings.context_dir).expanduser()
        if settings.context_dir
        else app_root(task_function)
    )
    if not source.is_dir():
        raise DetLauncherError(f"hydra.launcher.context_dir: {str(source)!r} is not a directory")
    payload = {
        "hydra_context": hydra_context,
        "task_function": task_function,
        "singleton_state": Singleton.get_state(),
        "jobs": jobs,
        "metric": settings.metric,
    }
    name = settings.name or str(config.hydra.job.name)
    experiment = experiment_config(
        settings,
        name,
        {num: [str(o) for o in job.hydra.overrides.task] for num, job in jobs.items()},
    )
    session, experiment_id = submit(settings, url, experiment, source, payload, config)
    log.info(
        f"Created experiment {experiment_id} ({len(jobs)} trials): det experiment describe {experiment_id}"
    )
    if not settings.wait:
        for job_return in returns:
            job_return.status = JobStatus.COMPLETED
            job_return.return_value = None
        return returns
    try:
        state = wait_for_experiment(session, experiment_id)
        log.info(f"Experiment {experiment_id} ended {state}")
        collect_results(session, experiment_id, state, list(jobs), returns)
    except KeyboardInterrupt:
        log.warning(
            f"Experiment {experiment_id} keeps running on the master; "
            f"stop it with: det experiment kill {experiment_id}"
        )
        raise
    except (client.APIError, client.MasterNotFoundError) as exc:
        raise DetLauncherError(
            f"lost track of experiment {experiment_id} on {url}: {exc}"
        ) from None
    for num, job_return in zip(jobs, returns, strict=True):
        shown = " ".join(str(o) for o in job_return.overrides or ())
        if job_return.status == JobStatus.COMPLETED:
            log.info(f"\t#{num} : {shown} -> {job_return.return_value!r}")
        else:
            log.info(f"\t#{num} : {shown} -> failed")
    return returns


def prepare_job(sweep_config: DictConfig) -> JobReturn:
    """The job's local output directory and ``.hydra/`` files, and its JobReturn without a result
    (what ``hydra.core.utils.run_job`` does before and after calling the task function)."""
    from hydra import version

    hydra_config = HydraConfig.instance()
    original = hydra_config.cfg
    hydra_config.set_config(sweep_config)
    try:
        output_dir = os.path.join(
            str(OmegaConf.select(sweep_config, "hydra.sweep.dir")),
            str(OmegaConf.select(sweep_config, "hydra.sweep.subdir")),
        )
        with read_write(sweep_config.hydra.runtime), open_dict(sweep_config.hydra.runtime):
            sweep_config.hydra.runtime.output_dir = os.path.abspath(output_dir)
        hydra_config.set_config(sweep_config)
        task_cfg = copy.deepcopy(sweep_config)
        with read_write(task_cfg), open_dict(task_cfg):
            del task_cfg["hydra"]
        hydra_cfg = copy.deepcopy(hydra_config.cfg)
        assert isinstance(hydra_cfg, DictConfig)
        overrides = OmegaConf.to_container(sweep_config.hydra.overrides.task)
        assert isinstance(overrides, list)
        job_return = JobReturn(overrides=overrides, cfg=task_cfg, hydra_cfg=hydra_cfg)
        pathlib.Path(output_dir).mkdir(parents=True, exist_ok=True)
        chdir = hydra_cfg.hydra.job.chdir
        if chdir is None:
            chdir = not version.base_at_least("1.2")
        job_return.working_dir = output_dir if chdir else os.getcwd()
        if sweep_config.hydra.output_subdir is not None:
            hydra_dir = pathlib.Path(output_dir) / str(sweep_config.hydra.output_subdir)
            hydra_dir.mkdir(parents=True, exist_ok=True)
            for filename, node in (
                ("config.yaml", task_cfg),
                ("hydra.yaml", hydra_cfg),
                ("overrides.yaml", sweep_config.hydra.overrides.task),
            ):
                (hydra_dir / filename).write_text(OmegaConf.to_yaml(node), encoding="utf-8")
        job_return.task_name = JobRuntime.instance().get("name")
        return job_return
    finally:
        hydra_config.cfg = original


def resolved_output_dir(sweep_config: DictConfig) -> DictConfig:
    """A copy of the sweep config with ``hydra.sweep.dir``/``subdir`` resolved here (timestamps
    from this machine's clock, as every job of the sweep shares them)."""
    job = copy.deepcopy(sweep_config)
    with read_write(job.hydra), open_dict(job.hydra):
        job.hydra.sweep.dir = str(OmegaConf.select(sweep_config, "hydra.sweep.dir"))
        job.hydra.sweep.subdir = str(OmegaConf.select(sweep_config, "hydra.sweep.subdir"))
    return job


def app_root(task_function: TaskFunction) -> pathlib.Path:
    """The directory the app's code is imported from: the script's directory, or the directory
    above the top package of ``python -m pkg.app``."""
    module_name = getattr(task_function, "__module__", None) or "__main__"
    module = sys.modules.get(module_name)
    filename = getattr(module, "__file__", None)
    if not filename:
        return pathlib.Path.cwd()
    spec = getattr(module, "__spec__", None)
    dotted = spec.name if spec is not None and spec.name else module_name
    root = pathlib.Path(filename).resolve().parent
    if dotted not in ("__main__", "__mp_main__"):
        depth = dotted.count(".") + (1 if pathlib.Path(filename).name == "__init__.py" else 0)
        for _ in range(depth):
            root = root.parent
    return root


def output_roots(config: DictConfig, source: pathlib.Path) -> set[str]:
    """Top-level names under ``source`` that hold Hydra's outputs (never uploaded)."""
    names = set()
    for key in ("hydra.sweep.dir", "hydra.run.dir"):
        try:
            value = OmegaConf.select(config, key)
        except Exception:  # an interpolation that needs job state: nothing to leave out
            continue
        if not value:
            continue
        path = (pathlib.Path.cwd() / str(value)).resolve()
        try:
            relative = path.relative_to(source.resolve())
        except ValueError:
            continue
        if relative.parts:
            names.add(relative.parts[0])
    return names


def stage_context(source: pathlib.Path, target: pathlib.Path, leave_out: set[str]) -> None:
    """Copy ``source`` to ``target`` without Hydra's output directories and ``__pycache__``."""
    total = 0
    top = os.path.realpath(source)

    def ignore(directory: str, names: list[str]) -> set[str]:
        nonlocal total
        skipped = {name for name in names if name == "__pycache__"}
        if os.path.realpath(directory) == top:
            skipped |= leave_out & set(names)
        for name in names:
            path = os.path.join(directory, name)
            if name not in skipped and os.path.isfile(path) and not os.path.islink(path):
                total += os.path.getsize(path)
        if total > STAGING_LIMIT:
            raise DetLauncherError(
                f"hydra.launcher.context_dir: {source} holds over {STAGING_LIMIT >> 20} MiB; "
                "point context_dir at the app's directory or list large files in .detignore"
            )
        return skipped

    shutil.copytree(source, target, symlinks=True, ignore=ignore)


def experiment_config(
    settings: DetLauncherConf, name: str, overrides: Mapping[int, list[str]]
) -> dict[str, Any]:
    """The experiment: a grid over the job numbers, each trial running one job."""
    numbers = sorted(overrides)
    config: dict[str, Any] = {
        "name": name,
        "entrypoint": f"{settings.python} -m {_protocol.TRIAL_MODULE} {_protocol.JOBS_FILE}",
        "searcher": {
            "name": "grid",
            "metric": settings.metric,
            "smaller_is_better": settings.smaller_is_better,
            "max_concurrent_trials": settings.max_concurrent_trials,
        },
        "hyperparameters": {
            _protocol.JOB_HPARAM: {"type": "categorical", "vals": numbers},
            _protocol.OVERRIDES_HPARAM: {
                "type": "const",
                "val": {str(num): " ".join(overrides[num]) for num in numbers},
            },
        },
        "resources": dict(settings.resources),
        "max_restarts": settings.max_restarts,
    }
    return deep_merge(config, settings.experiment)


def deep_merge(base: dict[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    """``update`` merged into ``base``: mappings key by key, everything else replaced."""
    for key, value in update.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            base[key] = deep_merge(base[key], value)
        else:
            base[key] = copy.deepcopy(value)
    return base


def submit(
    settings: DetLauncherConf,
    url: str,
    experiment: dict[str, Any],
    source: pathlib.Path,
    payload: dict[str, Any],
    config: DictConfig,
) -> tuple[Any, int]:
    """Log in, upload the context with the jobs file, create the experiment."""
    import cloudpickle

    from determined import client

    with tempfile.TemporaryDirectory(prefix="det-hydra-") as staging:
        context = pathlib.Path(staging) / "context"
        stage_context(source, context, output_roots(config, source))
        jobs_file = pathlib.Path(staging) / _protocol.JOBS_FILE
        try:
            jobs_file.write_bytes(cloudpickle.dumps(payload))
        except Exception as exc:  # cloudpickle raises many types: a lock, a socket, a generator...
            raise DetLauncherError(
                f"the task function or its config cannot be pickled for the trials: {exc}"
            ) from None
        try:
            session = client.login(url, settings.user, settings.password)
            created = client.create_experiment(
                session, experiment, context, includes=[jobs_file], project_id=settings.project_id
            )
        except client.MasterNotFoundError:
            raise DetLauncherError(
                f"no master at {url} — start one with `det-master up` or set hydra.launcher.master"
            ) from None
        except client.UnauthenticatedError as exc:
            raise DetLauncherError(f"cannot log in to {url}: {exc.message}") from None
        except client.APIError as exc:
            message = " ".join(line.strip() for line in exc.message.splitlines() if line.strip())
            raise DetLauncherError(f"the master refused the experiment: {message}") from None
        except ValueError as exc:  # the context: too large, or a file named like the jobs file
            raise DetLauncherError(f"hydra.launcher.context_dir: {exc}") from None
    assert created.id is not None
    return session, created.id


def wait_for_experiment(session: Any, experiment_id: int) -> str:
    """Poll until the experiment is in a terminal state; return that state."""
    from determined import client

    experiments = client.ExperimentsClient(session)
    delay = 0.1
    while True:
        answer = experiments.get(experiment_id)
        state = str((answer.get("experiment") or {}).get("state") or "")
        if state in TERMINAL_STATES:
            return state
        time.sleep(delay)
        delay = min(delay * 1.5, 1.0)


def collect_results(
    session: Any,
    experiment_id: int,
    state: str,
    numbers: list[int],
    returns: list[JobReturn],
) -> None:
    """Fill in each JobReturn from its trial's run metadata; write the trial's logs locally."""
    from determined import client

    api = client.Client(session)
    answer = api.experiments.trials(experiment_id)
    trials: dict[int, dict[str, Any]] = {}
    for trial in sorted(answer.get("trials") or [], key=lambda t: int(t["id"])):
        num = (trial.get("hparams") or {}).get(_protocol.JOB_HPARAM)
        if num is not None:
            trials[int(num)] = trial
    for num, job_return in zip(numbers, returns, strict=True):
        trial = trials.get(num)
        if trial is None:
            job_return.status = JobStatus.FAILED
            job_return.return_value = DetJobError(
                f"hydra job #{num} never ran: experiment {experiment_id} ended {state}"
            )
            continue
        trial_id = int(trial["id"])
        output_dir = str(job_return.hydra_cfg.hydra.runtime.output_dir)  # type: ignore[union-attr]
        log_file = pathlib.Path(output_dir) / f"{job_return.task_name}.log"
        write_logs(session, trial_id, log_file)
        metadata = api.trials.get_run_metadata(trial_id)
        result = (metadata.get("metadata") or {}).get(_protocol.METADATA_KEY)
        where = f"trial {trial_id} of experiment {experiment_id}; its log: {log_file}"
        if isinstance(result, dict) and result.get("status") == "COMPLETED":
            job_return.status = JobStatus.COMPLETED
            job_return.return_value = result.get("return_value")
        elif isinstance(result, dict):
            job_return.status = JobStatus.FAILED
            job_return.return_value = DetJobError(
                f"hydra job #{num} raised {result.get('error_type')}: {result.get('error')} "
                f"({where})"
            )
        else:
            job_return.status = JobStatus.FAILED
            job_return.return_value = DetJobError(
                f"hydra job #{num} ended {trial.get('state')} without a result ({where})"
            )


def write_logs(session: Any, trial_id: int, path: pathlib.Path) -> None:
    """The trial's logs, as the master recorded them, into the job's local log file."""
    from determined import client

    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for entry in client.TrialsClient(session).logs(trial_id):
            line = str(entry.get("log") or entry.get("message") or "")
            f.write(line if line.endswith("\n") else line + "\n")
