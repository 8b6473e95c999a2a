"""``det deploy local``: start and stop an embedded master in the background — no Docker.

Upstream's ``det deploy local cluster-up`` runs PostgreSQL, a master and agents as Docker
containers. det's master embeds SQLite and runs trials as local processes, so ``cluster-up`` starts
``det-master up --daemon`` and ``cluster-down`` runs ``det-master down``. Flags that only make sense
for containers are accepted (scripts keep working) and reported as ignored.
"""

from __future__ import annotations

import argparse
import importlib.util
import pathlib
import shutil
import subprocess
import sys

from determined.cli import _render
from determined.cli._declarative import Arg, Cmd
from determined.cli._errors import CliError

CONTAINER_ONLY_FLAGS = (
    "agents",
    "gpu",
    "det_version",
    "db_password",
    "auto_work_dir",
    "no_autorestart",
    "enterprise_edition",
    "image_repo",
)


def _master_command() -> list[str]:
    """How to run det-master: this interpreter when it has det-master, else the script on PATH."""
    if importlib.util.find_spec("determined.master") is not None:
        return [sys.executable, "-m", "determined.master"]
    script = shutil.which("det-master")
    if script:
        return [script]
    raise CliError("det deploy local needs det-master: pip install det-master")


def _run(argv: list[str]) -> str:
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        raise CliError("det-master did not answer within 120 s") from None
    output = (result.stdout + result.stderr).strip()
    if result.returncode != 0:
        last = output.splitlines()[-1] if output else f"exit status {result.returncode}"
        raise CliError(last.removeprefix("det-master: "))
    return output


def _default_data_dir() -> pathlib.Path:
    # det-master's default (platformdirs user data dir "det-master"); the master owns the layout.
    import platformdirs

    return pathlib.Path(platformdirs.user_data_dir("det-master", appauthor=False))


def cluster_up(args: argparse.Namespace) -> None:
    ignored = [
        "--" + name.replace("_", "-")
        for name in CONTAINER_ONLY_FLAGS
        if name != "gpu" and getattr(args, name, None) not in (None, False)
    ]
    if getattr(args, "gpu", None) is not None:
        ignored.append("--gpu" if args.gpu else "--no-gpu")
    if ignored:
        print(
            _render.colored(
                f"ignored (det runs no containers): {' '.join(ignored)}", "yellow", sys.stderr
            ),
            file=sys.stderr,
        )
    argv = [*_master_command(), "up", "--daemon", "--port", str(args.master_port)]
    if args.master_config_path:
        argv += ["--config-file", args.master_config_path]
    if args.data_dir:
        argv += ["--data-dir", args.data_dir]
    if args.storage_host_path:
        argv += ["--checkpoint-storage", args.storage_host_path]
    if args.initial_user_password is not None:
        argv += ["--initial-admin-password", args.initial_user_password]
    if args.cluster_name:
        argv += ["--cluster-name", args.cluster_name]
    if args.slots is not None:
        argv += ["--slots", str(args.slots)]
    if args.host:
        argv += ["--host", args.host]
    print(_run(argv))
    address = f"localhost:{args.master_port}"
    print(f"Cluster up: the master is at http://{address}")
    if args.master_port != 8080:
        print(f"Point the CLI at it with: export DET_MASTER={address}")


def cluster_down(args: argparse.Namespace) -> None:
    argv = [*_master_command(), "down"]
    if args.data_dir:
        argv += ["--data-dir", args.data_dir]
    if args.master_config_path:
        argv += ["--config-file", args.master_config_path]
    print(_run(argv))
    if args.delete_db:
        data_dir = pathlib.Path(args.data_dir) if args.data_dir else _default_data_dir()
        removed = 0
        for path in data_dir.glob("det.sqlite*"):
            path.unlink()
            removed += 1
        print(f"Deleted the database in {data_dir}" if removed else "No database to delete")


_DATA_DIR = Arg(
    "--data-dir",
    help="the master's data directory (database, logs, pid file); det-master's default if unset",
)
_CONFIG = Arg("--master-config-path", help="det-master YAML config file")

UP_ARGS = [
    Arg("--master-port", type=int, default=8080, help="port the master listens on"),
    Arg("--initial-user-password", help="password of the admin and determined users"),
    Arg("--storage-host-path", help="checkpoint directory (shared_fs)"),
    Arg("--cluster-name", help="name shown by `det master info`"),
    _CONFIG,
    _DATA_DIR,
    Arg("--slots", type=int, help="CPU slots when there is no GPU (det)"),
    Arg("--host", help="address to listen on (det; default 127.0.0.1)"),
    Arg("--agents", type=int, help=argparse.SUPPRESS),
    Arg("--gpu", dest="gpu", action="store_true", default=None, help=argparse.SUPPRESS),
    Arg("--no-gpu", dest="gpu", action="store_false", help=argparse.SUPPRESS),
    Arg("--det-version", help=argparse.SUPPRESS),
    Arg("--db-password", help=argparse.SUPPRESS),
    Arg("--auto-work-dir", help=argparse.SUPPRESS),
    Arg("--no-autorestart", action="store_true", help=argparse.SUPPRESS),
    Arg("--enterprise-edition", action="store_true", help=argparse.SUPPRESS),
    Arg("--image-repo", help=argparse.SUPPRESS),
]
DOWN_ARGS = [
    _DATA_DIR,
    _CONFIG,
    Arg("--delete-db", action="store_true", help="delete the master's SQLite database too"),
    Arg("--cluster-name", help=argparse.SUPPRESS),
]

COMMANDS = [
    Cmd(
        "d|eploy",
        None,
        "manage deployments",
        [
            Cmd(
                "local",
                None,
                "a master on this machine (no Docker)",
                [
                    Cmd(
                        "cluster-up master-up",
                        cluster_up,
                        "start a master in the background",
                        UP_ARGS,
                    ),
                    Cmd(
                        "cluster-down master-down",
                        cluster_down,
                        "stop the background master",
                        DOWN_ARGS,
                    ),
                ],
            )
        ],
    )
]
