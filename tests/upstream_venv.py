"""Upstream Determined 0.38.1's own client library in a venv of its own, for compatibility tests.

``upstream_python()`` builds the venv once under .cache/ (a file lock lets one xdist worker build it
while the others wait) and returns its interpreter; it never touches the project's venv. It holds
upstream's package and the dependencies its client imports (:data:`CLIENT_DEPENDENCIES`), not the
rest of its declared ones: 142 MB and 22 s to build instead of 422 MB and 49 s (measured once each,
warm pip cache). ``upstream_env(home)`` is an environment for running that interpreter: no
PYTHON*/VIRTUAL_ENV/DET_* variables leak in from the project's, and upstream's token cache lives
under ``home``.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
UPSTREAM = "determined==0.38.1"
CLIENT_DEPENDENCIES = [
    "appdirs",
    "argcomplete",
    "certifi",
    "filelock",
    "lomond",
    "numpy",  # util.json_encode, on every request body
    "packaging",
    "pathspec",
    "psutil",
    "pyOpenSSL>=19.1.0",
    "python-dateutil",
    "pytz",
    "requests<2.32.0",
    "ruamel.yaml",
    "tabulate",
    "termcolor",
    "tqdm",
]
"""What upstream's CLI, SDK and bindings import on the paths the tests take. Its other declared
dependencies (boto3, the Google and Azure storage SDKs, matplotlib, docker, paramiko, pyzmq,
gitpython, analytics-python) serve cloud checkpoint storage, ``det deploy``, plots and telemetry; a
test that reaches one fails with a ModuleNotFoundError naming it: add it here."""
_KEY = hashlib.sha256(" ".join([UPSTREAM, *CLIENT_DEPENDENCIES]).encode()).hexdigest()[:12]
VENV = ROOT / ".cache" / f"upstream-determined-0.38.1-{_KEY}"


def upstream_python() -> pathlib.Path:
    """The interpreter of the upstream-client venv, built on first use."""
    python = VENV / "bin" / "python"
    VENV.parent.mkdir(parents=True, exist_ok=True)
    with open(VENV.parent / "upstream-venv.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one xdist worker builds it, the others wait
        if not (VENV / ".complete").exists():
            subprocess.run([sys.executable, "-m", "venv", "--clear", str(VENV)], check=True)
            pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
            for args in (["--no-deps", UPSTREAM], CLIENT_DEPENDENCIES):
                subprocess.run([*pip, *args], check=True, timeout=900, capture_output=True)
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


if __name__ == "__main__":  # `make test` builds it beside the install steps
    print(upstream_python())
