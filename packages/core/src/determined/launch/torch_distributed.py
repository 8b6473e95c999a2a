"""``python -m determined.launch.torch_distributed [OVERRIDES... --] (--trial MODULE:Class | SCRIPT...)``

Runs SCRIPT under torchrun (``python -m torch.distributed.run``) with one process per slot of each
container of the allocation (from ``det.get_cluster_info()``), every process wrapped by ``wrap_rank``.
Off-cluster it runs one node with ``--nproc_per_node`` from the overrides (default 1). Options given
before ``--`` are passed to torchrun after det's own, so they win.

Sets ``USE_TORCH_DISTRIBUTED=1`` and ``DET_CHIEF_IP``. On one node no port is fixed in advance, so
concurrent jobs on one machine never collide: torchrun's c10d store binds a port the kernel picks
(``--rdzv_endpoint 127.0.0.1:0``, as ``--standalone`` does), and det's collective port is one this
launcher holds reserved until the job ends (``_util.reserve_ports``). A port picked free and
passed on would be free only until the rank binds it, seconds later, and any process on the machine
could take it meanwhile. ``DET_C10D_PORT``, or a ``--master_port``/``--rdzv_*`` override, makes
it a fixed c10d port again. The exit status is torchrun's; SIGTERM/SIGINT reach the whole process
tree.

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
    env["USE_TORCH_DISTRIBUTED"] = "1"
    env["DET_CHIEF_IP"] = chief_ip
    if single_node:
        _util.reserve_collective_port(env)
        # Every rank is a child of this process: a fresh key keeps other local users out.
        env.setdefault(KEY_ENV, secrets.token_hex(16))
    return [
        sys.executable, "-m", "torch.distributed.run",
        "--nnodes", str(nnodes),
        "--nproc_per_node", str(nproc),
        "--node_rank", str(node_rank),
        "--max_restarts", "0",
        *_rendezvous(single_node, chief_ip, env, overrides),
        *overrides,
        "--module", "determined.launch.wrap_rank", "RANK", "--", *script,
    ]  # fmt: skip


_FIXED_RENDEZVOUS = (
    "--master_port", "--master-port", "--rdzv_backend", "--rdzv-backend",
    "--rdzv_endpoint", "--rdzv-endpoint", "--standalone",
)  # fmt: skip
"""Overrides that choose torchrun's rendezvous themselves: det then gives a fixed c10d port."""


def _rendezvous(
    single_node: bool, chief_ip: str, env: dict[str, str], overrides: Sequence[str]
) -> list[str]:
    """torchrun's rendezvous options: a c10d store on a port the kernel picks on one node (see the
    module docstring), else the fixed ``DET_C10D_PORT`` (default 29400) on the chief."""
    forced = env.get(C10D_PORT_ENV)
    chosen = any(arg.split("=", 1)[0] in _FIXED_RENDEZVOUS for arg in overrides)
    if single_node and not forced and not chosen:
        return ["--rdzv_backend", "c10d", "--rdzv_endpoint", "127.0.0.1:0",
                "--rdzv_id", secrets.token_hex(8)]  # fmt: skip
    if forced:
        port = int(forced)
    elif single_node:
        port = _util.reserve_server_ports(1)[0]  # the override's own port wins: it comes later
    else:
        port = C10D_PORT
    return ["--master_addr", "127.0.0.1" if single_node else chief_ip, "--master_port", str(port)]


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
