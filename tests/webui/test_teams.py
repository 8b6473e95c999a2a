"""Teams in the web UI (headless Chromium, a real master): workspace → project → experiment
navigation, and RBAC as a user sees it: a Viewer gets no action buttons and a forced action the
API's 403 message; a user outside a workspace sees none of it and gets 404 on its addresses.

One module-scoped master: workspace ``vision`` (project ``detector`` with notes, a finished
experiment and a paused one), workspace ``secret`` (an experiment nobody but admins and its
members see) and an archived workspace. ``vera`` is a Viewer on ``vision``; ``otto`` has only the
default membership (the ``Uncategorized`` workspace).
"""

from __future__ import annotations

import dataclasses
import pathlib
import re
from typing import Any

import pytest
import yaml
from e2e.harness import MasterAPI
from playwright.sync_api import Page, expect
from webui._site import TRIALS, exp_config, login_token

from determined.client import read_context_dir

pytestmark = pytest.mark.e2e

VIEWER_ROLE_ID = 4
SEP = " \u203a "
"""The breadcrumbs' separator."""


@dataclasses.dataclass
class Teams:
    url: str
    admin: MasterAPI
    ids: dict[str, int]


def _create_experiment(api: MasterAPI, config: dict[str, Any], project: int, activate: bool) -> int:
    body = {
        "config": yaml.safe_dump(config),
        "modelDefinition": read_context_dir(TRIALS),
        "activate": activate,
        "projectId": project,
    }
    return int(api.post("/api/v1/experiments", body)["experiment"]["id"])


def _user(api: MasterAPI, username: str) -> int:
    body = {"user": {"username": username, "active": True}, "password": ""}
    return int(api.post("/api/v1/users", body)["user"]["id"])


@pytest.fixture(scope="module")
def teams(make_module_master: Any) -> Teams:
    master = make_module_master()
    admin = MasterAPI(master.url, "admin")
    ids: dict[str, int] = {}
    ids["vision"] = admin.post("/api/v1/workspaces", {"name": "vision"})["workspace"]["id"]
    ids["secret"] = admin.post("/api/v1/workspaces", {"name": "secret"})["workspace"]["id"]
    ids["old"] = admin.post("/api/v1/workspaces", {"name": "old-team"})["workspace"]["id"]
    admin.post(f"/api/v1/workspaces/{ids['old']}/archive")
    ids["detector"] = admin.post(
        f"/api/v1/workspaces/{ids['vision']}/projects",
        {"name": "detector", "workspaceId": ids["vision"], "description": "boxes"},
    )["project"]["id"]
    admin.session.request(
        "PUT",
        f"/api/v1/projects/{ids['detector']}/notes",
        body={
            "projectId": ids["detector"],
            "notes": [{"name": "Plan", "contents": "try a smaller learning rate"}],
        },
    )
    ids["hidden"] = admin.post(
        f"/api/v1/workspaces/{ids['secret']}/projects",
        {"name": "hidden", "workspaceId": ids["secret"]},
    )["project"]["id"]
    ids["done"] = _create_experiment(
        admin,
        exp_config("det-run", hyperparameters={"lr": 0.1, "steps": 3, "hold": False}),
        ids["detector"],
        activate=True,
    )
    ids["paused"] = _create_experiment(
        admin, exp_config("det-paused"), ids["detector"], activate=False
    )
    ids["classified"] = _create_experiment(
        admin, exp_config("classified-run"), ids["hidden"], activate=False
    )
    vera = _user(admin, "vera")
    _user(admin, "otto")
    admin.post(
        "/api/v1/roles/add-assignments",
        {
            "userRoleAssignments": [
                {
                    "userId": vera,
                    "roleAssignment": {
                        "role": {"roleId": VIEWER_ROLE_ID},
                        "scopeWorkspaceId": ids["vision"],
                    },
                }
            ]
        },
    )
    admin.wait_experiment(ids["done"], timeout=90)
    ids["trial"] = int(admin.trials(ids["done"])[0]["id"])
    return Teams(master.url, admin, ids)


def _as(page: Page, teams: Teams, username: str) -> Page:
    token = login_token(teams.url, username)
    page.context.add_cookies([{"name": "auth", "value": token, "url": teams.url}])
    page.set_default_timeout(10_000)
    return page


