"""The admins' cluster-wide message as a banner under the web UI's top bar (upstream's web UI shows
it the same way), on the sign-in page too; gone once cleared."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Page, expect

from determined.client import Client

pytestmark = pytest.mark.e2e


def test_cluster_message_banner(page: Page, make_master: Any) -> None:
    master = make_master()
    admin = Client(master.session("admin"))
    page.set_default_timeout(10_000)

    page.goto(f"{master.url}/login")
    expect(page.locator("h1")).to_have_text("Sign in to det")
    expect(page.locator("#cluster-message")).to_have_count(0)

    admin.master.set_cluster_message("<b>maintenance</b> at 17:00", duration="1h")
    page.goto(f"{master.url}/login")
    banner = page.locator("#cluster-message")
    expect(banner).to_have_text("<b>maintenance</b> at 17:00")  # text, never markup
    expect(banner).to_have_attribute("role", "status")

    admin.master.clear_cluster_message()
    page.goto(f"{master.url}/login")
    expect(page.locator("h1")).to_have_text("Sign in to det")
    page.wait_for_load_state("networkidle")
    expect(page.locator("#cluster-message")).to_have_count(0)
