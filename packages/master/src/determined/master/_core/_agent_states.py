"""The admins' switches on agents and slots: enable, disable, drain (upstream's ``EnableAgent``,
``DisableAgent``, ``EnableSlot``, ``DisableSlot``).

A disabled agent or slot takes no new work; the resource manager keeps what would start there
queued (``ResourceManager.set_disabled``). Disabling *without* drain also ends the work running
there at once, as upstream's force-kill does: a trial's allocation is killed and the trial is
scheduled again without counting a restart (it resumes from its latest checkpoint once slots are
enabled again); a command, notebook, TensorBoard or shell is stopped. With drain the running work
finishes on its own. Disabling an agent disables each of its slots (with the same drain flag) and
enabling it enables them all, as upstream; a slot can also be switched on its own.

The switches are stored (``agent_states``, ``slot_states``) and applied again by :meth:`restore`
when the master starts, before it resumes any work.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from typing import Any

from sqlalchemy import select

from determined.master._core._allocations import Allocations
from determined.master._core._cluster_view import Agent, ClusterView, Slot
from determined.master._core._task_logs import master_log
from determined.master._core._transactions import Transactions
from determined.master._wire import APIError
from determined.master.db import AgentState, Database, SlotState, utcnow

logger = logging.getLogger("determined.master")


@dataclasses.dataclass(frozen=True)
class Switch:
    """Whether an agent or slot takes new work, and whether it was drained when it stopped."""

    enabled: bool = True
    draining: bool = False


ON = Switch()


class AgentStates:
    """Enabled, disabled and draining agents and slots of one master.

    Args:
        db: where the switches are stored.
        rm: the resource manager told which slots take no new work.
        view: the agents and slots there are now, and what runs on them.
        transactions, allocations: to kill the trials running on what is disabled.
        tasks: to stop the commands, notebooks, ... running there.
    """

    def __init__(
        self,
        db: Database,
        rm: Any,
        view: ClusterView,
        transactions: Transactions,
        allocations: Allocations,
        tasks: Any,
    ) -> None:
        self._db = db
        self._rm = rm
        self._view = view
        self._transactions = transactions
        self._allocations = allocations
        self._tasks = tasks
        self._lock = threading.Lock()
        self._agents: dict[str, Switch] = {}
        self._slots: dict[tuple[str, int], Switch] = {}

    # ------------------------------------------------------------------------------------------
    # reads

    def agents(self) -> list[Agent]:
        """The cluster's agents with each agent's and slot's switch."""
        with self._lock:
            return [self._annotate(agent) for agent in self._view.agents()]

    def agent(self, agent_id: str) -> Agent:
        """One agent with its switches (404 naming it when there is no such agent)."""
        for agent in self.agents():
            if agent.agent_id == agent_id:
                return agent
        raise APIError(404, f"agent {agent_id!r} not found")

    def slot(self, agent_id: str, slot_id: str) -> Slot:
        """One slot of an agent (404 naming the agent or the slot when there is none)."""
        agent = self.agent(agent_id)
        for slot in agent.slots:
            if str(slot.slot_id) == str(slot_id).strip():
                return slot
        raise APIError(404, f"slot {slot_id!r} of agent {agent_id!r} not found")

    def _annotate(self, agent: Agent) -> Agent:
        switch = self._agents.get(agent.agent_id, ON)
        slots = []
        for slot in agent.slots:
            own = self._slots.get((agent.agent_id, slot.slot_id), ON)
            # A slot of a disabled agent is disabled whatever its own switch (as upstream).
            shown = own if not own.enabled or switch.enabled else switch
            slots.append(dataclasses.replace(slot, enabled=shown.enabled, draining=shown.draining))
        return dataclasses.replace(
            agent, slots=slots, enabled=switch.enabled, draining=switch.draining
        )

    # ------------------------------------------------------------------------------------------
    # changes

    def set_agent(self, agent_id: str, enabled: bool, drain: bool = False) -> Agent:
        """Enable an agent, or disable it (``drain``: let its running work finish); each of its
        slots follows. Without drain the work running on it is killed. 404 for an unknown agent."""
        agent = self.agent(agent_id)
        switch = Switch(enabled, bool(drain) and not enabled)
        with self._lock:
            slots = [(slot.slot_id, switch) for slot in agent.slots]
            self._switch(agent_id, agent.resource_pool, switch, slots)
        verb = "enabled" if enabled else ("drained" if switch.draining else "disabled")
        logger.info("master: agent %s %s", agent_id, verb)
        if not enabled and not drain:
            self._evict(agent.resource_pool, None, f"agent {agent_id} was disabled")
        return self.agent(agent_id)

    def set_slot(self, agent_id: str, slot_id: str, enabled: bool, drain: bool = False) -> Slot:
        """Enable or disable one slot of an agent (``drain`` as for agents). 404 naming the agent
        or the slot when there is none."""
        slot = self.slot(agent_id, slot_id)
        pool = self.agent(agent_id).resource_pool
        switch = Switch(enabled, bool(drain) and not enabled)
        with self._lock:
            self._switch(agent_id, pool, None, [(slot.slot_id, switch)])
        verb = "enabled" if enabled else ("drained" if switch.draining else "disabled")
        logger.info("master: slot %s of agent %s %s", slot.slot_id, agent_id, verb)
        if not enabled and not drain:
            self._evict(pool, slot.slot_id, f"slot {slot.slot_id} of agent {agent_id} was disabled")
        return self.slot(agent_id, str(slot.slot_id))

    def restore(self) -> None:
        """Load the stored switches and apply them to the resource manager (master start-up,
        before any work is resumed or scheduled)."""
        with self._db.read() as session:
            agents = session.scalars(select(AgentState)).all()
            slots = session.scalars(select(SlotState)).all()
        with self._lock:
            for row in agents:
                self._agents[row.agent_id] = Switch(row.enabled, row.draining)
            for slot_row in slots:
                key = (slot_row.agent_id, slot_row.slot_id)
                self._slots[key] = Switch(slot_row.enabled, slot_row.draining)
            for agent_id in {row.agent_id for row in agents} | {k[0] for k in self._slots}:
                pool = self._view.pool_of_agent(agent_id)
                if pool is None:
                    logger.warning(
                        "master: stored state of agent %s ignored: no such agent now", agent_id
                    )
                    continue
                try:
                    self._apply(agent_id, pool)
                except APIError as e:
                    logger.warning("master: stored state of agent %s ignored: %s", agent_id, e)

    # ------------------------------------------------------------------------------------------
    # inside

    def _switch(
        self,
        agent_id: str,
        pool: str,
        agent_switch: Switch | None,
        slot_switches: list[tuple[int, Switch]],
    ) -> None:
        """Set the switches, tell the resource manager, store them (held lock); nothing changes
        when the resource manager refuses."""
        old_agents, old_slots = dict(self._agents), dict(self._slots)
        if agent_switch is not None:
            self._agents[agent_id] = agent_switch
        for slot_id, switch in slot_switches:
            self._slots[(agent_id, slot_id)] = switch
        try:
            self._apply(agent_id, pool)
        except APIError:
            self._agents, self._slots = old_agents, old_slots
            raise
        self._store(agent_id, agent_switch, slot_switches)

    def _store(self, agent_id: str, switch: Switch | None, slots: list[tuple[int, Switch]]) -> None:
        """Persist the switches (held lock); an enabled one has no row."""
        with self._db.write() as session:
            if switch is not None:
                row = session.get(AgentState, agent_id)
                if switch == ON:
                    if row is not None:
                        session.delete(row)
                elif row is None:
                    session.add(
                        AgentState(
                            agent_id=agent_id,
                            enabled=switch.enabled,
                            draining=switch.draining,
                            updated_at=utcnow(),
                        )
                    )
                else:
                    row.enabled, row.draining, row.updated_at = (
                        switch.enabled,
                        switch.draining,
                        utcnow(),
                    )
            for slot_id, slot_switch in slots:
                slot_row = session.get(SlotState, (agent_id, slot_id))
                if slot_switch == ON:
                    if slot_row is not None:
                        session.delete(slot_row)
                elif slot_row is None:
                    session.add(
                        SlotState(
                            agent_id=agent_id,
                            slot_id=slot_id,
                            enabled=slot_switch.enabled,
                            draining=slot_switch.draining,
                            updated_at=utcnow(),
                        )
                    )
                else:
                    slot_row.enabled = slot_switch.enabled
                    slot_row.draining = slot_switch.draining
                    slot_row.updated_at = utcnow()

    def _apply(self, agent_id: str, pool: str) -> None:
        """Tell the resource manager which of the agent's slots take no new work (held lock)."""
        disabled = sorted(
            slot_id
            for (owner, slot_id), switch in self._slots.items()
            if owner == agent_id and not switch.enabled
        )
        node = not self._agents.get(agent_id, ON).enabled
        try:
            self._rm.set_disabled(pool, disabled, node=node)
        except ValueError as e:
            raise APIError(400, f"agentId: {e}") from None

    def _evict(self, pool: str, slot_id: int | None, reason: str) -> None:
        """End the work running on ``pool``'s agent (``slot_id``: on that slot only)."""
        state = self._rm.queue_state().get(pool) or {}
        allocation_ids = [
            str(running["allocation_id"])
            for running in state.get("running", [])
            if slot_id is None or slot_id in (running.get("slot_ids") or [])
        ]
        tasks = {live.allocation_id: live.task_id for live in self._tasks.runs.live()}
        trials = []
        for allocation_id in allocation_ids:
            if allocation_id in tasks:
                self._tasks.stop(tasks[allocation_id], reason)
            else:
                trials.append(allocation_id)
        if not trials:
            return
        with self._transactions.txn() as session:
            for allocation_id in trials:
                alloc = self._allocations.get(allocation_id)
                if alloc is None or alloc.exited or alloc.cancelled:
                    continue
                master_log(
                    session,
                    alloc.task_id,
                    f"Killing trial {alloc.trial_id}: {reason}; it runs again, from its latest"
                    " checkpoint, once slots are enabled (not counted as a restart)",
                    allocation_id=allocation_id,
                )
                self._allocations.evict(alloc)
