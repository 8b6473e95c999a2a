"""Request plumbing shared by every route: JSON bodies, authentication, the master object."""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING, Any

import orjson
from fastapi import Request
from sqlalchemy import bindparam, event, inspect, select
from starlette.requests import HTTPConnection

from determined.master import _auth
from determined.master._wire import APIError, as_utc
from determined.master.db import (
    Allocation,
    Experiment,
    Run,
    User,
    UserSession,
    take_revoked,
    utcnow,
)

if TYPE_CHECKING:
    from determined.master._api._metric_stream import StreamCache
    from determined.master._core._accounts import Accounts
    from determined.master._core._allocations import Allocations
    from determined.master._core._authz import Authz
    from determined.master._core._checkpoints import Checkpoints
    from determined.master._core._cluster_messages import ClusterMessages
    from determined.master._core._cluster_view import ClusterView
    from determined.master._core._experiments import Experiments
    from determined.master._core._log_settings import LogSettings
    from determined.master._core._metrics_writer import MetricsWriter
    from determined.master._core._model_registry import ModelRegistry
    from determined.master._core._notebooks import Notebooks
    from determined.master._core._searcher_ops import SearcherOperations
    from determined.master._core._tasks import Tasks
    from determined.master._core._tensorboards import Tensorboards
    from determined.master._core._tokens import AccessTokens
    from determined.master._core._trial_records import TrialRecords
    from determined.master._core._trial_sources import TrialSources
    from determined.master._core._unmanaged import UnmanagedRuns
    from determined.master._core._usage import ResourceUsage
    from determined.master._master import Master


@dataclasses.dataclass
class Principal:
    """Who is calling: a user, and the allocation when a trial calls with its allocation token."""

    user: User
    allocation_id: str | None = None
    session_id: int | None = None
    trial_id: int | None = None
    """With ``allocation_id``: the trial, experiment and task the token may touch (``_alloc_scope``)."""
    experiment_id: int | None = None
    task_id: str | None = None


def master_of(request: Request) -> Master:
    return request.app.state.master  # type: ignore[no-any-return]


def experiments_of(request: Request) -> Experiments:
    """The experiments service: every change to experiments and trials goes through it."""
    return master_of(request).manager.experiments


def allocations_of(request: Request) -> Allocations:
    """The allocations service: preemption signals and their acknowledgements."""
    return master_of(request).manager.allocations


def searcher_operations_of(request: Request) -> SearcherOperations:
    """The searcher-operations protocol of running trials."""
    return master_of(request).manager.searcher_operations


def accounts_of(request: Request) -> Accounts:
    """The accounts service: users, passwords and login sessions."""
    return master_of(request).manager.accounts


def authz_of(request: Request) -> Authz:
    """The authorization API: ``check``/``can``/``visible_workspace_ids`` (see ``_core/_authz.py``)."""
    return master_of(request).manager.authz


def checkpoints_of(request: Request) -> Checkpoints:
    """The checkpoints service: reported checkpoints and what remains of them."""
    return master_of(request).manager.checkpoints


def registry_of(request: Request) -> ModelRegistry:
    """The model-registry service: models and their versions."""
    return master_of(request).manager.model_registry


def trial_records_of(request: Request) -> TrialRecords:
    """What running trials record about themselves (status, metadata, logs, alerts)."""
    return master_of(request).manager.trial_records


def unmanaged_of(request: Request) -> UnmanagedRuns:
    """The unmanaged-runs service: experiments and trials core_v2 runs outside the master."""
    return master_of(request).manager.unmanaged


def metrics_writer_of(request: Request) -> MetricsWriter:
    """The group-commit writer of metric reports."""
    return master_of(request).manager.metrics_writer


def trial_sources_of(request: Request) -> TrialSources:
    """Trials that used a checkpoint or model version, and their metrics."""
    return master_of(request).manager.trial_sources


def cluster_messages_of(request: Request) -> ClusterMessages:
    """The cluster-wide message of the admins."""
    return master_of(request).manager.cluster_messages


def cluster_view_of(request: Request) -> ClusterView:
    """The job queue and the slots."""
    return master_of(request).manager.cluster_view


def resource_usage_of(request: Request) -> ResourceUsage:
    """Historical slot use of allocations."""
    return master_of(request).manager.resource_usage


def log_settings_of(request: Request) -> LogSettings:
    """The master's log level and colour."""
    return master_of(request).manager.log_settings


def notebooks_of(request: Request) -> Notebooks:
    """The notebooks service: JupyterLab tasks."""
    return master_of(request).manager.notebooks


def tensorboards_of(request: Request) -> Tensorboards:
    """The TensorBoards service: TensorBoard tasks and experiments' TensorBoard files."""
    return master_of(request).manager.tensorboards


