"""The access-tokens service: long-lived bearer tokens of a user, with an expiry, revocable.

Access tokens are rows of ``user_sessions`` with ``token_type`` ``ACCESS_TOKEN`` (login sessions are
``USER_SESSION``), as upstream 0.38 keeps them: only the SHA-256 of the secret is stored, so the secret
is shown once, when the token is created. A token authenticates exactly like a session token (see
``_api/_deps.authenticate``); revoking one writes its row, which empties the authentication cache at
once. Lifespans are Go durations (``"48h"``, ``"90m"``) or ``"-1"`` for the longest allowed one,
bounded by the master's ``security.token`` settings (``default_lifespan_days``,
``max_lifespan_days``; ``-1`` means upstream's maximum of 106,751 days).

Who may do what is asked of the master's authorization (``_core/_authz.py``), as upstream's RBAC does:
one's own tokens need ``CREATE_TOKEN`` / ``VIEW_TOKEN`` / ``UPDATE_TOKEN`` (every Editor holds them, and
the ``TokenCreator`` role), other users' tokens ``CREATE_OTHER_TOKEN`` / ``VIEW_OTHER_TOKEN`` /
``ADMINISTRATE_TOKEN`` (admins). With RBAC off (``security.authz.type: basic``) only admins manage
tokens, as upstream's basic authorization has it. Without an ``Authz`` (unit use) users manage their
own tokens and admins everybody's.
"""

from __future__ import annotations

import dataclasses
import datetime
import re
from collections.abc import Sequence
from typing import Any

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from determined.master import _auth
from determined.master._core._authz import Authz, Permission
from determined.master._wire import APIError, as_utc, ts
from determined.master.db import Database, User, UserSession, utcnow

ACCESS_TOKEN = "ACCESS_TOKEN"
INFINITE_LIFESPAN = "-1"
MAX_ALLOWED_DAYS = 106751
"""Upstream's cap (the longest ``time.Duration``, in days)."""
DEFAULT_LIFESPAN_DAYS = 30

_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")

SORT_COLUMNS = {
    "SORT_BY_UNSPECIFIED": UserSession.id,
    "SORT_BY_USER_ID": UserSession.user_id,
    "SORT_BY_EXPIRY": UserSession.expiry,
    "SORT_BY_CREATED_AT": UserSession.created_at,
    "SORT_BY_TOKEN_TYPE": UserSession.token_type,
    "SORT_BY_REVOKED": UserSession.revoked_at,
    "SORT_BY_DESCRIPTION": UserSession.description,
}


def parse_duration(text: str) -> datetime.timedelta:
    """A Go duration string (``"1h30m"``, ``"45s"``, ``"-2h"``) as a timedelta.

    Raises:
        APIError: 400 naming ``lifespan`` when the text is no Go duration.
    """
    raw = text.strip()
    sign = -1.0 if raw.startswith("-") else 1.0
    body = raw.lstrip("+-")
    if body == "0":
        return datetime.timedelta(0)
    seconds, pos = 0.0, 0
    for match in _PART.finditer(body):
        if match.start() != pos:
            break
        seconds += float(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    if not body or pos != len(body):
        raise APIError(
            400, f"lifespan: {text!r} is not a duration like '48h', '30m' or '-1' (the maximum)"
        )
    return datetime.timedelta(seconds=sign * seconds)


@dataclasses.dataclass(frozen=True)
class TokenSettings:
    """The master's ``security.token`` section, in days."""

    default_lifespan_days: int = DEFAULT_LIFESPAN_DAYS
    max_lifespan_days: int = DEFAULT_LIFESPAN_DAYS

    @classmethod
    def from_security(cls, security: dict[str, Any] | None) -> TokenSettings:
        """Read and check ``security.token``; ``-1`` stands for the longest allowed lifespan.

        Raises:
            ValueError: a setting is not an integer, is negative (other than -1), too large, or the
                default exceeds the maximum.
        """
        section = (security or {}).get("token") or {}
        if not isinstance(section, dict):
            raise ValueError("security.token: must be a mapping")
        values = {}
        for name in ("default_lifespan_days", "max_lifespan_days"):
            value = section.get(name, DEFAULT_LIFESPAN_DAYS)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"security.token.{name}: must be an integer, got {value!r}")
            if value == -1:
                value = MAX_ALLOWED_DAYS
            if not 0 <= value <= MAX_ALLOWED_DAYS:
                raise ValueError(f"security.token.{name}: must be -1 or 0..{MAX_ALLOWED_DAYS}")
            values[name] = value
        if values["default_lifespan_days"] > values["max_lifespan_days"]:
            raise ValueError(
                "security.token.default_lifespan_days: must not exceed max_lifespan_days"
            )
        return cls(**values)


def token_info(row: UserSession) -> dict[str, Any]:
    """Upstream's ``TokenInfo`` (never the secret)."""
    return {
        "id": row.id,
        "userId": row.user_id,
        "expiry": ts(row.expiry),
        "createdAt": ts(row.created_at),
        "tokenType": f"TOKEN_TYPE_{row.token_type}",
        "revoked": row.revoked_at is not None,
        "description": row.description or "",
    }


_PERMISSIONS = {
    "create": (Permission.CREATE_TOKEN, Permission.CREATE_OTHER_TOKEN),
    "list": (Permission.VIEW_TOKEN, Permission.VIEW_OTHER_TOKEN),
    "change": (Permission.UPDATE_TOKEN, Permission.ADMINISTRATE_TOKEN),
}


