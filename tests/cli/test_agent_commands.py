"""``det agent enable|disable [--drain] [--all]`` and ``det slot enable|disable`` against a real
master with one slot: what the master records, what the CLI prints, and the 403 of a non-admin."""

from __future__ import annotations

import json
from typing import Any

import pytest
from cli.harness import Det


@pytest.fixture(scope="module")
def det_master(make_module_master: Any) -> Any:
    return make_module_master(slots=1)


ADMIN = ("-u", "admin")


def _agent(det: Det) -> dict[str, Any]:
    (agent,) = json.loads(det.ok("agent", "list", "--json"))
    return agent  # type: ignore[no-any-return]


def _slot(det: Det) -> dict[str, Any]:
    (slot,) = json.loads(det.ok("slot", "list", "--json"))
    return slot  # type: ignore[no-any-return]


def test_agent_disable_drain_and_enable(det: Det) -> None:
    agent_id = _agent(det)["id"]
    code, out, err = det.run(*ADMIN, "agent", "disable", "--drain", agent_id)
    assert code == 0, err
    assert f"Disabled agent {agent_id}." in err
    assert "No tasks in progress on draining nodes." in out
    agent = _agent(det)
    assert (agent["enabled"], agent["draining"]) == (False, True)
    assert (_slot(det)["enabled"], _slot(det)["draining"]) == (False, True)

    code, out, err = det.run(*ADMIN, "agent", "enable", "--all")
    assert code == 0 and f"Enabled agent {agent_id}." in err
    assert (_agent(det)["enabled"], _agent(det)["draining"]) == (True, False)

    assert json.loads(det.ok(*ADMIN, "agent", "disable", "--drain", "--json", agent_id)) == {}
    det.ok(*ADMIN, "agent", "disable", agent_id)  # drain off: no longer draining
    assert (_agent(det)["enabled"], _agent(det)["draining"]) == (False, False)
    det.ok(*ADMIN, "agent", "enable", agent_id)
    assert _agent(det)["enabled"] is True


def test_slot_disable_and_enable(det: Det) -> None:
    slot = _slot(det)
    out = det.ok(*ADMIN, "slot", "disable", slot["agent_id"], slot["slot_id"])
    assert out.strip() == f"Disabled slot {slot['slot_id']} of agent {slot['agent_id']}"
    assert _slot(det)["enabled"] is False and _agent(det)["enabled"] is True
    det.ok(*ADMIN, "slot", "enable", slot["agent_id"], slot["slot_id"])
    assert _slot(det)["enabled"] is True


def test_switches_need_an_admin_and_an_agent_that_exists(det: Det) -> None:
    slot = _slot(det)
    for argv in (
        ("agent", "disable", slot["agent_id"]),
        ("agent", "enable", slot["agent_id"]),
        ("slot", "disable", slot["agent_id"], slot["slot_id"]),
        ("slot", "enable", slot["agent_id"], slot["slot_id"]),
    ):
        code, _, err = det.run("-u", "determined", *argv)
        assert code != 0 and "UPDATE_AGENTS" in err, (argv, err)
    code, _, err = det.run(*ADMIN, "agent", "disable", "no-such-agent")
    assert code != 0 and "no-such-agent" in err
    code, _, err = det.run(*ADMIN, "slot", "disable", slot["agent_id"], "3")
    assert code != 0 and "slot '3'" in err
    code, _, err = det.run(*ADMIN, "agent", "enable")
    assert code != 0 and "--all" in err
    assert _agent(det)["enabled"] is True and _slot(det)["enabled"] is True
