"""The experiment owner's session that an experiment's trials get as ``DET_USER_TOKEN``.

A trial acts for its experiment's owner in SDK calls that reach beyond its own allocation (its
allocation token reaches only its own trial). As upstream, the session belongs to the
experiment, not to each allocation: one row however many trials run, revoked when the experiment
ends. A session per allocation had cost every trial an INSERT and a revoking UPDATE, and left
one row per trial ever run in ``user_sessions``.

The session is renewed hourly (a new row; the older ones stay valid until the experiment ends), so
every trial's token is valid for at least :data:`_auth.SESSION_DAYS` less an hour from its
launch. When a flush deletes or revokes the current session (a trial logged out with it), the next
trial gets a new one. A master keeps the tokens it made in memory only; start-up recovery revokes
every session an earlier master made for trials (no trial process survives it).
"""

from __future__ import annotations

import dataclasses
import datetime
import threading
import time
from typing import Any

from sqlalchemy import bindparam, event, insert, or_, update
from sqlalchemy.orm import Session

from determined.master import _auth
from determined.master._core._held_rows import update_unloaded
from determined.master._core._transactions import Transactions
from determined.master.db import Experiment, UserSession, note_revoked, utcnow

RENEW_S = 3600.0
"""How long one session is handed to new trials before the next one is made."""


def owner_session_description(exp_id: int) -> str:
    """How the owner's session of an experiment's trials is marked in ``user_sessions``."""
    return f"trials of experiment {exp_id}"


@dataclasses.dataclass
class _Made:
    token: str
    digest: str
    made_at: float
    """``time.monotonic()`` when it was made."""


class OwnerSessions:
    """The owner sessions of live experiments' trials this master made (in memory)."""

    def __init__(self, transactions: Transactions) -> None:
        self._transactions = transactions
        self._lock = threading.Lock()
        self._current: dict[int, _Made] = {}
        """The session new trials of an experiment get."""
        self._open: dict[int, list[str]] = {}
        """Digests of every session made for an experiment, to revoke at its end."""
        event.listen(transactions.db._sessions, "after_flush", self._after_flush)

    def token(self, session: Session, exp: Experiment) -> str:
        """The owner's token for a new trial of ``exp`` (a session is made in the open
        transaction when there is none, or the current one is older than :data:`RENEW_S`)."""
        exp_id = exp.id
        with self._lock:
            current = self._current.get(exp_id)
        if current is not None and time.monotonic() - current.made_at < RENEW_S:
            return current.token
        token = _auth.new_token()
        made = _Made(token, _auth.token_hash(token), time.monotonic())
        session.connection().execute(
            _INSERT_SESSION,
            {
                "user_id": exp.owner_id,
                "token_hash": made.digest,
                "expiry": utcnow() + datetime.timedelta(days=_auth.SESSION_DAYS),
                "description": owner_session_description(exp_id),
            },
        )
        with self._lock:
            self._current[exp_id] = made
            self._open.setdefault(exp_id, []).append(made.digest)
        self._transactions.undo(lambda: self._unmake(exp_id, made, current))
        return token

    def _unmake(self, exp_id: int, made: _Made, previous: _Made | None) -> None:
        """Undo :meth:`token` after its transaction failed: the row was never written."""
        with self._lock:
            if self._current.get(exp_id) is made:
                if previous is None:
                    self._current.pop(exp_id, None)
                else:
                    self._current[exp_id] = previous
            digests = self._open.get(exp_id, [])
            if made.digest in digests:
                digests.remove(made.digest)

    def end(self, session: Session, exp_id: int) -> None:
        """Revoke the sessions made for ``exp``'s trials, in the transaction that ends it."""
        with self._lock:
            current = self._current.pop(exp_id, None)
            digests = self._open.pop(exp_id, [])
        if not digests:
            return
        now = utcnow()
        for digest in digests:
            params = {"digest": digest, "now": now}
            update_unloaded(session, _REVOKE_BY_DIGEST, params, UserSession, token_hash=digest)
        note_revoked(session, digests=digests)  # the authentication cache drops them at the commit
        self._transactions.undo(lambda: self._unend(exp_id, current, digests))

    def _unend(self, exp_id: int, current: _Made | None, digests: list[str]) -> None:
        with self._lock:
            if current is not None:
                self._current.setdefault(exp_id, current)
            self._open.setdefault(exp_id, []).extend(digests)

    def _after_flush(self, session: Session, _context: Any) -> None:
        """Stop handing out a current session that a flush deleted or revoked (a logout)."""
        if not self._current:
            return
        gone = {
            obj.token_hash
            for obj in (*session.deleted, *session.dirty)
            if isinstance(obj, UserSession) and (obj in session.deleted or obj.revoked_at)
        }
        if not gone:
            return
        with self._lock:
            for exp_id, made in list(self._current.items()):
                if made.digest in gone:
                    del self._current[exp_id]


def revoke_earlier_owner_sessions(session: Session) -> None:
    """Revoke the owner sessions an earlier master made for trials (start-up recovery: none of
    their trial processes is left). ``trial allocation ...`` sessions are those of det versions
    that made one per allocation."""
    session.connection().execute(_REVOKE_EARLIER, {"now": utcnow()})


_INSERT_SESSION = insert(UserSession)
_REVOKE_BY_DIGEST = (
    update(UserSession)
    .where(UserSession.token_hash == bindparam("digest"), UserSession.revoked_at.is_(None))
    .values(revoked_at=bindparam("now"))
)
_REVOKE_EARLIER = (
    update(UserSession)
    .where(
        or_(
            UserSession.description.like("trials of experiment %"),
            UserSession.description.like("trial allocation %"),
        ),
        UserSession.token_type == "USER_SESSION",  # not an access token described alike
        UserSession.revoked_at.is_(None),
    )
    .values(revoked_at=bindparam("now"))
)
