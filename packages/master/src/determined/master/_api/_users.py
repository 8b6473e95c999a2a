"""Login, sessions, users and the master's own description."""

from __future__ import annotations

from typing import Any

from fastapi import Depends, Request
from sqlalchemy import func, select

from determined.master import _auth
from determined.master._api import _serialize
from determined.master._api._deps import (
    Principal,
    accounts_of,
    authenticate,
    bool_param,
    int_param,
    json_any,
    json_body,
    master_of,
    require_admin,
)
from determined.master._api._json_route import api_router
from determined.master._core._accounts import UserChanges, find_user
from determined.master._wire import APIError, get, pagination
from determined.master.db import User

router = api_router()


def _hashed_password(body: dict[str, Any], field: str = "password") -> str:
    password = get(body, field, "") or ""
    if not isinstance(password, str):
        raise APIError(400, f"{field}: must be a string")
    if get(body, "is_hashed", False):
        return password
    return _auth.client_hash(password)


@router.post("/api/v1/auth/login", tags=["Authentication"])
def login(request: Request, body: dict[str, Any] = Depends(json_body)) -> dict[str, Any]:
    """Exchange a username and password for a session token."""
    username = get(body, "username")
    if not isinstance(username, str) or not username:
        raise APIError(400, "username: required")
    hashed = _hashed_password(body)
    token, user = accounts_of(request).login(username, hashed)
    return {"token": token, "user": _serialize.user(user)}


@router.post("/api/v1/auth/logout", tags=["Authentication"])
def logout(request: Request, principal: Principal = Depends(authenticate)) -> dict[str, Any]:
    """Revoke the calling session."""
    if principal.session_id is not None:
        accounts_of(request).logout(principal.session_id)
    return {}


@router.get("/api/v1/auth/user", tags=["Authentication"])
def current_user(principal: Principal = Depends(authenticate)) -> dict[str, Any]:
    """The calling user."""
    return {"user": _serialize.user(principal.user)}


@router.get("/api/v1/me", tags=["Users"])
def me(principal: Principal = Depends(authenticate)) -> dict[str, Any]:
    """The calling user."""
    return {"user": _serialize.user(principal.user)}


@router.get("/api/v1/users/me", tags=["Users"])
def users_me(principal: Principal = Depends(authenticate)) -> dict[str, Any]:
    """The calling user (the path older clients use to check a cached token)."""
    return {"user": _serialize.user(principal.user)}


@router.get("/api/v1/users", tags=["Users"])
def list_users(request: Request, principal: Principal = Depends(authenticate)) -> dict[str, Any]:
    """Every user (only the active or the inactive ones with ``active=true|false``)."""
    active = request.query_params.get("active")
    stmt = select(User).order_by(User.id)
    if active not in (None, ""):
        stmt = stmt.where(User.active.is_(bool_param(active)))
    with master_of(request).db.read() as session:
        users = list(session.scalars(stmt))
        return {
            "users": [_serialize.user(u) for u in users],
            "pagination": pagination(0, len(users), len(users), len(users)),
        }


@router.post("/api/v1/users", tags=["Users"])
def create_user(
    request: Request,
    body: dict[str, Any] = Depends(json_body),
    principal: Principal = Depends(authenticate),
) -> dict[str, Any]:
    """Create a user (admins only)."""
    require_admin(principal)
    spec = get(body, "user") or {}
    if not isinstance(spec, dict):
        raise APIError(400, "user: must be an object")
    username = spec.get("username")
    if not isinstance(username, str) or not username.strip():
        raise APIError(400, "user.username: required")
    hashed = _hashed_password(body)
    link = _agent_user_group(get(spec, "agent_user_group"), "user.agentUserGroup")
    user = accounts_of(request).create(
        username=username,
        display_name=get(spec, "display_name"),
        admin=bool(spec.get("admin", False)),
        active=bool(spec.get("active", True)),
        remote=bool(spec.get("remote", False)),
        hashed_password=hashed,
    )
    if link is not None:
        user = _link_agent_user(request, user.id, link)
    return {"user": _serialize.user(user)}


def _check_display_name(request: Request, user_id: int, name: str) -> str:
    """Upstream's rules for a display name: ASCII, not 'admin' (but for an admin) nor 'determined'
    (but for that user), and no other user's username or display name, ignoring case."""
    name = name.strip()
    if not name.isascii() or not name.isprintable():
        raise APIError(400, "displayName: must be printable ASCII")
    lower = name.lower()
    with master_of(request).db.read() as session:
        target = find_user(session, user_id)
        if lower == "admin" and not target.admin:
            raise APIError(400, "displayName: a non-admin user cannot be named 'admin'")
        if lower == "determined" and target.username != "determined":
            raise APIError(400, "displayName: only the 'determined' user may be named so")
        if name:
            clash = session.scalar(
                select(User.id).where(
                    User.id != user_id,
                    (func.lower(User.username) == lower) | (func.lower(User.display_name) == lower),
                )
            )
            if clash is not None:
                raise APIError(400, f"displayName: {name!r} is another user's name or display name")
    return name


