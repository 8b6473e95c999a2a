"""``python -m determined.launch.deepspeed [--trial MODULE:Class | [OVERRIDES... --] SCRIPT...]``

Runs SCRIPT under DeepSpeed's launcher (``python -m deepspeed.launcher.runner``, what the
``deepspeed`` command runs) with one process per slot of each container of the allocation (from
``det.get_cluster_info()``), every process wrapped by ``wrap_rank``. ``--trial MODULE:Class`` runs a
legacy Trial class (``python -m determined.launch.trial``) instead of a script. Options given before
``--`` are passed to DeepSpeed's launcher after det's own (``--num_gpus 2`` off-cluster, ...).

- One container: ``--num_gpus`` is the container's slot count (DeepSpeed assigns GPUs from
  ``CUDA_VISIBLE_DEVICES`` itself when it is set), the rendezvous and det's collective ports are
  ports this launcher holds reserved until the job ends (``_util.reserve_server_ports`` and
  ``reserve_ports``), so concurrent trials on one machine do not collide and nothing else on the
  machine takes them before the ranks bind them.
- Several containers: a hostfile (``host slots=N`` per container) and ``--no_ssh --node_rank``:
  every container starts its own node's processes, so no sshd/pdsh is needed (upstream ran sshd in
  every container). The rendezvous port is 29500 (``DET_DEEPSPEED_MASTER_PORT`` overrides it).

Off-cluster it runs one node with one process unless the overrides say otherwise. Sets
``USE_DEEPSPEED=1`` (``DistributedContext.from_deepspeed`` then reads the launcher's ``RANK``,
``LOCAL_RANK``, ``LOCAL_SIZE``, ``CROSS_RANK``, ...) and ``DET_CHIEF_IP``. Workers get
``--no_local_rank``: scripts need not accept ``--local_rank``. The exit status is the launcher's;
SIGTERM/SIGINT reach the whole process tree. This module imports no DeepSpeed itself.
"""

from __future__ import annotations

import os
import secrets
import shutil
import sys
import tempfile
from collections.abc import Sequence

import determined as det
from determined.core._collective import KEY_ENV
from determined.launch import _util

DEFAULT_MASTER_PORT = 29500
MASTER_PORT_ENV = "DET_DEEPSPEED_MASTER_PORT"
HOSTFILE_ENV = "DET_DEEPSPEED_HOSTFILE_PATH"
USAGE = (
    "usage: python -m determined.launch.deepspeed --trial MODULE:TrialClass\n"
    "       python -m determined.launch.deepspeed [DEEPSPEED_OVERRIDES... --] SCRIPT..."
)
# Launcher options that choose the processes themselves: when given, det adds no --num_gpus.
_RESOURCE_OPTIONS = ("--num_gpus", "--num_nodes", "--include", "--exclude", "-i", "-e")


def parse_args(args: Sequence[str]) -> tuple[list[str], list[str]]:
    """``(launcher overrides, script)``; ValueError for a malformed command line.

    ``--trial MODULE:Class`` becomes the script ``python -m determined.launch.trial MODULE:Class``.
    Overrides are recognised only when the first argument is an option and a ``--`` follows.
    """
    args = list(args)
    if args and (args[0] == "--trial" or args[0].startswith("--trial=")):
        if args[0] == "--trial":
            if len(args) < 2:
                raise ValueError("--trial needs MODULE:TrialClass")
            spec, rest = args[1], args[2:]
        else:
            spec, rest = args[0].split("=", 1)[1], args[1:]
        if rest:
            raise ValueError(f"extra arguments after --trial {spec}: {' '.join(rest)}")
        return [], [sys.executable, "-m", "determined.launch.trial", spec]
    if args and args[0] == "--":
        return [], args[1:]
    if args and args[0].startswith("-"):
        if "--" not in args:
            raise ValueError(
                f"{args[0]}: launcher options must be followed by -- and the script to run"
            )
        index = args.index("--")
        return args[:index], args[index + 1 :]
    return [], args


def _has_option(overrides: Sequence[str], names: Sequence[str]) -> bool:
    return any(arg == name or arg.startswith(name + "=") for arg in overrides for name in names)


def write_hostfile(path: str, hosts: Sequence[str], slot_counts: Sequence[int]) -> None:
    """A DeepSpeed hostfile: one ``HOST slots=N`` line per container."""
    if len(hosts) != len(slot_counts):
        raise ValueError(f"{len(hosts)} container addresses but {len(slot_counts)} slot counts")
    with open(path, "w") as hostfile:
        hostfile.writelines(
            f"{host} slots={slots}\n" for host, slots in zip(hosts, slot_counts, strict=True)
        )


def create_launch_cmd(
    overrides: Sequence[str],
    script: Sequence[str],
    env: dict[str, str],
    cluster_info: det.ClusterInfo | None,
    workdir: str,
) -> list[str]:
    """The DeepSpeed launcher's command line; also sets det's variables in ``env``.

    ``workdir`` is a private directory for the hostfile of a multi-container allocation.
    """
    if cluster_info is not None:
        hosts = list(cluster_info.container_addrs) or ["127.0.0.1"]
        node_rank = cluster_info.container_rank
        counts = list(cluster_info.container_slot_counts)
        slots = counts[node_rank] if node_rank < len(counts) else len(cluster_info.slot_ids)
    else:
        hosts, node_rank, counts, slots = ["127.0.0.1"], 0, [1], 1
    chief_ip = hosts[0]
    env["USE_DEEPSPEED"] = "1"
    env["DET_CHIEF_IP"] = chief_ip
    cmd = [sys.executable, "-m", "deepspeed.launcher.runner"]
    if len(hosts) == 1:
        (master_port,) = _util.reserve_server_ports(1)  # rank 0's torch store binds it
        _util.reserve_collective_port(env)
        # Every rank is a child of this process: a fresh key keeps other local users out.
        env.setdefault(KEY_ENV, secrets.token_hex(16))
        visible = env.get("CUDA_VISIBLE_DEVICES", "").strip()
        if not visible and not _has_option(overrides, _RESOURCE_OPTIONS):
            cmd += ["--num_gpus", str(max(slots, 1))]
        cmd += ["--master_addr", "127.0.0.1", "--master_port", str(master_port)]
    else:
        hostfile = os.path.join(workdir, "hostfile")
        write_hostfile(hostfile, hosts, counts)
        env[HOSTFILE_ENV] = hostfile
        port = env.get(MASTER_PORT_ENV) or str(DEFAULT_MASTER_PORT)
        cmd += [
            "--hostfile", hostfile,
            "--no_ssh", "--node_rank", str(node_rank),
            "--master_addr", chief_ip, "--master_port", port,
        ]  # fmt: skip
    return [
        *cmd,
        "--no_python", "--no_local_rank",
        *overrides,
        "--", sys.executable, "-m", "determined.launch.wrap_rank", "RANK", "--", *script,
    ]  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    try:
        overrides, script = parse_args(sys.argv[1:] if argv is None else argv)
    except ValueError as exc:
        print(f"determined.launch.deepspeed: {exc}\n{USAGE}", file=sys.stderr)
        return 2
    if not script:
        print(USAGE, file=sys.stderr)
        return 2
    env = dict(os.environ)
    workdir = tempfile.mkdtemp(prefix="det-deepspeed-")
    try:
        cmd = create_launch_cmd(overrides, script, env, det.get_cluster_info(), workdir)
        proc = _util.run_forwarding_signals(cmd, env=env, whole_group=True)
        return _util.exit_code(proc.returncode)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
