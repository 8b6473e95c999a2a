"""``det-master up [--daemon]`` / ``det-master down``."""

from __future__ import annotations

import argparse
import gc
import logging
import os
import pathlib
import signal
import subprocess
import sys
import time
import urllib.request
from typing import Any

from determined.master._config import MasterConfig

GC_THRESHOLD = (5_000, 50, 100)
"""The collector's thresholds in ``det-master up`` (why: see where they are set, in :func:`main`)."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="det-master", description="The det master.")
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start the master")
    up.add_argument("--config-file", help="YAML file with the same settings as these flags")
    up.add_argument("--host", default=None, help="address to listen on (default 127.0.0.1)")
    up.add_argument("--port", type=int, default=None, help="TCP port (default 8080; 0 = any free)")
    up.add_argument("--db", default=None, help="SQLAlchemy URL (default: SQLite in the data dir)")
    up.add_argument("--data-dir", default=None, help="where the database, logs and work dirs live")
    up.add_argument("--slots", type=int, default=None, help="CPU slots when there is no GPU")
    up.add_argument("--checkpoint-storage", default=None, help="checkpoint directory (shared_fs)")
    up.add_argument(
        "--initial-admin-password", default=None, help="password of admin and determined"
    )
    up.add_argument("--cluster-name", default=None)
    up.add_argument(
        "--ray-address",
        default=None,
        help="run trials on this Ray cluster ('auto', HOST:PORT or ray://HOST:10001)",
    )
    up.add_argument(
        "--slurm",
        action="store_true",
        default=None,
        help="submit trials as jobs to the Slurm cluster of this (login) node (docs/slurm.md)",
    )
    up.add_argument(
        "--tls-cert",
        default=None,
        help="serve HTTPS with this certificate (PEM; security.tls.cert)",
    )
    up.add_argument(
        "--tls-key", default=None, help="the certificate's private key (PEM; security.tls.key)"
    )
    up.add_argument("--daemon", action="store_true", help="run in the background (pid + log file)")
    down = sub.add_parser("down", help="stop a master started with --daemon")
    down.add_argument("--data-dir", default=None)
    down.add_argument("--config-file", default=None)
    return parser


def _config(args: argparse.Namespace) -> MasterConfig:
    overrides: dict[str, Any] = {
        k: getattr(args, k, None)
        for k in (
            "host",
            "port",
            "db",
            "data_dir",
            "slots",
            "checkpoint_storage",
            "initial_admin_password",
            "cluster_name",
            "ray_address",
            "slurm",
            "tls_cert",
            "tls_key",
        )
    }
    if args.config_file:
        return MasterConfig.from_file(args.config_file, **overrides)
    return MasterConfig(**{k: v for k, v in overrides.items() if v is not None})


def _pid_file(config: MasterConfig) -> pathlib.Path:
    return config.resolved_data_dir() / "det-master.pid"


def _up(config: MasterConfig) -> int:
    from determined.master._master import Master

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    master = Master(config)
    try:
        master.start()
    except Exception as e:
        print(f"det-master: {e}", file=sys.stderr)
        master.stop()
        return 1
    pid_file = _pid_file(config)
    pid_file.write_text(str(os.getpid()))
    print(f"det-master serving on {master.url}", flush=True)
    # A long-running server: move start-up objects out of the collector's way. The young generation
    # is collected every 5,000 net allocations: nearly all that survive to a collection are cycles a
    # request left behind (SQLAlchemy statements, ORM states). At 50,000 one collection freed ~50k
    # objects in one pause of 40-110 ms that every request in flight waited out (the p99 of API
    # reads); at 5,000 the longest pause is ~5 ms and the total less (benchmarks/bench_gc_pauses.py).
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLD)

    def on_signal(signum: int, _frame: Any) -> None:
        master.request_stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        master.serve_forever()
    finally:
        master.stop()
        if pid_file.exists() and pid_file.read_text().strip() == str(os.getpid()):
            pid_file.unlink()
    return 0


def _daemon(argv: list[str], config: MasterConfig) -> int:
    data_dir = config.resolved_data_dir()
    log_path = data_dir / "det-master.log"
    child_argv = [sys.executable, "-m", "determined.master"] + [a for a in argv if a != "--daemon"]
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            child_argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    pid_file = _pid_file(config)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            print(f"det-master failed to start; see {log_path}", file=sys.stderr)
            return 1
        if pid_file.exists() and pid_file.read_text().strip() == str(proc.pid):
            print(f"det-master started (pid {proc.pid}); logs in {log_path}")
            return 0
        time.sleep(0.1)
    print(f"det-master did not start within 60 s; see {log_path}", file=sys.stderr)
    return 1


def _down(config: MasterConfig) -> int:
    pid_file = _pid_file(config)
    if not pid_file.exists():
        print(f"det-master: no pid file at {pid_file}; is it running?", file=sys.stderr)
        return 1
    pid = int(pid_file.read_text().strip())
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pid_file.unlink(missing_ok=True)
        print("det-master was not running")
        return 0
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            print("det-master stopped")
            return 0
        time.sleep(0.1)
    print(f"det-master (pid {pid}) did not stop within 30 s", file=sys.stderr)
    return 1


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(argv)
    try:
        config = _config(args)
        config.check()
    except (ValueError, OSError) as e:
        print(f"det-master: {e}", file=sys.stderr)
        return 2
    if args.command == "down":
        return _down(config)
    if args.daemon:
        return _daemon(argv, config)
    return _up(config)


del urllib

if __name__ == "__main__":
    sys.exit(main())
