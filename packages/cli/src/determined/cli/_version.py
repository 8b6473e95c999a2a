"""``det version``: the versions of this client and of the master it points at.

Printed as YAML in upstream's shape (``client.version``, ``master`` with ``version``,
``cluster_id`` and ``master_id``, ``master_address``); an unreachable master leaves the master's
fields empty instead of failing, so the command still tells the client's version.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from determined import client
from determined.cli import _render, _session
from determined.cli._declarative import Cmd


def client_version() -> str:
    """The installed det-cli version (the det-core version when det-cli has no metadata)."""
    try:
        from importlib.metadata import version

        return version("det-cli")
    except Exception:
        import determined

        return str(determined.__version__)


def get_version(args: argparse.Namespace) -> dict[str, Any]:
    """``{"client": {...}, "master": {...}, "master_address": url}``."""
    master: dict[str, Any] = {"cluster_id": "", "master_id": "", "version": ""}
    try:
        info = _session.unauth_api(args).master.info()
    except client.MasterNotFoundError:
        pass
    else:
        master = {
            "cluster_id": info.get("clusterId", ""),
            "cluster_name": info.get("clusterName", ""),
            "master_id": info.get("masterId", ""),
            "version": info.get("version", ""),
        }
    return {
        "client": {"version": client_version()},
        "master": master,
        "master_address": _session.master_url(args),
    }


def _compare(info: dict[str, Any]) -> str | None:
    """A hint when the client and master versions differ (upstream's wording), else None."""
    master, cli = info["master"]["version"], info["client"]["version"]
    if not master:
        return (
            f"Master not found at {info['master_address']}. Hint: Remember to set the DET_MASTER"
            " environment variable to the correct Determined master IP and port or use the '-m'"
            " flag."
        )
    try:
        from packaging.version import Version

        older, newer = Version(cli) < Version(master), Version(cli) > Version(master)
    except Exception:
        older, newer = False, False
    if older:
        return (
            f"CLI version {cli} is less than master version {master}. Consider upgrading the CLI."
        )
    if newer:
        return f"Master version {master} is less than CLI version {cli}. Consider upgrading the master."
    return None


def describe_version(args: argparse.Namespace) -> None:
    info = get_version(args)
    sys.stdout.write(_render.dump_yaml(info))
    hint = _compare(info)
    if hint:
        print(_render.colored(hint, "yellow", sys.stderr), file=sys.stderr)


COMMANDS = [Cmd("version", describe_version, "show version information", [])]
