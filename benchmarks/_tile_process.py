"""Imported into a benchmark's master process (``start_master_process(prelude="_tile_process")``):
the metrics writer stores no chart tiles (``_no_tiles``), and a second process builds them instead
from the stored rows (``_tile_builder.py``): ``bench_metrics_ingest.py --tile-process``, an
experiment in moving the tiles off the master's interpreter lock."""

from __future__ import annotations

import os
import subprocess
import sys

import _no_tiles  # noqa: F401  (the master's writer stores no tiles)

_args = sys.argv
_url = (
    _args[_args.index("--db") + 1]
    if "--db" in _args
    else f"sqlite:///{_args[_args.index('--data-dir') + 1]}/det.sqlite"
)
_builder = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_tile_builder.py")
subprocess.Popen([sys.executable, _builder, _url, str(os.getpid())])
