"""Config policies: what admins force onto, and forbid in, the workloads of a workspace or cluster.

Upstream 0.38's task config policies. For each workload type (``EXPERIMENT``, or ``NTSC`` for
notebooks, shells, commands and TensorBoards) there is at most one global policy and one per
workspace, each made of

- ``invariant_config``: config fields merged over every submitted experiment config (the submitted
  values lose; mappings and the joined lists of :mod:`._config_merge` are combined). Experiments
  only: upstream refuses an invariant config for tasks, and so does det.
- ``constraints``: ``resources.max_slots`` (no experiment may ask for more ``slots_per_trial`` or
  ``max_slots``, no task for more ``slots``) and ``priority_limit`` (the most urgent priority a
  workload may ask for; smaller numbers are more urgent). A submission beyond them is refused
  with a 400 naming the field.

The global policy wins over the workspace's, field by field, as upstream. Values arrive parsed
(the API edge reads the YAML/JSON text); this service validates them, stores them and applies
them.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from determined.master._core._config_merge import merge_template
from determined.master._wire import APIError
from determined.master.db import Database, Workspace, utcnow
from determined.master.db._policy_models import TaskConfigPolicy

EXPERIMENT = "EXPERIMENT"
NTSC = "NTSC"
WORKLOAD_TYPES = (EXPERIMENT, NTSC)
"""Upstream's workload types, as they appear in the routes' paths."""
NTSC_KINDS = ("COMMAND", "NOTEBOOK", "SHELL", "TENSORBOARD")
"""The kinds of task the ``NTSC`` policies cover."""

_POLICY_KEYS = ("invariant_config", "constraints")


def workload_type(value: str) -> str:
    """``EXPERIMENT`` or ``NTSC`` (any case); 400 naming ``workloadType`` otherwise."""
    wanted = str(value or "").upper()
    if wanted not in WORKLOAD_TYPES:
        if not wanted:
            raise APIError(400, "workloadType: required (EXPERIMENT or NTSC)")
        raise APIError(400, f"workloadType: must be EXPERIMENT or NTSC, got {value!r}")
    return wanted


def _int(value: Any, field: str, low: int, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise APIError(400, f"{field}: must be an integer, got {value!r}")
    if value < low or (high is not None and value > high):
        bound = f"in {low}..{high}" if high is not None else f">= {low}"
        raise APIError(400, f"{field}: must be {bound}, got {value}")
    return value


def check_constraints(value: Any) -> dict[str, Any]:
    """``constraints`` as upstream knows them (``priority_limit``, ``resources.max_slots``); 400
    naming the field for anything else."""
    if not isinstance(value, dict):
        raise APIError(400, "constraints: must be a mapping")
    for key in value:
        if key not in ("priority_limit", "resources"):
            raise APIError(400, f"constraints.{key}: unknown field")
    if value.get("priority_limit") is not None:
        _int(value["priority_limit"], "constraints.priority_limit", 1, 99)
    resources = value.get("resources")
    if resources is not None:
        if not isinstance(resources, dict):
            raise APIError(400, "constraints.resources: must be a mapping")
        for key in resources:
            if key != "max_slots":
                raise APIError(400, f"constraints.resources.{key}: unknown field")
        if resources.get("max_slots") is not None:
            _int(resources["max_slots"], "constraints.resources.max_slots", 0)
    return value


def check_invariant_config(value: Any, kind: str) -> dict[str, Any]:
    """An experiment's ``invariant_config``: a partial experiment config (every problem of the
    first one named, under ``invariant_config.``); refused for tasks, as upstream."""
    if kind == NTSC:
        raise APIError(
            400,
            "invariant_config: not supported for tasks (NTSC) yet; remove the"
            " invariant_config section and try again",
        )
    if not isinstance(value, dict):
        raise APIError(400, "invariant_config: must be a mapping (a partial experiment config)")
    from determined import config as expconf

    problems = expconf.sanity_check(value)
    if problems:
        raise APIError(400, "; ".join(f"invariant_config.{p}" for p in problems))
    return value


def _resources(config: dict[str, Any] | None) -> dict[str, Any]:
    resources = (config or {}).get("resources")
    return resources if isinstance(resources, dict) else {}


def _check_conflicts(invariant: dict[str, Any], constraints: dict[str, Any], where: str) -> None:
    """An invariant config must keep its own scope's and the global constraints (upstream)."""
    resources = _resources(invariant)
    limit = constraints.get("priority_limit")
    priority = resources.get("priority")
    if limit is not None and priority is not None and priority != limit:
        raise APIError(
            400,
            f"invariant_config.resources.priority: {priority} conflicts with {where}"
            f" constraints.priority_limit {limit} (set the priority in one of them)",
        )
    max_slots = _resources(constraints).get("max_slots")
    if max_slots is None:
        return
    if resources.get("max_slots") is not None and resources["max_slots"] != max_slots:
        raise APIError(
            400,
            f"invariant_config.resources.max_slots: {resources['max_slots']} conflicts with"
            f" {where} constraints.resources.max_slots {max_slots}",
        )
    per_trial = resources.get("slots_per_trial")
    if per_trial is not None and per_trial > max_slots:
        raise APIError(
            400,
            f"invariant_config.resources.slots_per_trial: {per_trial} exceeds {where}"
            f" constraints.resources.max_slots {max_slots}",
        )


