"""Following a job's output files on the shared filesystem, line by line.

Slurm writes a job's stdout and stderr into files of its job directory (``sbatch --output``/
``--error``; ``srun`` forwards every rank's output there). The master reads what was appended
since its last look and turns it into :class:`LogLine` batches, cut like the local resource
manager cuts a pipe: ``\\n``, ``\\r\\n`` or a lone ``\\r`` (progress bars) end a line.
"""

from __future__ import annotations

import os
import re
import time

from determined.master.rm._types import LogLine, parse_log_line

READ_MAX = 4 * 1024 * 1024
"""Most bytes read from one file in one look (a burst is delivered over several looks)."""
MAX_LINE_BYTES = 65536
"""A longer run of bytes without an end of line is delivered as a line of its own."""

_LINE_END = re.compile(rb"\r\n|\r|\n")


class FileTail:
    """The unread end of one output file.

    Args:
        path: the file (it may not exist yet).
        stdtype: ``"stdout"`` or ``"stderr"`` for the lines read from it.
    """

    def __init__(self, path: str, stdtype: str) -> None:
        self.path = path
        self.stdtype = stdtype
        self.offset = 0
        self._pending = b""

    def read(self) -> list[LogLine]:
        """The complete lines appended since the last call (a partial last line waits)."""
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                chunk = f.read(READ_MAX)
        except FileNotFoundError:
            return []
        if not chunk:
            return []
        self.offset += len(chunk)
        data = self._pending + chunk
        held = b""
        if data.endswith(b"\r"):  # maybe the first half of "\r\n"
            data, held = data[:-1], b"\r"
        parts = _LINE_END.split(data)
        self._pending = parts.pop() + held
        while len(self._pending) > MAX_LINE_BYTES:
            parts.append(self._pending[:MAX_LINE_BYTES])
            self._pending = self._pending[MAX_LINE_BYTES:]
        return self._lines(parts)

    def finish(self) -> list[LogLine]:
        """What is left once the file is complete: the rest, and a last line without an end."""
        lines = []
        while True:
            more = self.read()
            if not more:
                break
            lines += more
        rest = self._pending.rstrip(b"\r")
        self._pending = b""
        return lines + (self._lines([rest]) if rest else [])

    def size(self) -> int:
        """The file's size now (0 while it does not exist)."""
        try:
            return os.path.getsize(self.path)
        except OSError:
            return 0

    def _lines(self, parts: list[bytes]) -> list[LogLine]:
        now = time.time()
        return [
            parse_log_line(raw.decode("utf-8", errors="replace"), self.stdtype, now)
            for raw in parts
        ]