def tokens_of(request: Request) -> AccessTokens:
    """The access-tokens service: users' long-lived bearer tokens."""
    return master_of(request).manager.tokens


def tasks_of(request: Request) -> Tasks:
    """The tasks service: commands, TensorBoards, notebooks and shells."""
    return master_of(request).manager.tasks


def metric_stream_cache_of(request: Request) -> StreamCache:
    """The encoded trial-metrics replies of this master's API."""
    return request.app.state.metric_stream_cache  # type: ignore[no-any-return]


def loads(raw: bytes) -> Any:
    """Decode a JSON request body: orjson, or the standard library for what orjson refuses
    (NaN/Infinity literals, which Python clients may send)."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        try:
            return json.loads(raw)
        except RecursionError:  # orjson stops at 1024 levels, the standard library overflows
            raise ValueError("nested too deeply") from None


LARGE_BODY_BYTES = 256 * 1024
"""Bodies larger than this are parsed on a worker thread instead of the event loop."""


async def json_body(request: Request) -> dict[str, Any]:
    """The request body as a JSON object ({} when empty); 400 for malformed JSON."""
    raw = await request.body()
    if len(raw) > LARGE_BODY_BYTES:
        # Parsing megabytes takes a while: off the event loop, so other requests go on.
        from starlette.concurrency import run_in_threadpool

        return await run_in_threadpool(json_object, raw)
    return json_object(raw)


def json_object(raw: bytes) -> dict[str, Any]:
    """``raw`` decoded as a JSON object ({} when empty); a 400 for malformed JSON or another
    value."""
    if not raw.strip():
        return {}
    try:
        body = loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        raise APIError(400, f"malformed JSON body: {e}") from None
    if not isinstance(body, dict):
        raise APIError(400, "the request body must be a JSON object")
    return body


async def json_any(request: Request) -> Any:
    """The request body as any JSON value (legacy ``/task-logs`` posts a bare list)."""
    raw = await request.body()
    if not raw.strip():
        return None
    try:
        return loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        raise APIError(400, f"malformed JSON body: {e}") from None


class AuthCache:
    """Resolved tokens, kept for a few seconds so a busy trial does not pay a lookup per request.

    A flush that changes or deletes a User, UserSession or Allocation row (logout, password or admin
    changes, deactivation) drops the entries resolved through that row, and so does the commit of a
    transaction that noted revocations made without loading rows (``db.note_revoked``: an
    allocation ending), so revocations take effect at once; new rows (a login, a trial's session or
    allocation starting) and an allocation's other columns (its state) leave the cache alone.
    """

    TTL_SECONDS = 5.0

    def __init__(self, master: Master) -> None:
        self._entries: dict[str, tuple[float, Principal]] = {}
        self._owners: dict[int, tuple[float, User]] = {}
        """Users resolved through an allocation token, by id: the owner of an experiment whose
        trials start one after another (a new trial's token is then resolved in memory)."""
        self._lock = threading.Lock()
        event.listen(master.db._sessions, "after_flush", self._after_flush)
        event.listen(master.db._sessions, "after_commit", self._after_commit)
        event.listen(master.db._sessions, "after_rollback", take_revoked)

    def get(self, digest: str) -> Principal | None:
        entry = self._entries.get(digest)
        if entry is None or entry[0] < time.monotonic():
            return None
        return entry[1]

    def put(self, digest: str, principal: Principal, expiry: Any) -> None:
        until = time.monotonic() + self.TTL_SECONDS
        if expiry is not None:
            until = min(until, time.monotonic() + (expiry - utcnow()).total_seconds())
        with self._lock:
            self._entries[digest] = (until, principal)

    def owner(self, user_id: int) -> User | None:
        """A user :meth:`put_owner` kept (for a few seconds, as the entries), or None."""
        entry = self._owners.get(user_id)
        if entry is None or entry[0] < time.monotonic():
            return None
        return entry[1]

    def put_owner(self, user: User) -> None:
        with self._lock:
            self._owners[user.id] = (time.monotonic() + self.TTL_SECONDS, user)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._owners.clear()

    def _after_commit(self, session: Any) -> None:
        revoked = take_revoked(session)
        if revoked is None or not self._entries:
            return
        self._drop(digests=revoked.digests, allocations=revoked.allocation_ids)

    _ALLOCATION_KEYS = ("end_time", "token_hash", "trial_id", "task_id")
    """The allocation columns a cached principal depends on."""

    def _after_flush(self, session: Any, _context: Any) -> None:
        users: set[int] = set()
        sessions: set[int] = set()
        allocations: set[str] = set()
        for obj in (*session.dirty, *session.deleted):
            if isinstance(obj, User):
                users.add(obj.id)
            elif isinstance(obj, UserSession):
                sessions.add(obj.id)
            elif isinstance(obj, Allocation):
                state = inspect(obj)
                if obj in session.deleted or any(
                    state.attrs[key].history.has_changes() for key in self._ALLOCATION_KEYS
                ):
                    allocations.add(obj.allocation_id)
        if not (users or sessions or allocations) or not (self._entries or self._owners):
            return
        self._drop(users=users, sessions=sessions, allocations=allocations)

    def _drop(
        self,
        *,
        digests: Iterable[str] = (),
        users: AbstractSet[int] = frozenset(),
        sessions: AbstractSet[int] = frozenset(),
        allocations: AbstractSet[str] = frozenset(),
    ) -> None:
        """Forget the entries of ``digests`` and those resolved through these users, login
        sessions or allocations."""
        with self._lock:
            for digest in digests:
                self._entries.pop(digest, None)
            for user_id in users:
                self._owners.pop(user_id, None)
            if not (users or sessions or allocations):
                return
            for digest, (_, principal) in list(self._entries.items()):
                if (
                    principal.user.id in users
                    or principal.session_id in sessions
                    or principal.allocation_id in allocations
                ):
                    del self._entries[digest]


def _auth_cache(request: Request) -> AuthCache:
    return request.app.state.auth_cache  # type: ignore[no-any-return]


def _bearer(value: str | None) -> str | None:
    if not value:
        return None
    parts = value.split(None, 1)
    if len(parts) == 2 and parts[0].lower() == "bearer":
        return parts[1].strip()
    return None


def _candidate_tokens(request: Request) -> list[str]:
    alloc_token = _bearer(request.headers.get("grpc-metadata-x-allocation-token"))
    user_token = _bearer(request.headers.get("authorization"))
    if user_token is None:
        cookie = request.cookies.get("auth")
        user_token = cookie or None
    candidates = [t for t in (alloc_token, user_token) if t]
    if not candidates:
        raise APIError(401, "authentication required: send 'Authorization: Bearer <token>'")
    return candidates


def _cached_principal(cache: AuthCache, candidates: list[str]) -> Principal | None:
    for token in candidates:
        cached = cache.get(_auth.token_hash(token))
        if cached is not None:
            return cached
    return None


async def authenticate(request: Request) -> Principal:
    """The caller of a request (:func:`authenticate_sync`), as a route's dependency: a token
    already known costs no thread hop (the database lookup of a new one runs on a worker thread)."""
    from starlette.concurrency import run_in_threadpool

    cache = _auth_cache(request)
    cached = _cached_principal(cache, _candidate_tokens(request)) or _live_allocation(
        request, cache
    )
    if cached is None:
        return await run_in_threadpool(authenticate_sync, request)
    if cached.allocation_id is not None:
        from determined.master._api import _alloc_scope

        if _alloc_scope.needs_body(request) or "uuid" in request.path_params:
            await run_in_threadpool(_check_scope, request, cached)
        else:
            _alloc_scope.check(request, cached)
    return cached


def _live_allocation(request: Request, cache: AuthCache) -> Principal | None:
    """The principal of a live allocation's token from memory (the allocations service and the
    owner the cache keeps), without a database read or a thread hop: a new trial's first
    request. None when either is not known there (the database then answers)."""
    token = _bearer(request.headers.get("grpc-metadata-x-allocation-token"))
    if token is None:
        return None
    alloc = master_of(request).manager.allocations.of_token(token)
    user = cache.owner(alloc.owner_id) if alloc is not None else None
    if alloc is None or user is None:
        return None
    principal = Principal(
        user,
        alloc.allocation_id,
        None,
        trial_id=alloc.trial_id,
        experiment_id=alloc.experiment_id,
        task_id=alloc.task_id,
    )
    cache.put(_auth.token_hash(token), principal, None)
    return principal


def _check_scope(request: Request, principal: Principal) -> None:
    """403 when an allocation token reaches beyond its own trial (``_alloc_scope``); runs on a
    worker thread (it may read the body through the event loop and the database)."""
    if principal.allocation_id is None:
        return
    from determined.master._api import _alloc_scope

    body = None
    if _alloc_scope.needs_body(request):
        import anyio.from_thread

        raw = anyio.from_thread.run(request.body)
        try:
            body = loads(raw) if raw.strip() else None
        except (ValueError, UnicodeDecodeError):
            body = None  # the route answers 400 for malformed JSON
    _alloc_scope.check(request, principal, body)


def authenticate_sync(request: Request) -> Principal:
    """Resolve the caller from ``Authorization: Bearer`` (user, access or allocation token) or
    ``Grpc-Metadata-x-allocation-token: Bearer``; 401 otherwise, 403 for an allocation token
    outside its own trial."""
    principal = _resolve(request)
    _check_scope(request, principal)
    return principal


_SESSION_BY_HASH = select(UserSession).where(UserSession.token_hash == bindparam("digest"))
_LIVE_ALLOCATION_BY_HASH = (
    select(Allocation.allocation_id, Allocation.task_id, Run.id, Experiment.id, User)
    .join(Run, Run.id == Allocation.trial_id)
    .join(Experiment, Experiment.id == Run.experiment_id)
    .join(User, User.id == Experiment.owner_id)
    .where(Allocation.token_hash == bindparam("digest"), Allocation.end_time.is_(None))
)
"""A live trial allocation's token: the trial, its experiment and the experiment's owner (whose
rights the trial acts with) in one SELECT. Both statements are built once: every trial's first
request, and every user's after the cache's few seconds, runs them."""


def _resolve(request: Request) -> Principal:
    master = master_of(request)
    candidates = _candidate_tokens(request)
    cache = _auth_cache(request)
    cached = _cached_principal(cache, candidates)
    if cached is not None:
        return cached
    alloc_token = _bearer(request.headers.get("grpc-metadata-x-allocation-token"))
    with master.db.read() as session:
        for token in candidates:
            digest = _auth.token_hash(token)
            # A trial's allocation token comes in its own header: looked up as one first (one
            # SELECT, not two, at each of its first requests and the cache's expiries).
            lookups = (
                (_allocation_principal, _session_principal)
                if token == alloc_token
                else (_session_principal, _allocation_principal)
            )
            for lookup in lookups:
                principal = lookup(session, digest, cache)
                if principal is not None:
                    return principal
    raise APIError(401, "invalid or expired token; log in again")


def _session_principal(session: Any, digest: str, cache: AuthCache) -> Principal | None:
    """The user of a live login session whose token hashes to ``digest`` (cached)."""
    sess = session.scalar(_SESSION_BY_HASH, {"digest": digest})
    if sess is None:
        return None
    expiry = as_utc(sess.expiry)
    if sess.revoked_at is not None or expiry is None or expiry <= utcnow():
        return None
    user = session.get(User, sess.user_id)
    if user is None or not user.active:
        return None
    session.expunge(user)
    principal = Principal(user, None, sess.id)
    cache.put(digest, principal, expiry)
    return principal


def _allocation_principal(session: Any, digest: str, cache: AuthCache) -> Principal | None:
    """The trial of a live allocation whose token hashes to ``digest``, acting as its
    experiment's owner (cached)."""
    found = session.execute(_LIVE_ALLOCATION_BY_HASH, {"digest": digest}).first()
    if found is None:
        return None
    allocation_id, task_id, trial_id, experiment_id, user = found
    session.expunge(user)
    cache.put_owner(user)
    principal = Principal(
        user,
        allocation_id,
        None,
        trial_id=trial_id,
        experiment_id=experiment_id,
        task_id=task_id,
    )
    cache.put(digest, principal, None)
    return principal


def require_admin(principal: Principal) -> None:
    if not principal.user.admin:
        raise APIError(403, "only an admin may do this")


INT64_MAX = 2**63 - 1
"""The largest id or count a database column holds; larger integers are refused with a 400."""


def int_param(value: Any, name: str, default: int | None = None) -> int | None:
    if value in (None, ""):
        return default
    try:
        number = int(value)
    except (TypeError, ValueError, OverflowError):
        raise APIError(400, f"{name}: must be an integer, got {value!r:.100}") from None
    if not -INT64_MAX <= number <= INT64_MAX:
        raise APIError(400, f"{name}: {number} is out of range (64-bit integers only)")
    return number


def _int_path_params(route: Any) -> list[str]:
    """The names of a route's path parameters typed ``int``."""
    dependant = getattr(route, "dependant", None)
    params = dependant.path_params if dependant is not None else []
    return [p.name for p in params if p.field_info.annotation is int]


async def path_ints_in_range(connection: HTTPConnection) -> None:
    """An app-wide dependency: 400 for an integer path parameter beyond 64 bits (the database
    driver cannot even look it up). Async, so hot routes pay no thread hop for it. It takes an
    ``HTTPConnection``, not a ``Request``, so WebSocket routes (the task proxy) resolve it too."""
    for name in _int_path_params(connection.scope.get("route")):
        text = str(connection.path_params.get(name, "")).strip()
        digits = text.lstrip("+-")
        if not (digits.isascii() and digits.isdigit() and len(digits) > 18):
            continue
        if len(digits) > 19 or int(digits) > INT64_MAX:
            raise APIError(400, f"{name}: {text:.40} is out of range (64-bit integers only)")


def bool_param(value: Any, default: bool = False) -> bool:
    if value in (None, ""):
        return default
    if isinstance(value, bool):
        return value
    return str(value).lower() in ("1", "true", "yes", "on")
