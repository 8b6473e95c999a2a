"""The pure parts of the Slurm resource manager: config, Slurm output parsers, sbatch options, the
batch script, the output tail and how a job's end becomes an exit. No cluster needed."""

from __future__ import annotations

import pathlib
import signal

import pytest

from determined.master import rm as rm_module
from determined.master._config import MasterConfig
from determined.master.rm.slurm import (
    FileTail,
    Partition,
    SlurmError,
    SlurmResourceManager,
    batch_script,
    expand_counts,
    gpu_layout,
    gres_gpus,
    job_name,
    parse_config,
    parse_sbatch,
    parse_sinfo,
    parse_squeue,
    sbatch_options,
)
from determined.master.rm.slurm._jobs import SlurmJob, outcome
from determined.master.testing.rm_suite import make_request

# ------------------------------------------------------------------------------------- config


def test_config_defaults_and_fields() -> None:
    config = parse_config(
        {
            "type": "slurm",
            "job_storage_root": "/shared/det",
            "default_compute_resource_pool": "gpu",
            "partition_overrides": {"cpu": {"slot_type": "cpu", "cpus_per_slot": 2}},
            "slot_type": "gpu",
            "sbatch_args": ["--qos=low"],
            "poll_interval": 0.5,
        }
    )
    assert config.job_storage_root == "/shared/det"
    assert config.default_compute_resource_pool == "gpu"
    assert config.slot_type == "cuda"  # upstream's "gpu" spelling is accepted
    assert config.override("cpu").cpus_per_slot == 2
    assert config.override("other").slot_type is None
    assert config.sbatch_args == ("--qos=low",)
    assert (config.poll_interval, config.capacity_interval) == (0.5, 30.0)
    assert parse_config({"type": "slurm"}).job_storage_root.endswith(".det-slurm-jobs")


@pytest.mark.parametrize(
    ("section", "field"),
    [
        ({"container_run_type": "singularity"}, "resource_manager.container_run_type"),
        ({"slot_type": "tpu"}, "resource_manager.slot_type"),
        ({"poll_interval": 0}, "resource_manager.poll_interval"),
        ({"capacity_interval": "often"}, "resource_manager.capacity_interval"),
        ({"cpus_per_slot": 0}, "resource_manager.cpus_per_slot"),
        ({"sbatch_args": "--qos=low"}, "resource_manager.sbatch_args"),
        ({"gres_supported": "yes"}, "resource_manager.gres_supported"),
        ({"job_storage_root": 3}, "resource_manager.job_storage_root"),
        (
            {"partition_overrides": {"p": {"gpus": 1}}},
            "resource_manager.partition_overrides.p.gpus",
        ),
        (
            {"partition_overrides": {"p": {"slot_type": "x"}}},
            "resource_manager.partition_overrides.p.slot_type",
        ),
    ],
)
def test_config_errors_name_the_field(section: dict, field: str) -> None:
    with pytest.raises(ValueError, match=field.replace(".", r"\.")):
        parse_config({"type": "slurm", **section})


def test_the_hook_builds_a_slurm_rm_and_the_up_flag_selects_it() -> None:
    built = rm_module.resource_manager({"type": "slurm", "job_storage_root": "/tmp/x"})
    assert isinstance(built, SlurmResourceManager)
    with pytest.raises(ValueError, match="resource_manager.bogus"):
        rm_module.resource_manager({"type": "slurm", "bogus": 1})
    assert MasterConfig(slurm=True).resource_manager_config() == {"type": "slurm"}
    kept = {"type": "slurm", "job_storage_root": "/shared"}
    assert MasterConfig(slurm=True, resource_manager=kept).resource_manager_config() == kept


# ------------------------------------------------------------------------------------ parsers


def test_parse_squeue() -> None:
    text = "12|RUNNING|None|det-3.1\n13|PENDING|Resources|det-4.1\n14|CANCELLED by 0|None|x\n\n"
    jobs = parse_squeue(text)
    assert jobs["12"].state == "RUNNING" and jobs["12"].name == "det-3.1"
    assert jobs["13"].reason == "Resources"
    assert jobs["14"].state == "CANCELLED"