@dataclasses.dataclass(frozen=True)
class Limits:
    """The constraints in force for one workspace and workload type, and where each came from."""

    max_slots: int | None = None
    max_slots_scope: str = ""
    priority_limit: int | None = None
    priority_scope: str = ""

    def check_slots(self, field: str, slots: int | None) -> None:
        """400 naming ``field`` when ``slots`` exceeds ``resources.max_slots``."""
        if self.max_slots is not None and slots is not None and slots > self.max_slots:
            raise APIError(
                400,
                f"{field}: {slots} exceeds the limit of {self.max_slots} set by the"
                f" {self.max_slots_scope} config policies (constraints.resources.max_slots)",
            )

    def check_priority(self, field: str, priority: int | None) -> None:
        """400 naming ``field`` when ``priority`` is more urgent (smaller) than the limit."""
        limit = self.priority_limit
        if limit is not None and priority is not None and priority < limit:
            raise APIError(
                400,
                f"{field}: {priority} is above the priority limit {limit} set by the"
                f" {self.priority_scope} config policies (constraints.priority_limit; smaller"
                " numbers are more urgent)",
            )


def _json(row: TaskConfigPolicy | None) -> dict[str, Any]:
    if row is None:
        return {}
    out: dict[str, Any] = {}
    if row.invariant_config is not None:
        out["invariant_config"] = copy.deepcopy(row.invariant_config)
    if row.constraints is not None:
        out["constraints"] = copy.deepcopy(row.constraints)
    return out


def _find(session: Session, workspace_id: int | None, kind: str) -> TaskConfigPolicy | None:
    stmt = select(TaskConfigPolicy).where(TaskConfigPolicy.workload_type == kind)
    if workspace_id is None:
        stmt = stmt.where(TaskConfigPolicy.workspace_id.is_(None))
    else:
        stmt = stmt.where(TaskConfigPolicy.workspace_id == workspace_id)
    return session.scalar(stmt)


