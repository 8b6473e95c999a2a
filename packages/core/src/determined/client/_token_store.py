"""Session tokens cached on disk, per master and user, shared by the ``det`` CLI and the SDK.

The file is ``auth.json`` in the user config dir (``platformdirs.user_config_dir("det")``, or
``$DET_CONFIG_DIR``), mode 0600, shaped ``{"masters": {URL: {"active_user": NAME, "tokens":
{NAME: TOKEN}}}}``. Writes go through a temporary file and a rename, so a crash never leaves a
half-written file behind.
"""

from __future__ import annotations

import json
import os
import pathlib
import tempfile
from typing import Any

from determined._info import canonicalize_master_url

CONFIG_DIR_ENV = "DET_CONFIG_DIR"


def default_path() -> pathlib.Path:
    """Where tokens are cached unless a path is given."""
    base = os.environ.get(CONFIG_DIR_ENV)
    if not base:
        import platformdirs

        base = platformdirs.user_config_dir("det")
    return pathlib.Path(base) / "auth.json"


class TokenStore:
    """Read and update the token cache.

    Args:
        path: the cache file; :func:`default_path` when omitted.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = pathlib.Path(path) if path is not None else default_path()

    def _load(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {"masters": {}}
        except (OSError, ValueError):
            return {"masters": {}}  # an unreadable cache is as good as none: log in again
        if not isinstance(data, dict) or not isinstance(data.get("masters"), dict):
            return {"masters": {}}
        return data

    def _save(self, data: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".auth-", suffix=".json")
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(data, f, indent=2, sort_keys=True)
            os.chmod(tmp, 0o600)
            os.replace(tmp, self.path)
        except BaseException:
            os.unlink(tmp)
            raise

    @staticmethod
    def _entry(data: dict[str, Any], master: str) -> dict[str, Any]:
        entry: dict[str, Any] = data["masters"].setdefault(canonicalize_master_url(master), {})
        if not isinstance(entry.get("tokens"), dict):
            entry["tokens"] = {}
        return entry

    def get(self, master: str, user: str | None = None) -> str | None:
        """The cached token of ``user`` (the active user when ``None``) on ``master``."""
        entry = self._entry(self._load(), master)
        name = user if user is not None else entry.get("active_user")
        token = entry["tokens"].get(name) if name else None
        return token if isinstance(token, str) else None

    def users(self, master: str) -> list[str]:
        """The users with a cached token on ``master``."""
        return sorted(self._entry(self._load(), master)["tokens"])

    def active_user(self, master: str) -> str | None:
        """The user who logged in last on ``master`` and has not logged out."""
        user = self._entry(self._load(), master).get("active_user")
        return user if isinstance(user, str) else None

    def set(self, master: str, user: str, token: str) -> None:
        """Cache ``token`` for ``user`` on ``master`` and make ``user`` the active user."""
        data = self._load()
        entry = self._entry(data, master)
        entry["tokens"][user] = token
        entry["active_user"] = user
        self._save(data)

    def drop(self, master: str, user: str | None = None) -> None:
        """Forget ``user``'s token (the active user's when ``None``) on ``master``."""
        data = self._load()
        entry = self._entry(data, master)
        name = user if user is not None else entry.get("active_user")
        if name is None:
            return
        entry["tokens"].pop(name, None)
        if entry.get("active_user") == name:
            entry.pop("active_user", None)
        self._save(data)
