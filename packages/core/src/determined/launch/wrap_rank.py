"""``python -m determined.launch.wrap_rank [--no-redirect-stdio] RANK SCRIPT...``

Runs SCRIPT and prefixes every line it writes to stdout and stderr with ``[rank=N] ``, so the logs of
many ranks stay readable (det's log shipper reads the prefix). RANK is an integer or a comma-separated
list of environment variable names tried in order (``RANK`` under torchrun,
``HOROVOD_RANK,OMPI_COMM_WORLD_RANK,PMI_RANK`` under horovodrun). A carriage return ends a line too
(progress bars), and lines longer than ``io.DEFAULT_BUFFER_SIZE`` are split. The exit status of SCRIPT
is propagated; SIGTERM and SIGINT are forwarded to it.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import threading
from collections.abc import Sequence
from typing import BinaryIO

from determined.launch import _util

USAGE = "usage: python -m determined.launch.wrap_rank [--no-redirect-stdio] RANK SCRIPT..."


def resolve_rank(spec: str, env: dict[str, str] | None = None) -> int:
    """An integer RANK, or the value of the first variable of a comma list that is set."""
    env = dict(os.environ if env is None else env)
    try:
        return int(spec)
    except ValueError:
        pass
    names = [name.strip() for name in spec.split(",") if name.strip()]
    for name in names:
        if env.get(name, "") != "":
            try:
                return int(env[name])
            except ValueError:
                raise ValueError(f"RANK: {name}={env[name]!r} is not an integer") from None
    raise ValueError(f"RANK: none of the environment variables {', '.join(names) or spec!r} is set")


def prefix_lines(source: BinaryIO, sink: BinaryIO, prefix: bytes) -> None:
    """Copy ``source`` to ``sink`` line by line, each line (``\\n`` or ``\\r`` ended) after ``prefix``."""
    limit = io.DEFAULT_BUFFER_SIZE
    pending = b""
    while True:
        chunk = source.read1(limit) if hasattr(source, "read1") else source.read(limit)
        if not chunk:
            break
        pending += chunk
        start = 0
        out = []
        for index, byte in enumerate(pending):
            if byte in (0x0A, 0x0D):
                out.append(prefix + pending[start : index + 1])
                start = index + 1
        pending = pending[start:]
        while len(pending) >= limit:
            out.append(prefix + pending[:limit] + b"\n")
            pending = pending[limit:]
        if out:
            sink.write(b"".join(out))
            sink.flush()
    if pending:
        sink.write(prefix + pending + b"\n")
        sink.flush()


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    redirect = True
    if args and args[0] == "--no-redirect-stdio":
        redirect = False
        args.pop(0)
    if len(args) >= 2 and args[1] == "--":
        args.pop(1)
    if len(args) < 2:
        print(USAGE, file=sys.stderr)
        return 2
    try:
        rank = resolve_rank(args[0])
    except ValueError as exc:
        print(f"wrap_rank: {exc}", file=sys.stderr)
        return 2
    script = args[1:]
    if not redirect:
        return _util.exit_code(_util.run_forwarding_signals(script).returncode)

    prefix = f"[rank={rank}] ".encode()
    pumps: list[threading.Thread] = []

    def start_pumps(proc: subprocess.Popen[bytes]) -> None:
        for pipe, sink in ((proc.stdout, sys.stdout.buffer), (proc.stderr, sys.stderr.buffer)):
            pump = threading.Thread(target=prefix_lines, args=(pipe, sink, prefix), daemon=True)
            pump.start()
            pumps.append(pump)

    proc = _util.run_forwarding_signals(
        script, on_start=start_pumps, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    for pump in pumps:
        pump.join()
    return _util.exit_code(proc.returncode)


if __name__ == "__main__":
    sys.exit(main())
