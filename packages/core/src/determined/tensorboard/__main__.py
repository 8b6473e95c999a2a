"""``python -m determined.tensorboard --spec FILE [--port N] [--path-prefix P]``: TensorBoard over
the event files trials uploaded to checkpoint storage.

The spec is JSON, ``{"sources": [{"experimentId": 1, "checkpointStorage": {...}, "trialIds": [2]},
...], "tensorboardArgs": [...]}`` (``trialIds`` absent: every trial of the experiment). The master
passes it to a TensorBoard task in ``DET_TENSORBOARD_SPEC``; by hand, ``--experiment-storage EXP_ID
STORAGE`` (a storage shortcut such as ``/mnt/ckpts`` or ``s3://bucket/prefix``) adds a source.
Defaults come from the task's environment: ``--port`` from ``DET_TASK_PORT`` (else a free port),
``--path-prefix`` ``/proxy/$DET_TASK_ID`` when ``DET_TASK_ID`` is set.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any

from determined import storage
from determined.core import plugins
from determined.tensorboard._server import serve
from determined.tensorboard._sync import Source

SPEC_ENV = "DET_TENSORBOARD_SPEC"
"""The spec as JSON text, when no ``--spec`` file is given (how the master passes it)."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m determined.tensorboard",
        description="TensorBoard over the TensorBoard files of det trials in checkpoint storage",
    )
    parser.add_argument("--spec", help="JSON file naming the sources (see the module docstring)")
    parser.add_argument(
        "--experiment-storage",
        nargs=2,
        action="append",
        default=[],
        metavar=("EXPERIMENT_ID", "STORAGE"),
        help="add every trial of an experiment whose checkpoints are in STORAGE",
    )
    parser.add_argument("--port", type=int, default=None)
    parser.add_argument("--path-prefix", default=None)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--logdir", default=None, help="local directory (default: a temp dir)")
    parser.add_argument(
        "--interval", type=float, default=5.0, help="seconds between syncs and TensorBoard reloads"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the arguments and run :func:`determined.tensorboard.serve`."""
    args, extra = _parser().parse_known_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s: %(name)s: %(message)s")
    sources: list[Source] = []
    spec: dict[str, Any] = {}
    if args.spec:
        with open(args.spec) as spec_file:
            spec = json.load(spec_file)
    elif os.environ.get(SPEC_ENV):
        spec = json.loads(os.environ[SPEC_ENV])
    if spec:
        sources += [Source.from_json(obj) for obj in spec.get("sources", [])]
        extra = [*spec.get("tensorboardArgs", []), *extra]
    for exp_id, shortcut in args.experiment_storage:
        sources.append(Source(int(exp_id), storage.to_config(shortcut)))
    if not sources:
        print("give --spec or --experiment-storage", file=sys.stderr)
        return 2
    port = args.port
    if port is None:
        env_port = os.environ.get("DET_TASK_PORT")
        port = int(env_port) if env_port else plugins.free_ports(1)[0]
    path_prefix = args.path_prefix
    if path_prefix is None:
        task_id = os.environ.get("DET_TASK_ID")
        path_prefix = f"/proxy/{task_id}" if task_id else ""
    return serve(
        sources,
        port=port,
        path_prefix=path_prefix,
        host=args.host,
        logdir=args.logdir,
        interval=args.interval,
        extra_args=extra,
    )


if __name__ == "__main__":
    sys.exit(main())