def test_parse_sinfo_counts_usable_nodes_only() -> None:
    text = "\n".join(
        [
            "debug*|up|2|4|(null)|idle",
            "debug*|up|1|4|(null)|mix",
            "debug*|up|1|4|(null)|down*",
            "debug*|up|1|4|(null)|drain",
            "gpu|up|2|32|gpu:a100:4(S:0-1),shard:8|alloc",
            "gpu|up|1|32|gpu:4|idle*",
            "off|down|1|8|(null)|idle",
        ]
    )
    parts = parse_sinfo(text)
    debug, gpu, off = parts["debug"], parts["gpu"], parts["off"]
    assert debug.default and not gpu.default
    assert (debug.nodes, debug.cpus, debug.gpus, debug.all_nodes) == (3, 12, 0, 5)
    assert (gpu.nodes, gpu.gpus, gpu.max_gpus_per_node) == (2, 8, 4)
    assert not off.up


@pytest.mark.parametrize(
    ("gres", "gpus"),
    [
        ("(null)", 0),
        ("gpu:4", 4),
        ("gpu:a100:2(S:0-1)", 2),
        ("gpu:a100:2,gpu:v100:1", 3),
        ("gpu", 0),
    ],
)
def test_gres_gpus(gres: str, gpus: int) -> None:
    assert gres_gpus(gres) == gpus


def test_expand_counts_and_sbatch_output() -> None:
    assert expand_counts("2(x3),1") == [2, 2, 2, 1]
    assert expand_counts("4") == [4]
    with pytest.raises(ValueError):
        expand_counts("two")
    assert parse_sbatch("123\n") == "123"
    assert parse_sbatch("123;cluster\n") == "123"
    with pytest.raises(SlurmError):
        parse_sbatch("sbatch: error: Batch job submission failed")


# ------------------------------------------------------------------------------ sbatch script


def test_cpu_slots_become_tasks(tmp_path: pathlib.Path) -> None:
    options = sbatch_options(
        allocation_id="3.1",
        slots=4,
        partition=Partition("debug", cpus=8, max_cpus_per_node=8),
        slot_type="cpu",
        cpus_per_slot=2,
        gres_supported=True,
        job_dir=tmp_path,
        extra=("--qos=low",),
    )
    assert f"--job-name={job_name('3.1')}" in options
    assert {"--partition=debug", "--ntasks=4", "--cpus-per-task=2", "--no-requeue"} <= set(options)
    assert f"--output={tmp_path / 'stdout.log'}" in options
    assert options[-1] == "--qos=low"
    zero = sbatch_options(
        allocation_id="3.2",
        slots=0,
        partition=Partition("debug"),
        slot_type="cpu",
        cpus_per_slot=None,
        gres_supported=True,
        job_dir=tmp_path,
    )
    assert {"--ntasks=1", "--cpus-per-task=1"} <= set(zero)


def test_gpu_slots_become_gres_per_node(tmp_path: pathlib.Path) -> None:
    partition = Partition("gpu", gpus=16, max_gpus_per_node=4)
    options = sbatch_options(
        allocation_id="5.1",
        slots=8,
        partition=partition,
        slot_type="cuda",
        cpus_per_slot=None,
        gres_supported=True,
        job_dir=tmp_path,
    )
    assert {"--nodes=2", "--ntasks-per-node=4", "--gres=gpu:4"} <= set(options)
    small = sbatch_options(
        allocation_id="5.2",
        slots=2,
        partition=partition,
        slot_type="cuda",
        cpus_per_slot=8,
        gres_supported=False,
        job_dir=tmp_path,
    )
    assert {"--nodes=1", "--ntasks-per-node=2", "--exclusive", "--cpus-per-task=8"} <= set(small)
    assert gpu_layout(6, 4) is None
    with pytest.raises(ValueError, match="split evenly"):
        sbatch_options(
            allocation_id="5.3",
            slots=6,
            partition=partition,
            slot_type="cuda",
            cpus_per_slot=None,
            gres_supported=True,
            job_dir=tmp_path,
        )


def test_batch_script_hands_over_to_the_helper(tmp_path: pathlib.Path) -> None:
    script = batch_script(tmp_path / "a b", cuda=True, python="/venv/bin/python")
    assert script.startswith("#!/bin/bash\n")
    assert "export DET_SLURM_CUDA=1" in script
    assert (
        f"exec /venv/bin/python '{tmp_path}/a b/det_slurm_job.py' batch '{tmp_path}/a b'" in script
    )


# ---------------------------------------------------------------------------- tail and outcome