def test_admin_navigates_workspace_project_experiment(
    page: Page, teams: Teams, screenshots: pathlib.Path
) -> None:
    page = _as(page, teams, "admin")
    ids = teams.ids
    page.goto(teams.url + "/workspaces")
    rows = page.locator("#workspaces tbody tr")
    expect(rows.locator(".ws-name")).to_have_text(["Uncategorized", "vision", "secret"])
    expect(page.locator(f"#workspaces tr[data-id='{ids['vision']}'] .projects")).to_have_text("1")
    # Archived workspaces only when asked.
    page.screenshot(path=screenshots / "workspaces.png")
    page.check("#filter-archived")
    expect(page).to_have_url(re.compile(r"/workspaces\?archived=1$"))
    expect(rows.locator(".ws-name")).to_have_text(["Uncategorized", "vision", "secret", "old-team"])

    page.click(f"#workspaces tr[data-id='{ids['vision']}'] .ws-name")
    expect(page).to_have_url(teams.url + f"/workspaces/{ids['vision']}")
    project_row = page.locator(f"#projects tr[data-id='{ids['detector']}']")
    expect(project_row.locator(".experiments")).to_have_text("2")
    project_row.locator(".project-name").click()

    expect(page).to_have_url(teams.url + f"/projects/{ids['detector']}")
    expect(page.locator("#project-notes summary")).to_have_text("Plan")
    expect(page.locator("#project-notes .note-contents")).to_have_text(
        "try a smaller learning rate"
    )
    listed = page.locator("#experiments tbody tr")
    expect(listed).to_have_count(2)
    page.screenshot(path=screenshots / "project.png")
    expect(listed.locator(".exp-name")).to_have_text(["det-paused", "det-run"])
    # The list's own links (sorting) stay on the project's page.
    page.click("#experiments thead a:text('Name')")
    expect(page).to_have_url(re.compile(rf"/projects/{ids['detector']}\?sort=name"))
    expect(listed.locator(".exp-name")).to_have_text(["det-paused", "det-run"])

    page.click(f"#experiments tr[data-id='{ids['done']}'] .exp-name")
    expect(page).to_have_url(teams.url + f"/experiments/{ids['done']}")
    expect(page.locator("#crumbs")).to_have_text(
        SEP.join(["Workspaces", "vision", "detector", f"det-run #{ids['done']}"])
    )
    page.click("#crumb-project")
    expect(page).to_have_url(teams.url + f"/projects/{ids['detector']}")

    page.goto(teams.url + f"/experiments/{ids['paused']}")
    expect(page.locator("#action-kill")).to_be_enabled()
    page.goto(teams.url + f"/trials/{ids['trial']}")
    expect(page.locator("#crumbs")).to_have_text(
        SEP.join(
            ["Workspaces", "vision", "detector", f"det-run #{ids['done']}", f"trial {ids['trial']}"]
        )
    )
    page.click("#crumb-workspace")
    expect(page).to_have_url(teams.url + f"/workspaces/{ids['vision']}")

    # The experiment list still shows everything an admin can see, with where each one lives.
    page.goto(teams.url + "/experiments")
    secret_row = page.locator(f"#experiments tr[data-id='{ids['classified']}']")
    expect(secret_row.locator(".where")).to_have_text("secret / hidden")

    # A project created from the workspace page (through the REST API) opens at once.
    page.goto(teams.url + f"/workspaces/{ids['secret']}")
    page.fill("#new-project-name", "from-the-ui")
    page.click("#new-project-submit")
    expect(page).to_have_url(re.compile(r"/projects/\d+$"))
    expect(page.locator("h1")).to_contain_text("from-the-ui")
    expect(page.locator("#experiment-count")).to_have_text("0 experiments")
    # So does a workspace created from the workspaces page; a taken name shows the API's error.
    page.goto(teams.url + "/workspaces")
    page.fill("#new-workspace-name", "vision")
    page.click("#new-workspace-submit")
    expect(page.locator("#new-workspace-error")).to_contain_text("vision")
    page.fill("#new-workspace-name", "made-in-the-ui")
    page.click("#new-workspace-submit")
    expect(page).to_have_url(re.compile(r"/workspaces/\d+$"))
    expect(page.locator("h1")).to_contain_text("made-in-the-ui")


