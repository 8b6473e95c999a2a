"""An allocation as a Slurm batch job: its ``sbatch`` options, batch script and job directory.

The mapping of det's slots onto Slurm (see docs/slurm.md):

- CPU slots: ``slots_per_trial`` S is ``--ntasks=S --cpus-per-task=C`` (C = ``cpus_per_slot``,
  default 1); Slurm may spread the tasks over nodes, and each node becomes one container of the
  allocation with as many slots as tasks it got. A task taking no slot (``slots_per_trial: 0``)
  still needs one CPU: ``--ntasks=1 --cpus-per-task=1``.
- GPU slots: S GPUs on nodes of G GPUs: ``--nodes=ceil(S/G) --ntasks-per-node=S/nodes
  --gres=gpu:S/nodes`` (S must then be a multiple of the per-node count); without GRES
  (``gres_supported: false``) whole nodes are asked for with ``--exclusive``.

Every job gets ``--no-requeue`` (a requeued det job would run twice: det restarts the trial
itself, from its checkpoint) and writes its output into the job directory, which the master tails.
"""

from __future__ import annotations

import json
import math
import os
import pathlib
import shlex
import shutil
import sys
from typing import Any

from determined.master.rm._types import LaunchSpec
from determined.master.rm.ray._run import task_environment
from determined.master.rm.slurm import _job
from determined.master.rm.slurm._commands import Partition

HELPER_NAME = "det_slurm_job.py"
SCRIPT_NAME = "batch.sh"
JOB_NAME_PREFIX = "det-"


def job_name(allocation_id: str) -> str:
    """The Slurm job name of an allocation (how ``reap_orphan`` recognises det's jobs)."""
    return JOB_NAME_PREFIX + allocation_id


def gpu_layout(slots: int, gpus_per_node: int) -> tuple[int, int] | None:
    """``(nodes, gpus per node)`` for ``slots`` GPUs on nodes of ``gpus_per_node``; None when
    the slots cannot be split evenly over whole nodes."""
    if slots <= 0 or gpus_per_node <= 0:
        return None
    per_node = min(slots, gpus_per_node)
    nodes = math.ceil(slots / per_node)
    if nodes * per_node != slots:
        return None
    return nodes, per_node


def sbatch_options(
    *,
    allocation_id: str,
    slots: int,
    partition: Partition,
    slot_type: str,
    cpus_per_slot: int | None,
    gres_supported: bool,
    job_dir: pathlib.Path,
    extra: tuple[str, ...] = (),
    experiment: dict[str, Any] | None = None,
) -> list[str]:
    """The ``sbatch`` options of an allocation of ``slots`` in ``partition`` (see module doc).

    ``experiment`` is the experiment's ``slurm`` section: ``slots_per_node`` caps the tasks (GPUs)
    per node, ``gpu_type`` names the GRES type (``--gres=gpu:a100:N``), ``sbatch_args`` come
    last (after the master's ``extra``), so they override it.
    """
    experiment = experiment or {}
    per_node_cap = int(experiment.get("slots_per_node") or 0)
    options = [
        f"--job-name={job_name(allocation_id)}",
        f"--partition={partition.name}",
        f"--chdir={job_dir}",
        f"--output={job_dir / _job.STDOUT_FILE}",
        f"--error={job_dir / _job.STDERR_FILE}",
        "--no-requeue",
        "--parsable",
    ]
    if slot_type == "cuda" and slots > 0:
        gpus_per_node = partition.max_gpus_per_node
        if per_node_cap:
            gpus_per_node = min(gpus_per_node, per_node_cap) if gpus_per_node else per_node_cap
        layout = gpu_layout(slots, gpus_per_node)
        if layout is None:
            raise ValueError(
                f"slots_per_trial {slots} cannot be split evenly over nodes of"
                f" {gpus_per_node} GPUs in partition {partition.name!r}"
            )
        nodes, per_node = layout
        gpu_type = str(experiment.get("gpu_type") or "")
        gres = f"gpu:{gpu_type}:{per_node}" if gpu_type else f"gpu:{per_node}"
        options += [f"--nodes={nodes}", f"--ntasks-per-node={per_node}"]
        options.append(f"--gres={gres}" if gres_supported else "--exclusive")
        if cpus_per_slot:
            options.append(f"--cpus-per-task={cpus_per_slot}")
    else:
        options += [f"--ntasks={max(slots, 1)}", f"--cpus-per-task={cpus_per_slot or 1}"]
        if per_node_cap:
            options.append(f"--ntasks-per-node={per_node_cap}")
    options += list(extra)
    options += [str(a) for a in experiment.get("sbatch_args") or []]
    return options


def batch_script(job_dir: pathlib.Path, *, cuda: bool, python: str | None = None) -> str:
    """The batch script: hand over to the helper (``_job``) in batch mode."""
    helper = job_dir / HELPER_NAME
    lines = [
        "#!/bin/bash",
        "# A det trial allocation (det-master's Slurm resource manager); see docs/slurm.md.",
        f"export DET_SLURM_CUDA={1 if cuda else 0}",
        f"exec {shlex.quote(python or sys.executable)} {shlex.quote(str(helper))} batch"
        f" {shlex.quote(str(job_dir))}",
    ]
    return "\n".join(lines) + "\n"


def prepare_job_dir(job_dir: pathlib.Path, *, cuda: bool) -> pathlib.Path:
    """A fresh job directory with the helper and the batch script; the script's path."""
    if job_dir.exists():
        shutil.rmtree(job_dir)
    job_dir.mkdir(parents=True)
    shutil.copyfile(_job.__file__, job_dir / HELPER_NAME)
    script = job_dir / SCRIPT_NAME
    script.write_text(batch_script(job_dir, cuda=cuda))
    script.chmod(0o755)
    return script


def stage_launch(job_dir: pathlib.Path, spec: LaunchSpec, *, cuda: bool, slots: int) -> None:
    """Copy the prepared context into the job directory and write ``launch.json`` last (the
    job starts the ranks once it appears)."""
    cwd, env, startup_hook = spec.cwd, dict(spec.env), spec.startup_hook
    work = job_dir / _job.WORK_DIR
    if work.exists():
        shutil.rmtree(work)
    shutil.copytree(cwd, work, symlinks=True)
    info: dict[str, Any] = {}
    info_path = env.get("DET_CLUSTER_INFO")
    if info_path and os.path.exists(info_path):
        with open(info_path) as f:
            info = json.load(f)
    task_env, path_prefix = task_environment(env)
    hook = os.path.relpath(startup_hook, cwd) if startup_hook else None
    launch = {
        "argv": list(spec.argv),
        "env": task_env,
        "path_prefix": path_prefix,
        "startup_hook": hook,
        "cluster_info": info,
        "cuda": cuda,
        "slots": slots,
    }
    _job.write_json(str(job_dir / _job.LAUNCH_FILE), launch)