def test_file_tail_reads_lines_as_they_are_appended(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "stdout.log"
    tail = FileTail(str(path), "stdout")
    assert tail.read() == []
    path.write_bytes(b"[rank=1] INFO: one\npart")
    (line,) = tail.read()
    assert (line.rank_id, line.level, line.message, line.stdtype) == (
        1,
        "LOG_LEVEL_INFO",
        "one",
        "stdout",
    )
    with open(path, "ab") as f:
        f.write(b"ial\r\nbar 10%\rbar 20%\r")
    assert [x.message for x in tail.read()] == ["partial", "bar 10%"]
    with open(path, "ab") as f:
        f.write(b"\nlast without end")
    assert [x.message for x in tail.finish()] == ["bar 20%", "last without end"]


def _job(tmp_path: pathlib.Path, **fields: object) -> SlurmJob:
    job = SlurmJob(make_request("7.1"), "debug", "cpu", 1, tmp_path, job_id="42")
    for key, value in fields.items():
        setattr(job, key, value)
    return job


def test_outcome_of_a_job(tmp_path: pathlib.Path) -> None:
    assert outcome(_job(tmp_path), {"exit_code": 3}) == (3, None)
    assert outcome(_job(tmp_path, kill_requested=True), {"exit_code": -15}) == (
        -signal.SIGKILL,
        None,
    )
    assert outcome(_job(tmp_path, kill_requested=True, state="CANCELLED"), None) == (
        -signal.SIGKILL,
        None,
    )
    code, error = outcome(_job(tmp_path, state="NODE_FAIL", reason="NodeDown"), None)
    assert code is None and error is not None and "NODE_FAIL" in error and "42" in error
    code, error = outcome(_job(tmp_path, state="CANCELLED"), None)
    assert code is None and "ended by Slurm" in str(error)
    assert outcome(_job(tmp_path, state="GONE"), None)[1] is not None


def test_the_experiments_slurm_section_shapes_the_job(tmp_path: pathlib.Path) -> None:
    gpus = Partition("gpu", gpus=16, max_gpus_per_node=8)
    options = sbatch_options(
        allocation_id="6.1",
        slots=8,
        partition=gpus,
        slot_type="cuda",
        cpus_per_slot=None,
        gres_supported=True,
        job_dir=tmp_path,
        extra=("--time=60",),
        experiment={"slots_per_node": 4, "gpu_type": "a100", "sbatch_args": ["--time=5"]},
    )
    assert {"--nodes=2", "--ntasks-per-node=4", "--gres=gpu:a100:4"} <= set(options)
    assert options[-2:] == ["--time=60", "--time=5"]  # the experiment's come last: they win
    cpus = sbatch_options(
        allocation_id="6.2",
        slots=6,
        partition=Partition("debug", cpus=64),
        slot_type="cpu",
        cpus_per_slot=None,
        gres_supported=True,
        job_dir=tmp_path,
        experiment={"slots_per_node": 2},
    )
    assert {"--ntasks=6", "--ntasks-per-node=2"} <= set(cpus)


def test_transient_errors_are_told_apart() -> None:
    from determined.master.rm.slurm._commands import is_transient

    assert is_transient(SlurmError("sbatch exited 1: Socket timed out on send/recv operation"))
    assert is_transient(SlurmError("sbatch exited 1: Unable to contact slurm controller"))
    assert not is_transient(SlurmError("sbatch exited 1: invalid partition specified: gpu"))
    assert not is_transient(SlurmError("sbatch exited 255: unrecognized option '--nope'"))


def test_the_chief_node_holds_its_rendezvous_ports_while_it_runs() -> None:
    """The job module (standard library only) holds the chief's c10d and collective ports bound
    for its process's life, the collective one marked for det's hub, so nothing else on the node
    takes them before the ranks bind them."""
    import errno
    import socket

    from determined.master.rm.slurm import _job

    env = _job.hold_rendezvous_ports()
    try:
        assert env[_job.RESERVED_PORT_ENV] == env[_job.COLLECTIVE_PORT_ENV]
        for name in (_job.C10D_PORT_ENV, _job.COLLECTIVE_PORT_ENV):
            with socket.socket() as sock, pytest.raises(OSError) as taken:
                sock.bind(("", int(env[name])))
            assert taken.value.errno == errno.EADDRINUSE
    finally:
        while _job._HELD:
            _job._HELD.pop().close()