class ConfigPolicies:
    """Set, read, delete and apply config policies (global: ``workspace_id`` None)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def check_workspace(self, workspace_id: int) -> None:
        """404 naming the workspace when there is none with this id."""
        with self._db.read() as session:
            if session.get(Workspace, workspace_id) is None:
                raise APIError(404, f"workspace {workspace_id} not found")

    def validate(
        self, workspace_id: int | None, kind: str, policies: Any
    ) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        """(invariant config, constraints) of a parsed policies document; 400 naming the field."""
        if policies is None or policies == {}:
            raise APIError(400, "configPolicies: required (invariant_config and/or constraints)")
        if not isinstance(policies, dict):
            raise APIError(400, "configPolicies: must be a mapping of invariant_config/constraints")
        for key in policies:
            if key not in _POLICY_KEYS:
                raise APIError(
                    400, f"configPolicies.{key}: unknown field (invariant_config, constraints)"
                )
        invariant = policies.get("invariant_config")
        constraints = policies.get("constraints")
        if invariant is not None:
            invariant = check_invariant_config(invariant, kind)
        if constraints is not None:
            constraints = check_constraints(constraints)
        if invariant is not None:
            _check_conflicts(invariant, constraints or {}, "its")
            if workspace_id is not None:
                glob = self.get(None, kind).get("constraints") or {}
                _check_conflicts(invariant, glob, "the global")
        return invariant, constraints

    def put(
        self, workspace_id: int | None, kind: str, policies: Any, user_id: int | None
    ) -> dict[str, Any]:
        """Replace the policies of one scope; the stored policies (as given)."""
        invariant, constraints = self.validate(workspace_id, kind, policies)
        with self._db.write() as session:
            if workspace_id is not None and session.get(Workspace, workspace_id) is None:
                raise APIError(404, f"workspace {workspace_id} not found")
            row = _find(session, workspace_id, kind)
            if row is None:
                row = TaskConfigPolicy(workspace_id=workspace_id, workload_type=kind)
                session.add(row)
            row.invariant_config = invariant
            row.constraints = constraints
            row.last_updated_by = user_id
            row.last_updated_time = utcnow()
            session.flush()
            return _json(row)

    def get(self, workspace_id: int | None, kind: str) -> dict[str, Any]:
        """The policies of one scope (``{}`` when none are set)."""
        with self._db.read() as session:
            return _json(_find(session, workspace_id, kind))

    def delete(self, workspace_id: int | None, kind: str) -> None:
        """Drop the policies of one scope (nothing to drop is fine, as upstream)."""
        with self._db.write() as session:
            row = _find(session, workspace_id, kind)
            if row is not None:
                session.delete(row)

    # --- applying them ---------------------------------------------------------------------------

    def _both(self, workspace_id: int | None, kind: str) -> list[tuple[str, dict[str, Any]]]:
        """(scope name, policies) of the workspace, then global (the later wins)."""
        with self._db.read() as session:
            scopes = [("workspace", _find(session, workspace_id, kind))] if workspace_id else []
            scopes.append(("global", _find(session, None, kind)))
            return [(name, _json(row)) for name, row in scopes if row is not None]

    def limits(self, workspace_id: int | None, kind: str) -> Limits:
        """The constraints in force: the workspace's, each field overridden by the global one."""
        values: dict[str, Any] = {}
        for scope, policies in self._both(workspace_id, kind):
            constraints = policies.get("constraints") or {}
            if constraints.get("priority_limit") is not None:
                values["priority_limit"] = constraints["priority_limit"]
                values["priority_scope"] = scope
            max_slots = _resources(constraints).get("max_slots")
            if max_slots is not None:
                values["max_slots"] = max_slots
                values["max_slots_scope"] = scope
        return Limits(**values)

    def experiment_config(self, workspace_id: int | None, config: dict[str, Any]) -> dict[str, Any]:
        """``config`` with the workspace's, then the global invariant config merged over it."""
        out = config
        for _scope, policies in self._both(workspace_id, EXPERIMENT):
            invariant = policies.get("invariant_config")
            if invariant:
                out = merge_template(invariant, out)
        return out

    def check_experiment(self, workspace_id: int | None, config: dict[str, Any]) -> None:
        """400 naming the field when a (validated) experiment config breaks a constraint."""
        limits = self.limits(workspace_id, EXPERIMENT)
        resources = _resources(config)
        limits.check_slots("resources.slots_per_trial", resources.get("slots_per_trial"))
        limits.check_slots("resources.max_slots", resources.get("max_slots"))
        limits.check_priority("resources.priority", resources.get("priority"))

    def check_task(self, workspace_id: int | None, slots: int | None, priority: int | None) -> None:
        """400 naming the field when a task asks for more slots or a more urgent priority than
        the NTSC constraints allow (``priority`` None: the task did not ask for one)."""
        limits = self.limits(workspace_id, NTSC)
        limits.check_slots("resources.slots", slots)
        limits.check_priority("resources.priority", priority)

    def check_update(
        self,
        workspace_id: int | None,
        kind: str,
        *,
        priority: int | None = None,
        max_slots: int | None = None,
    ) -> None:
        """400 when a running workload's new priority or ``max_slots`` breaks a constraint or
        differs from what an invariant config forces."""
        for _scope, policies in self._both(workspace_id, kind):
            forced = _resources(policies.get("invariant_config"))
            for field, value in (("priority", priority), ("max_slots", max_slots)):
                if value is not None and forced.get(field) not in (None, value):
                    raise APIError(
                        400,
                        f"resources.{field}: {forced[field]} is set by the {_scope} config"
                        f" policies' invariant config and cannot be changed to {value}",
                    )
        limits = self.limits(workspace_id, kind)
        limits.check_priority("resources.priority", priority)
        limits.check_slots("resources.max_slots", max_slots)