def test_viewer_sees_but_cannot_act(page: Page, teams: Teams) -> None:
    page = _as(page, teams, "vera")
    ids = teams.ids
    page.goto(teams.url + "/experiments")
    names = page.locator("#experiments tbody .exp-name")
    expect(names).to_have_text(["det-paused", "det-run"])

    page.goto(teams.url + f"/experiments/{ids['paused']}")
    expect(page.locator("#exp-state")).to_have_attribute("data-state", "PAUSED")
    for button in ("kill", "pause", "activate", "cancel", "archive"):
        expect(page.locator(f"#action-{button}")).to_have_count(0)
    expect(page.locator("#open-tensorboard")).to_have_count(0)
    expect(page.locator("#tensorboard-selected")).to_have_count(0)
    page.goto(teams.url + f"/workspaces/{ids['vision']}")
    expect(page.locator(f"#projects tr[data-id='{ids['detector']}']")).to_be_visible()
    expect(page.locator("#new-project")).to_have_count(0)
    page.goto(teams.url + "/workspaces")
    expect(page.locator("#workspaces tbody .ws-name")).to_have_text(["Uncategorized", "vision"])
    expect(page.locator("#new-workspace")).to_have_count(0)
    page.goto(teams.url + f"/experiments/{ids['paused']}")
    allowed = page.evaluate(
        "async (ws) => (await (await fetch(`/ui/api/workspaces/${ws}/permissions`)).json())",
        ids["vision"],
    )
    assert "PERMISSION_TYPE_VIEW_EXPERIMENT_METADATA" in allowed["permissions"]
    assert "PERMISSION_TYPE_UPDATE_EXPERIMENT" not in allowed["permissions"]
    assert allowed["actions"]["update"] is False

    # Forced: a kill sent from the page is refused with the API's message, shown on the page.
    forced = page.evaluate(
        """async (id) => {
          const r = await fetch(`/api/v1/experiments/${id}/kill`, { method: "POST" });
          return { status: r.status, body: await r.text() };
        }""",
        ids["paused"],
    )
    assert forced["status"] == 403, forced
    assert "PERMISSION_TYPE_UPDATE_EXPERIMENT" in forced["body"]
    page.evaluate(
        """() => document.querySelector(".actions").insertAdjacentHTML(
             "beforeend", '<button data-action="kill" id="forced-kill">Kill</button>')"""
    )
    page.click("#forced-kill")
    expect(page.locator("#action-error")).to_be_visible()
    expect(page.locator("#action-error")).to_contain_text("403")
    expect(page.locator("#action-error")).to_contain_text("PERMISSION_TYPE_UPDATE_EXPERIMENT")
    assert teams.admin.experiment(ids["paused"])["state"] == "STATE_PAUSED"


def test_outsider_sees_nothing_of_the_workspace(page: Page, teams: Teams) -> None:
    page = _as(page, teams, "otto")
    ids = teams.ids
    page.goto(teams.url + "/workspaces")
    expect(page.locator("#workspaces tbody .ws-name")).to_have_text(["Uncategorized"])
    page.goto(teams.url + "/experiments")
    expect(page.locator("#experiment-count")).to_have_text("0 experiments")

    for path in (
        f"/workspaces/{ids['vision']}",
        f"/projects/{ids['detector']}",
        f"/experiments/{ids['done']}",
        f"/trials/{ids['trial']}",
        f"/experiments?project={ids['detector']}",
    ):
        response = page.goto(teams.url + path)
        assert response is not None
        if "?" in path:  # a filter of the list: an empty list, not an error
            expect(page.locator("#experiment-count")).to_have_text("0 experiments")
            continue
        assert response.status == 404, path
        expect(page.locator("#error-message")).to_contain_text("not found")

    statuses = page.evaluate(
        """async (ids) => {
          const paths = [`/ui/api/experiments/${ids.done}/curves`, `/ui/api/trials/${ids.trial}/logs`,
                         `/ui/api/workspaces/${ids.vision}/permissions`];
          const out = [];
          for (const p of paths) out.push((await fetch(p)).status);
          const found = await (await fetch(`/ui/api/trials/search?q=${ids.done}`)).json();
          out.push(found.trials.length);
          return out;
        }""",
        {"done": ids["done"], "trial": ids["trial"], "vision": ids["vision"]},
    )
    assert statuses == [404, 404, 404, 0]