def _agent_user_group(value: Any, field: str) -> dict[str, Any] | None:
    """Upstream's ``v1AgentUserGroup``: the OS user and group a user's tasks run as, all four fields
    together. det records it (tasks still run as the master's own OS user)."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise APIError(400, f"{field}: must be an object")
    link = {k: get(value, k) for k in ("agent_uid", "agent_gid", "agent_user", "agent_group")}
    missing = [k for k, v in link.items() if v in (None, "")]
    if missing:
        raise APIError(400, f"{field}: agentUid, agentGid, agentUser and agentGroup are all needed")
    for key in ("agent_uid", "agent_gid"):
        link[key] = int_param(link[key], f"{field}.{key}")
    return {
        "agentUid": link["agent_uid"],
        "agentGid": link["agent_gid"],
        "agentUser": str(link["agent_user"]),
        "agentGroup": str(link["agent_group"]),
    }


def _link_agent_user(request: Request, user_id: int, link: dict[str, Any]) -> User:
    with master_of(request).db.write() as session:
        user = find_user(session, user_id)
        user.agent_user_group = link
        session.flush()
        session.expunge(user)
        return user


@router.get("/api/v1/users/setting", tags=["Users"])
def user_settings(principal: Principal = Depends(authenticate)) -> dict[str, Any]:
    """Web UI settings (none are stored yet)."""
    return {"settings": []}


@router.get("/api/v1/users/{user_id}", tags=["Users"])
def get_user(
    request: Request, user_id: int, principal: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """One user by id."""
    with master_of(request).db.read() as session:
        return {"user": _serialize.user(find_user(session, user_id))}


@router.get("/api/v1/users/{username}/by-username", tags=["Users"])
def get_user_by_name(
    request: Request, username: str, principal: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """One user by name."""
    with master_of(request).db.read() as session:
        user = session.scalar(select(User).where(User.username == username))
        if user is None:
            raise APIError(404, f"user {username!r} not found")
        return {"user": _serialize.user(user)}


@router.patch("/api/v1/users/{user_id}", tags=["Users"])
def patch_user(
    request: Request,
    user_id: int,
    body: dict[str, Any] = Depends(json_body),
    principal: Principal = Depends(authenticate),
) -> dict[str, Any]:
    """Change a user (admins; a user may change their own display name and password)."""
    self_edit = principal.user.id == user_id
    privileged = {"admin", "active", "username", "remote", "agentUserGroup", "agent_user_group"}
    if not principal.user.admin and (not self_edit or privileged & set(body)):
        raise APIError(403, "only an admin may change other users or these fields")
    name = body.get("username")
    if "username" in body and (not isinstance(name, str) or not name.strip()):
        raise APIError(400, "username: must be a non-empty string")
    display_name = get(body, "display_name")
    if display_name is not None:
        display_name = _check_display_name(request, user_id, str(display_name))
    flags = {field: bool(body[field]) for field in ("admin", "active", "remote") if field in body}
    changes = UserChanges(
        username=name if "username" in body else None,
        display_name=str(display_name) if display_name is not None else None,
        hashed_password=_hashed_password(body) if "password" in body else None,
        **flags,
    )
    link = _agent_user_group(get(body, "agent_user_group"), "agentUserGroup")
    user = accounts_of(request).change(user_id, changes)
    if link is not None:
        user = _link_agent_user(request, user_id, link)
    return {"user": _serialize.user(user)}


@router.post("/api/v1/users/{user_id}/password", tags=["Users"])
def set_password(
    request: Request,
    user_id: int,
    raw: Any = Depends(json_any),
    principal: Principal = Depends(authenticate),
) -> dict[str, Any]:
    """Set a user's password (the user themself or an admin). Like upstream, the password
    arrives in plain text unless ``isHashed`` says otherwise; the master salts and hashes it.
    The body is ``{"password": ...}`` or, as upstream's gateway takes it, a bare JSON string."""
    if principal.user.id != user_id:
        require_admin(principal)
    body: dict[str, Any] = {"password": raw} if isinstance(raw, str) else raw
    if not isinstance(body, dict):
        raise APIError(400, 'password: send {"password": ...} or a JSON string')
    password = body.get("password")
    if not isinstance(password, str):
        raise APIError(400, "password: required")
    hashed = password if get(body, "is_hashed", False) else _auth.client_hash(password)
    user = accounts_of(request).set_password(user_id, hashed)
    return {"user": _serialize.user(user)}
