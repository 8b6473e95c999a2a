"""``python -m determined.launch.tensorflow [--port N] [--] SCRIPT...``

Runs SCRIPT once per container. With several containers it sets ``TF_CONFIG`` (every container as a
worker on ``--port``, default 29400; this one's index is its container rank) and ``DET_USE_TF_CONFIG=1``
so ``core.init()`` builds its DistributedContext from it, and prefixes output with the rank
(``wrap_rank``). ``DET_CHIEF_IP`` is always set. The exit status of SCRIPT is propagated.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence

import determined as det
from determined.launch import _util

DEFAULT_PORT = 29400
USAGE = "usage: python -m determined.launch.tensorflow [--port N] [--] SCRIPT..."


def parse_args(args: Sequence[str]) -> tuple[int, list[str]]:
    """(port, script)."""
    args = list(args)
    port = DEFAULT_PORT
    if args and args[0].startswith("--port"):
        if args[0] == "--port":
            if len(args) < 2:
                raise ValueError("--port needs a value")
            value, args = args[1], args[2:]
        else:
            value, args = args[0].split("=", 1)[1], args[1:]
        try:
            port = int(value)
        except ValueError:
            raise ValueError(f"--port must be an integer, not {value!r}") from None
    if args and args[0] == "--":
        args = args[1:]
    return port, args


def create_launch_cmd(
    port: int, script: Sequence[str], env: dict[str, str], cluster_info: det.ClusterInfo | None
) -> list[str]:
    """The command to run; also sets the launcher's variables in ``env``."""
    addrs = cluster_info.container_addrs if cluster_info is not None else ["127.0.0.1"]
    rank = cluster_info.container_rank if cluster_info is not None else 0
    env["DET_CHIEF_IP"] = addrs[0]
    if len(addrs) < 2:
        return list(script)
    env["TF_CONFIG"] = json.dumps(
        {
            "cluster": {"worker": [f"{addr}:{port}" for addr in addrs]},
            "task": {"type": "worker", "index": rank},
        }
    )
    env["DET_USE_TF_CONFIG"] = "1"
    return [sys.executable, "-m", "determined.launch.wrap_rank", str(rank), "--", *script]


def main(argv: Sequence[str] | None = None) -> int:
    try:
        port, script = parse_args(sys.argv[1:] if argv is None else argv)
    except ValueError as exc:
        print(f"{USAGE}\n{exc}", file=sys.stderr)
        return 2
    if not script:
        print(USAGE, file=sys.stderr)
        return 2
    env = dict(os.environ)
    cmd = create_launch_cmd(port, script, env, det.get_cluster_info())
    return _util.exit_code(_util.run_forwarding_signals(cmd, env=env).returncode)


if __name__ == "__main__":
    sys.exit(main())
