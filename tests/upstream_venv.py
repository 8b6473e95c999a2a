"""Upstream Determined 0.38.1's own client library in a venv of its own, for compatibility tests.

``upstream_python()`` builds the venv once under .cache/ (about 40 s; a file lock lets one xdist
worker build it while the others wait) and returns its interpreter; it never touches the project's
venv. ``upstream_env(home)`` is an environment for running that interpreter: no PYTHON*/VIRTUAL_ENV/DET_*
variables leak in from the project's, and upstream's token cache lives under ``home``.
"""

from __future__ import annotations

import fcntl
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
UPSTREAM = "determined==0.38.1"
VENV = ROOT / ".cache" / "upstream-determined-0.38.1"


def upstream_python() -> pathlib.Path:
    """The interpreter of the upstream-client venv, built on first use."""
    python = VENV / "bin" / "python"
    VENV.parent.mkdir(parents=True, exist_ok=True)
    with open(VENV.parent / "upstream-venv.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one xdist worker builds it, the others wait
        if not (VENV / ".complete").exists():
            subprocess.run([sys.executable, "-m", "venv", "--clear", str(VENV)], check=True)
            subprocess.run(
                [
                    str(python),
                    "-m",
                    "pip",
                    "install",
                    "-q",
                    "--disable-pip-version-check",
                    UPSTREAM,
                ],
                check=True,
                timeout=900,
                capture_output=True,
            )
            (VENV / ".complete").touch()
    return python


def upstream_env(home: pathlib.Path) -> dict[str, str]:
    """This process's environment without the project's Python and det settings, HOME at ``home``."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "DET_"))
    }
    env["HOME"] = str(home)  # upstream caches tokens under the user's config dir
    env["XDG_CONFIG_HOME"] = str(home / "config")
    return env


def upstream_bindings_source() -> str:
    """The text of upstream's generated ``determined/common/api/bindings.py`` in the venv."""
    found = sorted((VENV / "lib").glob("python*/site-packages/determined/common/api/bindings.py"))
    if not found:
        upstream_python()
        found = sorted(
            (VENV / "lib").glob("python*/site-packages/determined/common/api/bindings.py")
        )
    return found[0].read_text()