def _may(authz: Authz | None, caller: User, owner_id: int | None, what: str) -> bool:
    """Whether ``caller`` may ``what`` the tokens of ``owner_id`` (None: of every user)."""
    own, other = _PERMISSIONS[what]
    if authz is None:
        return bool(caller.admin) or caller.id == owner_id
    if caller.id == owner_id:
        return authz.can_anywhere(caller, own)
    return authz.can(caller, other, None)


def _allowed(authz: Authz | None, caller: User, owner_id: int, what: str) -> None:
    if not _may(authz, caller, owner_id, what):
        own, other = _PERMISSIONS[what]
        needed = own if caller.id == owner_id else other
        whose = "your own" if caller.id == owner_id else "other users'"
        raise APIError(
            403,
            f"permission denied: user {caller.username!r} may not {what} {whose} access tokens"
            f" (needs {needed.wire_name})",
        )


class AccessTokens:
    """Access tokens of one master's users."""

    def __init__(
        self, db: Database, settings: TokenSettings | None = None, authz: Authz | None = None
    ) -> None:
        self._db = db
        self.settings = settings or TokenSettings()
        self.authz = authz
        """Who may do what (set by the manager; None: own tokens, and admins everybody's)."""

    def lifespan(self, text: str | None) -> datetime.timedelta:
        """The lifespan a create request asks for (the default when None), checked against the
        maximum (400 naming ``lifespan`` otherwise)."""
        most = datetime.timedelta(days=self.settings.max_lifespan_days)
        if text is None or text == "":
            return datetime.timedelta(days=self.settings.default_lifespan_days)
        if text.strip() == INFINITE_LIFESPAN:
            return most
        span = parse_duration(text)
        if span <= datetime.timedelta(0):
            raise APIError(400, "lifespan: must be a positive duration, or -1 for the maximum")
        if span > most:
            raise APIError(
                400,
                f"lifespan: {text!r} exceeds the maximum of {self.settings.max_lifespan_days} days"
                " (security.token.max_lifespan_days)",
            )
        return span

    def create(
        self, caller: User, user_id: int, lifespan: str | None, description: str
    ) -> tuple[str, int]:
        """A new access token for ``user_id``: the secret (shown only now) and its id."""
        span = self.lifespan(lifespan)
        _allowed(self.authz, caller, user_id, "create")
        token = _auth.new_token()
        with self._db.write() as session:
            user = session.get(User, user_id)
            if user is None:
                raise APIError(404, f"user {user_id} not found")
            if not user.active:
                raise APIError(400, f"userId: user {user.username!r} is not active")
            now = utcnow()
            row = UserSession(
                user_id=user_id,
                token_hash=_auth.token_hash(token),
                expiry=now + span,
                created_at=now,
                token_type=ACCESS_TOKEN,
                description=description,
            )
            session.add(row)
            session.flush()
            return token, row.id

    def search(
        self,
        caller: User,
        *,
        token_ids: Sequence[int] = (),
        username: str | None = None,
        show_inactive: bool = False,
        sort_by: str = "SORT_BY_UNSPECIFIED",
        descending: bool = False,
    ) -> list[dict[str, Any]]:
        """``TokenInfo`` of the access tokens ``caller`` may see (their own unless admin),
        filtered as upstream's ``GET /api/v1/tokens``: by ids, by username, active ones only unless
        ``show_inactive``."""
        column = SORT_COLUMNS.get(sort_by)
        if column is None:
            raise APIError(400, f"sortBy: one of {', '.join(SORT_COLUMNS)}, got {sort_by!r}")
        stmt = select(UserSession).where(UserSession.token_type == ACCESS_TOKEN)
        with self._db.read() as session:
            if username:
                target = session.scalar(select(User.id).where(User.username == username))
                if target is None:
                    raise APIError(404, f"user {username!r} not found")
                _allowed(self.authz, caller, target, "list")
                stmt = stmt.where(UserSession.user_id == target)
            elif not _may(self.authz, caller, None, "list"):
                _allowed(self.authz, caller, caller.id, "list")
                stmt = stmt.where(UserSession.user_id == caller.id)
            if not show_inactive:
                stmt = stmt.where(UserSession.revoked_at.is_(None), UserSession.expiry > utcnow())
            ids = [int(i) for i in token_ids if int(i) > 0]
            if ids:
                stmt = stmt.where(or_(*(UserSession.id == i for i in ids)))
            order = column.desc() if descending else column.asc()
            rows = session.scalars(stmt.order_by(order, UserSession.id.asc()))
            return [token_info(r) for r in rows]

    def patch(
        self, caller: User, token_id: int, description: str | None, revoke: bool
    ) -> dict[str, Any]:
        """Change an active token's description and/or revoke it; its new ``TokenInfo``.

        Raises:
            APIError: 404 for no such access token, 403 for another user's token (non-admins),
                400 when the token is already revoked or expired.
        """
        with self._db.write() as session:
            row = _find(session, token_id)
            _allowed(self.authz, caller, row.user_id, "change")
            expiry = as_utc(row.expiry)
            if row.revoked_at is not None or expiry is None or expiry <= utcnow():
                raise APIError(400, f"tokenId: token {token_id} is revoked or expired")
            if description is not None:
                row.description = description
            if revoke:
                row.revoked_at = utcnow()
            session.flush()
            return token_info(row)


def _find(session: Session, token_id: int) -> UserSession:
    row = session.get(UserSession, token_id)
    if row is None or row.token_type != ACCESS_TOKEN:
        raise APIError(404, f"access token {token_id} not found")
    return row
