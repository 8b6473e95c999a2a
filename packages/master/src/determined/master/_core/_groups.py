"""User groups: named sets of users that roles can be assigned to (upstream's ``usergroup`` API).

A role assigned to a group applies to every member (see ``_authz.Authz``). Group names are unique;
deleting a group deletes its memberships and its role assignments (database cascades), so the
authorization cache is dropped after every change here.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from determined.master._core._authz import Authz
from determined.master._wire import APIError
from determined.master.db import Database, RoleAssignment, User, UserGroup, UserGroupMembership

MAX_NAME_LENGTH = 255


def check_name(name: Any, field: str = "name") -> str:
    """A group name: a non-empty string without surrounding blanks; 400 naming ``field`` else."""
    if not isinstance(name, str) or not name.strip():
        raise APIError(400, f"{field}: a non-empty group name is required")
    if name != name.strip():
        raise APIError(400, f"{field}: a group name may not start or end with blanks")
    if len(name) > MAX_NAME_LENGTH:
        raise APIError(400, f"{field}: at most {MAX_NAME_LENGTH} characters")
    return name


def user_ids(value: Any, field: str) -> list[int]:
    """A list of user ids from a request body; 400 naming ``field`` for anything else."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise APIError(400, f"{field}: must be a list of user ids")
    out: list[int] = []
    for item in value:
        if isinstance(item, bool) or not isinstance(item, (int, str)):
            raise APIError(400, f"{field}: {item!r} is not a user id")
        try:
            out.append(int(item))
        except ValueError:
            raise APIError(400, f"{field}: {item!r} is not a user id") from None
    return list(dict.fromkeys(out))


class Groups:
    """Create, search, describe, change and delete user groups."""

    def __init__(self, db: Database, authz: Authz) -> None:
        self._db = db
        self._authz = authz

    def create(self, name: Any, add_users: Any = None) -> dict[str, Any]:
        """A new group with the given members: ``{"group": GroupDetails}``."""
        name = check_name(name)
        members = user_ids(add_users, "addUsers")
        with self._db.write() as session:
            self._refuse_taken(session, name)
            self._require_users(session, members, "addUsers")
            group = UserGroup(name=name)
            session.add(group)
            session.flush()
            for uid in members:
                session.add(UserGroupMembership(group_id=group.id, user_id=uid))
            session.flush()
            answer = self._details(session, group)
        self._authz.invalidate()
        return answer

    def search(
        self, name: str | None, user_id: int | None, offset: int, limit: int
    ) -> tuple[list[dict[str, Any]], int]:
        """Groups by exact name and/or member, ordered by id: (page of GroupSearchResult, total)."""
        if limit < 0 or offset < 0:
            raise APIError(400, "offset/limit: must be >= 0")
        counts = (
            select(UserGroupMembership.group_id, func.count().label("n"))
            .group_by(UserGroupMembership.group_id)
            .subquery()
        )
        stmt = select(UserGroup, func.coalesce(counts.c.n, 0)).outerjoin(
            counts, counts.c.group_id == UserGroup.id
        )
        if name:
            stmt = stmt.where(UserGroup.name == name)
        if user_id is not None:
            mine = select(UserGroupMembership.group_id).where(
                UserGroupMembership.user_id == user_id
            )
            stmt = stmt.where(UserGroup.id.in_(mine))
        with self._db.read() as session:
            total = session.scalar(select(func.count()).select_from(stmt.subquery())) or 0
            page = stmt.order_by(UserGroup.id).offset(offset)
            if limit:
                page = page.limit(limit)
            rows = session.execute(page).all()
        results = [
            {"group": {"groupId": g.id, "name": g.name, "numMembers": int(n)}, "numMembers": int(n)}
            for g, n in rows
        ]
        return results, int(total)

    def get(self, group_id: int) -> dict[str, Any]:
        """One group with its members: ``{"group": GroupDetails}``."""
        with self._db.read() as session:
            return self._details(session, self._group(session, group_id))

    def update(
        self, group_id: int, name: Any = None, add_users: Any = None, remove_users: Any = None
    ) -> dict[str, Any]:
        """Rename a group and/or add and remove members: ``{"group": GroupDetails}``."""
        adding = user_ids(add_users, "addUsers")
        removing = user_ids(remove_users, "removeUsers")
        with self._db.write() as session:
            group = self._group(session, group_id)
            if name is not None and name != group.name:
                new_name = check_name(name)
                self._refuse_taken(session, new_name)
                group.name = new_name
            self._require_users(session, adding + removing, "addUsers/removeUsers")
            present = set(
                session.scalars(
                    select(UserGroupMembership.user_id).where(
                        UserGroupMembership.group_id == group.id
                    )
                )
            )
            missing = [u for u in removing if u not in present]
            if missing:
                raise APIError(
                    400, f"removeUsers: users {missing} are not members of group {group.name!r}"
                )
            for uid in adding:
                if uid not in present:
                    session.add(UserGroupMembership(group_id=group.id, user_id=uid))
            if removing:
                session.execute(
                    delete(UserGroupMembership).where(
                        UserGroupMembership.group_id == group.id,
                        UserGroupMembership.user_id.in_(removing),
                    )
                )
            session.flush()
            answer = self._details(session, group)
        self._authz.invalidate()
        return answer

    def delete(self, group_id: int) -> None:
        """Delete a group, its memberships and the roles assigned to it."""
        with self._db.write() as session:
            group = self._group(session, group_id)
            session.execute(
                delete(UserGroupMembership).where(UserGroupMembership.group_id == group.id)
            )
            session.execute(delete(RoleAssignment).where(RoleAssignment.group_id == group.id))
            session.delete(group)
        self._authz.invalidate()

    # --- helpers -------------------------------------------------------------------------------

    @staticmethod
    def _group(session: Session, group_id: int) -> UserGroup:
        group = session.get(UserGroup, group_id)
        if group is None:
            raise APIError(404, f"group {group_id} not found")
        return group

    @staticmethod
    def _refuse_taken(session: Session, name: str) -> None:
        if session.scalar(select(UserGroup.id).where(UserGroup.name == name)) is not None:
            raise APIError(409, f"name: a group named {name!r} already exists")

    @staticmethod
    def _require_users(session: Session, ids: Iterable[int], field: str) -> None:
        wanted = set(ids)
        if not wanted:
            return
        found = set(session.scalars(select(User.id).where(User.id.in_(wanted))))
        if wanted - found:
            raise APIError(404, f"{field}: users {sorted(wanted - found)} not found")

    @staticmethod
    def _details(session: Session, group: UserGroup) -> dict[str, Any]:
        from determined.master._wire import ts

        members = session.scalars(
            select(User)
            .join(UserGroupMembership, UserGroupMembership.user_id == User.id)
            .where(UserGroupMembership.group_id == group.id)
            .order_by(User.id)
        ).all()
        users = [
            {
                "id": u.id,
                "username": u.username,
                "displayName": u.display_name or "",
                "admin": u.admin,
                "active": u.active,
                "remote": u.remote,
                "modifiedAt": ts(u.modified_at),
            }
            for u in members
        ]
        return {"group": {"groupId": group.id, "name": group.name, "users": users}}
