"""The master itself (``/api/v1/master/...``) and the cluster it runs: agents and their slots,
the job queue, resource pools and historical resource usage."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from determined.client import _routes as r
from determined.client._session import Session


class MasterInfoClient:
    """The master's identity, configuration and own logs."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def info(self) -> dict[str, Any]:
        """Version, cluster id and name (needs no login)."""
        return r.call(self.session, r.MASTER_INFO)

    def config(self) -> dict[str, Any]:
        """The master's configuration (``config``; admins only)."""
        return r.call(self.session, r.MASTER_CONFIG)

    def patch_config(self, *, log_level: str | None = None, log_color: bool | None = None) -> None:
        """Change the master's log level (``LOG_LEVEL_DEBUG``, ...) or colour until it restarts
        (admins only)."""
        log: dict[str, Any] = {}
        paths: list[str] = []
        if log_level is not None:
            log["level"] = log_level
            paths.append("log.level")
        if log_color is not None:
            log["color"] = log_color
            paths.append("log.color")
        body = {"config": {"log": log}, "fieldMask": {"paths": paths}}
        r.call(self.session, r.MASTER_CONFIG_PATCH, body=body)

    def logs(self, params: Mapping[str, Any] | None = None) -> Iterator[dict[str, Any]]:
        """The master's own log records as it streams them (``follow`` keeps it open)."""
        return r.stream(self.session, r.MASTER_LOGS, params=params)

    def cluster_message(self) -> dict[str, Any]:
        """The current cluster-wide message (``clusterMessage``, absent when none; admins only)."""
        return r.call(self.session, r.CLUSTER_MESSAGE_GET)

    def set_cluster_message(
        self,
        message: str,
        *,
        start_time: str | None = None,
        end_time: str | None = None,
        duration: str | None = None,
    ) -> dict[str, Any]:
        """Replace the cluster-wide message; times are RFC 3339, ``duration`` like ``24h``/``5d``."""
        body = {"message": message, "startTime": start_time, "endTime": end_time}
        body["duration"] = duration
        return r.call(
            self.session,
            r.CLUSTER_MESSAGE_SET,
            body={k: v for k, v in body.items() if v is not None},
        )

    def clear_cluster_message(self) -> dict[str, Any]:
        """End the current cluster-wide message."""
        return r.call(self.session, r.CLUSTER_MESSAGE_CLEAR)


class ClusterClient:
    """What the cluster holds and did: agents and slots, the job queue, resource pools, usage."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def agents(self) -> dict[str, Any]:
        """Every agent with its ``slots`` (and the ``container`` holding each busy one)."""
        return r.call(self.session, r.AGENTS)

    def agent(self, agent_id: str) -> dict[str, Any]:
        """One agent (``agent``): its slots, containers and switches."""
        return r.call(self.session, r.AGENT_GET, agent_id=agent_id)

    def enable_agent(self, agent_id: str) -> dict[str, Any]:
        """Let an agent and its slots take new work again (admins); the ``agent``."""
        return r.call(self.session, r.AGENT_ENABLE, agent_id=agent_id)

    def disable_agent(self, agent_id: str, *, drain: bool = False) -> dict[str, Any]:
        """No new work on an agent (admins); its running work is killed unless ``drain``."""
        return r.call(self.session, r.AGENT_DISABLE, body={"drain": drain}, agent_id=agent_id)

    def slot(self, agent_id: str, slot_id: str) -> dict[str, Any]:
        """One slot of an agent (``slot``)."""
        return r.call(self.session, r.SLOT_GET, agent_id=agent_id, slot_id=slot_id)

    def enable_slot(self, agent_id: str, slot_id: str) -> dict[str, Any]:
        """Let one slot take new work again (admins); the ``slot``."""
        return r.call(self.session, r.SLOT_ENABLE, agent_id=agent_id, slot_id=slot_id)

    def disable_slot(self, agent_id: str, slot_id: str, *, drain: bool = False) -> dict[str, Any]:
        """No new work on one slot (admins); what runs on it is killed unless ``drain``."""
        return r.call(
            self.session,
            r.SLOT_DISABLE,
            body={"drain": drain},
            agent_id=agent_id,
            slot_id=slot_id,
        )

    def tasks(self) -> dict[str, Any]:
        """The allocations holding slots (``allocationIdToSummary``)."""
        return r.call(self.session, r.TASKS)

    def resource_pools(self) -> dict[str, Any]:
        """The resource pools (``resourcePools``, ``pagination``)."""
        return r.call(self.session, r.RESOURCE_POOLS)

    def jobs(self, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """One page of the job queue (``jobs`` wrapped as ``{"full": job}``, ``pagination``);
        ``resourcePool``, ``offset``, ``limit``, ``orderBy``, ``states`` filter it."""
        return r.call(self.session, r.JOB_QUEUE_V2, params=params)

    def update_jobs(self, updates: list[Mapping[str, Any]]) -> dict[str, Any]:
        """Change jobs' ``priority`` or ``weight`` (each update names its ``jobId``)."""
        return r.call(
            self.session, r.JOB_QUEUE_UPDATE, body={"updates": [dict(u) for u in updates]}
        )

    def allocation_raw(self, timestamp_after: str, timestamp_before: str) -> dict[str, Any]:
        """Each allocation's use of slots in a time range (``resourceEntries``)."""
        params = {"timestamp_after": timestamp_after, "timestamp_before": timestamp_before}
        return r.call(self.session, r.ALLOCATION_RAW, params=params)

    def allocation_aggregated(
        self, start_date: str, end_date: str, *, monthly: bool = False
    ) -> dict[str, Any]:
        """Slot-seconds per day (``YYYY-MM-DD``) or month (``YYYY-MM``): ``resourceEntries``."""
        period = "MONTHLY" if monthly else "DAILY"
        params = {
            "start_date": start_date,
            "end_date": end_date,
            "period": f"RESOURCE_ALLOCATION_AGGREGATION_PERIOD_{period}",
        }
        return r.call(self.session, r.ALLOCATION_AGGREGATED, params=params)
