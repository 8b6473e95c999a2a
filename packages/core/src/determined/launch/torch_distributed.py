"""``python -m determined.launch.torch_distributed [OVERRIDES... --] (--trial MODULE:Class | SCRIPT...)``

Runs SCRIPT under torchrun (``python -m torch.distributed.run``) with one process per slot of each
container of the allocation (from ``det.get_cluster_info()``), every process wrapped by ``wrap_rank``.
Off-cluster it runs one node with ``--nproc_per_node`` from the overrides (default 1). Options given
before ``--`` are passed to torchrun after det's own, so they win.

Sets ``USE_TORCH_DISTRIBUTED=1`` and ``DET_CHIEF_IP``. On one node the c10d and collective ports are
free ports chosen at start (so concurrent trials on one machine do not collide); ``DET_C10D_PORT``
forces the c10d port. The exit status is torchrun's; SIGTERM/SIGINT reach the whole process tree.

``--trial MODULE:Class`` (upstream's way to start a distributed PyTorchTrial) runs a Trial class
instead of a script: every rank runs det's trial runner for it (``python -m
determined.launch.trial MODULE:Class``), which is what ``entrypoint: MODULE:Class`` does too.
"""

from __future__ import annotations

import os
import secrets
import sys
from collections.abc import Sequence

import determined as det
from determined.core._collective import KEY_ENV
from determined.core._distributed import PORT_ENV
from determined.launch import _util

C10D_PORT = 29400
C10D_PORT_ENV = "DET_C10D_PORT"
USAGE = (
    "usage: python -m determined.launch.torch_distributed [[TORCHRUN_OVERRIDES...] --] "
    "(--trial MODULE:TrialClass | SCRIPT...)"
)


def split_args(args: Sequence[str]) -> tuple[list[str], list[str]]:
    """(torchrun overrides, script): everything before the first ``--`` is an override."""
    args = list(args)
    if "--" in args:
        index = args.index("--")
        return args[:index], args[index + 1 :]
    return [], args


def _override(overrides: Sequence[str], *names: str) -> str | None:
    value = None
    for index, arg in enumerate(overrides):
        for name in names:
            if arg == name and index + 1 < len(overrides):
                value = overrides[index + 1]
            elif arg.startswith(name + "="):
                value = arg.split("=", 1)[1]
    return value


def create_launch_cmd(
    overrides: Sequence[str],
    script: Sequence[str],
    env: dict[str, str],
    cluster_info: det.ClusterInfo | None,
) -> list[str]:
    """The torchrun command line; also sets the launcher's variables in ``env``."""
    if cluster_info is not None:
        nnodes = len(cluster_info.container_addrs)
        nproc = max(len(cluster_info.slot_ids), 1)
        node_rank = cluster_info.container_rank
        chief_ip = cluster_info.container_addrs[0]
    else:
        nnodes, node_rank, chief_ip = 1, 0, "127.0.0.1"
        nproc = int(_override(overrides, "--nproc_per_node", "--nproc-per-node") or 1)
    single_node = nnodes == 1
    c10d_port, collective_port = _util.free_ports(2) if single_node else (C10D_PORT, None)
    if env.get(C10D_PORT_ENV):
        c10d_port = int(env[C10D_PORT_ENV])
    env["USE_TORCH_DISTRIBUTED"] = "1"
    env["DET_CHIEF_IP"] = chief_ip
    if single_node:
        env.setdefault(PORT_ENV, str(collective_port))
        # Every rank is a child of this process: a fresh key keeps other local users out.
        env.setdefault(KEY_ENV, secrets.token_hex(16))
    return [
        sys.executable, "-m", "torch.distributed.run",
        "--nnodes", str(nnodes),
        "--nproc_per_node", str(nproc),
        "--node_rank", str(node_rank),
        "--max_restarts", "0",
        "--master_addr", "127.0.0.1" if single_node else chief_ip,
        "--master_port", str(c10d_port),
        *overrides,
        "--module", "determined.launch.wrap_rank", "RANK", "--", *script,
    ]  # fmt: skip


def parse_args(args: Sequence[str]) -> tuple[list[str], list[str], bool]:
    """``(torchrun overrides, script, is_trial)``: ``--trial MODULE:Class`` becomes the command
    that runs the class through det's trial runner. ValueError for a malformed command line."""
    overrides, rest = split_args(args)
    script = _util.trial_script(rest)
    if script is not None:
        return overrides, script, True
    return overrides, rest, False


def main(argv: Sequence[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if list(args[:1]) in (["-h"], ["--help"]):
        print(f"{USAGE}\n\n{__doc__}")
        return 0
    try:
        overrides, script, is_trial = parse_args(args)
    except ValueError as exc:
        print(f"determined.launch.torch_distributed: {exc}\n{USAGE}", file=sys.stderr)
        return 2
    if not script:
        print(USAGE, file=sys.stderr)
        return 2
    env = dict(os.environ)
    if is_trial:
        env[_util.UNDER_LAUNCHER_ENV] = "1"  # the ranks run the class; none re-launches
    cmd = create_launch_cmd(overrides, script, env, det.get_cluster_info())
    return _util.exit_code(_util.run_forwarding_signals(cmd, env=env, whole_group=True).returncode)


if __name__ == "__main__":
    sys.exit(main())
