"""Web UI fixtures: a real master with real experiments (tiny Core API trials), headless Chromium.

One browser per xdist worker (pytest-playwright's session-scoped ``browser``), pointed at Debian's
/usr/bin/chromium; each test gets a fresh browser context. The master and its experiments are
module-scoped: the browser tests share them, and read-only tests do not wait on trials twice.

Screenshots of the main pages go to ``$DET_WEBUI_SCREENSHOTS`` when set (docs/webui/ holds the
ones linked from the docs), else to the test's temporary directory.
"""

from __future__ import annotations

import os
import pathlib
from typing import Any

import pytest
from webui._site import CHROMIUM, SECRET, Site, exp_config, login_token


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict[str, Any]) -> dict[str, Any]:
    """Launch Debian's Chromium; never a browser downloaded by ``playwright install``."""
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip(f"{CHROMIUM} is missing: `make install` installs Debian's chromium")
    return {**browser_type_launch_args, "executable_path": CHROMIUM}


@pytest.fixture(scope="session")
def browser_context_args(browser_context_args: dict[str, Any]) -> dict[str, Any]:
    return {**browser_context_args, "viewport": {"width": 1280, "height": 900}}


@pytest.fixture(scope="module")
def site(make_module_master: Any) -> Site:
    """A master running three experiments: ``alpha`` (2 trials, grid over lr, finishes),
    ``gamma`` (1 trial, finishes) and ``beta`` (1 trial that keeps running and logging)."""
    site = Site(make_module_master())
    site.create(
        "alpha",
        exp_config(
            "alpha-search",
            hyperparameters={
                "lr": {"type": "categorical", "vals": [0.05, 0.2]},
                "steps": 30,
                "hold": False,
            },
            searcher={
                "name": "grid",
                "metric": "validation_loss",
                "smaller_is_better": True,
                "max_length": 30,
            },
            labels=["vision", "smoke"],
            data={"secrets": {"api_key": SECRET}},
            environment={"environment_variables": [f"MY_TOKEN={SECRET}", "PLAIN=visible"]},
        ),
    )
    site.create("gamma", exp_config("gamma-single", labels=["nlp"]))
    site.create("beta", exp_config("beta-live", hyperparameters={"lr": 0.1, "hold": True}))
    for key in ("alpha", "gamma"):
        site.api.wait_experiment(site.ids[key], timeout=90)
    return site


@pytest.fixture
def screenshots(tmp_path: pathlib.Path) -> pathlib.Path:
    """Where this test's screenshots go."""
    target = os.environ.get("DET_WEBUI_SCREENSHOTS")
    path = pathlib.Path(target) if target else tmp_path / "screenshots"
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture
def signed_in(page: Any, site: Site) -> Any:
    """A page whose browser context holds a session cookie of ``admin`` (signed in via the form
    once per test would be slower; the login test drives the form itself)."""
    token = login_token(site.url)
    page.context.add_cookies([{"name": "auth", "value": token, "url": site.url}])
    page.set_default_timeout(10_000)
    return page
