"""The web UI in headless Chromium against a real master running real (tiny) experiments."""

from __future__ import annotations

import pathlib
import re
from typing import Any

import pytest
from playwright.sync_api import Page, expect
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from webui._site import SECRET, Site, login_token

pytestmark = pytest.mark.e2e

# For each series of a chart: how many canvas pixels are (close to) the series' colour.
COLOR_PIXELS = """(name) => {
  const chart = window.detCharts.find((c) => c.canvas.dataset.chart === name);
  const { width, height } = chart.canvas;
  const pixels = chart.canvas.getContext("2d").getImageData(0, 0, width, height).data;
  return chart.drawn.map((d) => {
    const hex = d.color.replace("#", "");
    const rgb = [0, 2, 4].map((i) => parseInt(hex.slice(i, i + 2), 16));
    let count = 0;
    for (let i = 0; i < pixels.length; i += 4) {
      if (pixels[i + 3] > 200 && Math.abs(pixels[i] - rgb[0]) + Math.abs(pixels[i + 1] - rgb[1])
          + Math.abs(pixels[i + 2] - rgb[2]) < 60) count++;
    }
    return { key: d.key, points: d.points, marks: d.marks, pixels: count };
  });
}"""

DRAWN = """(name) => {
  const chart = window.detCharts.find((c) => c.canvas.dataset.chart === name);
  return chart ? chart.drawn.map((d) => ({ key: d.key, points: d.points, marks: d.marks })) : null;
}"""


def drawn(page: Page, chart: str) -> list[dict[str, Any]]:
    return page.evaluate(DRAWN, chart) or []


def wait_drawn(page: Page, chart: str, keys: list[int], points: int | None = None) -> None:
    """Until the chart drew exactly ``keys`` (each with ``points`` points when given)."""
    page.wait_for_function(
        """([name, keys, points]) => {
          const chart = (window.detCharts || []).find((c) => c.canvas.dataset.chart === name);
          if (!chart) return false;
          const got = chart.drawn.map((d) => d.key).sort((a, b) => a - b);
          return JSON.stringify(got) === JSON.stringify(keys)
            && chart.drawn.every((d) => d.marks > 0 && (points === null || d.points === points));
        }""",
        arg=[chart, sorted(keys), points],
    )


def test_sign_in_wrong_password_and_sign_out(
    page: Page, site: Site, screenshots: pathlib.Path
) -> None:
    page.set_default_timeout(10_000)
    target = f"/experiments/{site.ids['alpha']}"
    page.goto(site.url + target)
    expect(page).to_have_url(re.compile(r"/login\?next=%2Fexperiments%2F"))
    page.fill("#username", "admin")
    page.fill("#password", "not-the-password")
    page.click("#login-submit")
    expect(page.locator("#login-error")).to_have_text("Wrong username or password.")
    page.screenshot(path=screenshots / "login.png")
    page.fill("#password", "")
    page.click("#login-submit")
    expect(page).to_have_url(site.url + target)
    expect(page.locator("#user-name")).to_have_text("admin")
    page.click("#sign-out")
    expect(page).to_have_url(re.compile(r"/login$"))
    page.goto(site.url + "/experiments")
    expect(page).to_have_url(re.compile(r"/login\?next=%2Fexperiments$"))


def test_experiment_list_filters_and_sorts(
    signed_in: Page, site: Site, screenshots: pathlib.Path
) -> None:
    page = signed_in
    page.goto(site.url + "/experiments")
    rows = page.locator("#experiments tbody tr")
    expect(rows).to_have_count(3)
    alpha = page.locator(f"#experiments tr[data-id='{site.ids['alpha']}']")
    expect(alpha).to_contain_text("alpha-search")
    expect(alpha).to_contain_text("vision")
    expect(alpha.locator(".state")).to_have_text("completed")
    expect(alpha.locator(".best")).not_to_have_text("")
    expect(page.locator("#user-name")).to_have_text("admin")
    page.screenshot(path=screenshots / "experiments.png", full_page=True)

    page.fill("#filter-name", "ALPHA")
    page.click("#filter-apply")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("alpha-search")

    page.goto(site.url + "/experiments?label=nlp")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("gamma-single")

    page.goto(site.url + "/experiments")
    page.select_option("#filter-state", "COMPLETED")  # submits on change
    expect(page).to_have_url(re.compile(r"state=COMPLETED"))
    expect(rows).to_have_count(2)

    page.goto(site.url + "/experiments")
    page.click("#experiments thead a:has-text('Name')")
    expect(page).to_have_url(re.compile(r"sort=name"))
    names = page.locator("#experiments tbody .exp-name").all_text_contents()
    assert names == sorted(names)


def test_experiment_page_draws_every_trial_and_masks_secrets(
    signed_in: Page, site: Site, screenshots: pathlib.Path
) -> None:
    page = signed_in
    exp = site.ids["alpha"]
    trial_ids = [t["id"] for t in site.trials("alpha")]
    assert len(trial_ids) == 2
    page.goto(f"{site.url}/experiments/{exp}")
    # The default view: the searcher metric, validation_loss, reported at steps 10, 20, 30.
    wait_drawn(page, "curves", trial_ids, points=3)
    expect(page.locator("#curve-metric")).to_have_value("validation_loss")
    page.select_option("#curve-group", "training")
    page.select_option("#curve-metric", "loss")
    wait_drawn(page, "curves", trial_ids, points=30)
    for series in page.evaluate(COLOR_PIXELS, "curves"):
        assert series["pixels"] > 20, series  # each trial's curve is on the canvas
    page.check("#curve-log")
    page.wait_for_function(
        "() => window.detCharts.find((c) => c.canvas.dataset.chart === 'curves').options.logY"
    )
    wait_drawn(page, "curves", trial_ids, points=30)
    # hyperparameter view: one point per lr value
    page.select_option("#hp-name", "lr")
    page.wait_for_function(
        "() => { const c = window.detCharts.find((c) => c.canvas.dataset.chart === 'hparams');"
        " return c && c.drawn.length === 1 && c.drawn[0].marks === 2; }"
    )
    expect(page.locator("#trials tbody tr")).to_have_count(2)
    expect(page.locator("#trials")).to_contain_text("0.05")
    expect(page.locator("#config-yaml")).to_contain_text("api_key: '********'")
    expect(page.locator("#config-yaml")).to_contain_text("MY_TOKEN=********")
    expect(page.locator("#config-yaml")).to_contain_text("PLAIN=visible")
    assert SECRET not in page.content()
    page.screenshot(path=screenshots / "experiment.png", full_page=True)


def test_pause_and_activate_from_the_page(signed_in: Page, site: Site) -> None:
    page = signed_in
    exp = site.ids["beta"]
    trial = site.api.wait_for(lambda: (site.trials("beta") or [{}])[0].get("id"), what="trial")
    site.api.wait_for(
        lambda: any("tick" in line for line in site.api.logs(trial)), what="the trial to hold"
    )
    page.goto(f"{site.url}/experiments/{exp}")
    state = page.locator("#exp-state")
    expect(state).to_have_attribute("data-state", "ACTIVE")
    page.click("#action-pause")
    expect(state).to_have_attribute("data-state", "PAUSED", timeout=30_000)
    expect(page.locator("#trials tbody tr .state")).to_have_text("paused", timeout=30_000)
    page.click("#action-activate")
    expect(state).to_have_attribute("data-state", "ACTIVE", timeout=30_000)
    expect(page.locator("#trials tbody tr .state")).to_have_text("active", timeout=30_000)
    site.api.wait_for(
        lambda: any("resumed from step 30" in line for line in site.api.logs(trial)),
        timeout=30,
        what="the trial to resume from its checkpoint",
    )


def test_trial_page_tails_logs_live_and_charts_every_metric(
    signed_in: Page, site: Site, screenshots: pathlib.Path
) -> None:
    page = signed_in
    trial = site.api.wait_for(lambda: (site.trials("beta") or [{}])[0].get("id"), what="trial")
    page.goto(f"{site.url}/trials/{trial}")
    logs = page.locator("#logs")
    expect(logs).to_contain_text("tick")
    first = int(logs.get_attribute("data-last") or 0)
    # New lines arrive without a reload.
    page.wait_for_function(
        "(first) => Number(document.getElementById('logs').dataset.last) > first + 5", arg=first
    )
    # Every metric of every group has its chart.
    page.wait_for_function(
        "() => ['training/loss', 'training/accuracy', 'validation/validation_loss'].every((k) =>"
        " (window.detCharts || []).some((c) => c.canvas.dataset.chart === k"
        " && c.drawn.length === 1 && c.drawn[0].marks > 0))"
    )
    checkpoint = page.locator("#checkpoints tbody tr").first
    expect(checkpoint.locator(".ckpt-size")).to_contain_text("KiB")
    expect(page.locator("#hparams")).to_contain_text("lr")
    page.screenshot(path=screenshots / "trial.png", full_page=True)

    page.select_option("#log-level", "WARNING")
    expect(logs).to_contain_text("finished training at step 30")
    lines = page.locator("#logs .line")
    assert lines.count() >= 1
    assert all(
        "lv-WARNING" in (c or "") for c in lines.evaluate_all("l => l.map(x => x.className)")
    )
    page.select_option("#log-level", "")
    page.fill("#log-text", "STEP 20 loss")
    expect(lines).to_have_count(1)
    expect(lines.first).to_contain_text("step 20 loss")


def test_log_filter_shows_each_line_once_while_its_first_answer_is_slow(
    signed_in: Page, site: Site
) -> None:
    """The filter's first request is held back while the live tail keeps ticking: a second
    request with the same ``after`` must not go out beside it and append the same lines again
    (a loaded machine showed "step 20 loss" twice)."""
    page = signed_in
    trial = site.api.wait_for(lambda: (site.trials("beta") or [{}])[0].get("id"), what="trial")
    site.api.wait_for(
        lambda: any("tick" in line for line in site.api.logs(trial)), what="the trial to hold"
    )
    page.goto(f"{site.url}/trials/{trial}")
    lines = page.locator("#logs .line")
    expect(page.locator("#logs")).to_contain_text("tick")
    held: list[Any] = []

    def hold_the_first_filtered(route: Any) -> None:
        if "q=" in route.request.url and not held:
            held.append(route)
        else:
            route.continue_()

    page.route(re.compile(rf"/ui/api/trials/{trial}/logs\?"), hold_the_first_filtered)
    with page.expect_request(lambda r: "q=" in r.url):
        page.fill("#log-text", "STEP 20 loss")
    # The tail ticks every second: give it three to send a second filtered request (it did, and
    # appended, before each pull waited for the one in flight).
    try:
        page.wait_for_event("request", lambda r: "q=" in r.url, timeout=3_000)
    except PlaywrightTimeout:
        pass  # no second request while the first is in flight, as wanted
    assert held, "the filter's request never reached the route"
    # The tail's next pull goes out once the held answer has been handled.
    with (
        page.expect_request(lambda r: "q=" in r.url and "after=" in r.url),
        page.expect_response(lambda r: r.request == held[0].request),
    ):
        held[0].continue_()
    expect(lines).to_have_count(1)
    ids = lines.evaluate_all("l => l.map(x => x.dataset.id)")
    assert len(ids) == len(set(ids)) == 1, ids


def test_compare_trials_of_two_experiments(
    signed_in: Page, site: Site, screenshots: pathlib.Path
) -> None:
    page = signed_in
    alpha = site.trials("alpha")[0]
    first, other = alpha["id"], site.trials("gamma")[0]["id"]
    page.goto(f"{site.url}/compare")
    page.fill("#picker-query", "alpha-search")
    page.click("#picker-search")
    page.click(f"#picker-results button[data-trial='{first}']")
    page.fill("#picker-query", str(site.ids["gamma"]))
    page.click("#picker-search")
    page.click(f"#picker-results button[data-trial='{other}']")
    wait_drawn(page, "compare", [first, other], points=3)
    for series in page.evaluate(COLOR_PIXELS, "compare"):
        assert series["pixels"] > 10, series
    table = page.locator("#compare-table")
    expect(table).to_contain_text("alpha-search")
    expect(table).to_contain_text("gamma-single")
    expect(table.locator("tr.hp", has_text="lr")).to_have_text(f"lr{alpha['hparams']['lr']}0.1")
    expect(page).to_have_url(re.compile(rf"trials={first}%2C{other}|trials={first},{other}"))
    page.screenshot(path=screenshots / "compare.png", full_page=True)
    # the URL reproduces the comparison
    page.goto(f"{site.url}/compare?trials={other}&group=training&metric=loss")
    wait_drawn(page, "compare", [other], points=30)


def test_model_registry_pages(signed_in: Page, site: Site, screenshots: pathlib.Path) -> None:
    page = signed_in
    trial = site.api.get(f"/api/v1/trials/{site.trials('gamma')[0]['id']}")["trial"]
    uuid = trial["bestCheckpoint"]["uuid"]
    name = f"tiny-model-{site.ids['gamma']}"
    site.api.post(
        "/api/v1/models", {"name": name, "description": "a tiny model", "labels": ["demo"]}
    )
    site.api.post(f"/api/v1/models/{name}/versions", {"checkpointUuid": uuid, "comment": "first"})
    page.goto(f"{site.url}/models")
    expect(page.locator(f"#models tr[data-name='{name}']")).to_contain_text("a tiny model")
    page.click(f"#models a:has-text('{name}')")
    version = page.locator("#model-versions tr[data-version='1']")
    expect(version).to_contain_text(uuid)
    version.locator("a:has-text('v1')").click()
    expect(page.locator("#version-checkpoint")).to_contain_text(uuid)
    expect(page.locator("#version-metrics")).to_contain_text("validation_loss")
    page.screenshot(path=screenshots / "model-version.png", full_page=True)


def test_session_cookie_and_bearer_tokens_both_work(site: Site) -> None:
    """The cookie the UI sets is an API session token: the API keeps taking Bearer headers."""
    import requests

    token = login_token(site.url)
    bearer = requests.get(
        site.url + "/api/v1/me", headers={"Authorization": f"Bearer {token}"}, timeout=30
    )
    assert bearer.status_code == 200, bearer.text
    cookie = requests.get(site.url + "/ui/api/trials/search", cookies={"auth": token}, timeout=30)
    assert cookie.status_code == 200, cookie.text


def test_experiment_chart_is_drawn_from_metric_tiles(signed_in: Page, site: Site) -> None:
    """The learning curves come from the tiles the metrics writer keeps: while the page loads,
    the master reads ``metric_tiles`` and never scans the raw ``metrics`` table."""
    from sqlalchemy import event

    page = signed_in
    exp = site.ids["alpha"]
    trial_ids = [t["id"] for t in site.trials("alpha")]
    url = f"{site.url}/experiments/{exp}?group=training&metric=loss"
    page.goto(url)
    wait_drawn(page, "curves", trial_ids, points=30)  # every report stored
    seen: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        seen.append(statement)

    engine = site.master.db.engine
    event.listen(engine, "before_cursor_execute", record)
    try:
        page.set_viewport_size({"width": 1000, "height": 900})  # another width: no cached answer
        page.goto(url)
        wait_drawn(page, "curves", trial_ids, points=30)
    finally:
        event.remove(engine, "before_cursor_execute", record)
    assert any("FROM metric_tiles" in s for s in seen)
    raw = [s for s in seen if re.search(r"\bFROM metrics\b", s) and "metrics.id IN" not in s]
    assert raw == []
    for series in page.evaluate(COLOR_PIXELS, "curves"):
        assert series["pixels"] > 20, series


def test_trials_table_pages_in_place_and_the_chart_says_it_shows_the_best(
    signed_in: Page, site: Site
) -> None:
    """120 trials: the table shows 100, "Next" swaps in the other 20 without reloading the page
    (the address keeps the page for the live refresh), and the chart names its 100 of 120."""
    from sqlalchemy import insert

    from determined.master.db import Experiment, Run, User, utcnow

    db = site.master.db
    with db.write() as session:
        owner = session.query(User).filter(User.username == "admin").one().id
        exp = Experiment(
            config={"name": "paged", "searcher": {"name": "random", "metric": "loss"}},
            owner_id=owner,
            state="COMPLETED",
        )
        session.add(exp)
        session.flush()
        exp_id = exp.id
        session.execute(
            insert(Run),
            [
                {"experiment_id": exp_id, "request_id": f"p{i}", "task_id": f"paged-{exp_id}-{i}",
                 "state": "COMPLETED", "hparams": {"lr": i / 100}, "searcher_metric_value": i,
                 "summary_metrics": {}, "last_activity": utcnow(), "run_id": 1}
                for i in range(120)
            ],
        )  # fmt: skip
        ids = sorted(r.id for r in session.query(Run).filter(Run.experiment_id == exp_id))
    page = signed_in
    page.goto(f"{site.url}/experiments/{exp_id}")
    rows = page.locator("#trials tbody tr")
    expect(rows).to_have_count(100)
    expect(rows.first).to_have_attribute("data-id", str(ids[0]))
    page.evaluate("() => { window.notReloaded = true; }")
    page.click("#trials-next")
    expect(rows).to_have_count(20)
    expect(rows.first).to_have_attribute("data-id", str(ids[100]))
    assert "trials_page=2" in page.url and page.evaluate("() => window.notReloaded") is True
    expect(page.locator("#trials-pager")).to_contain_text("trials 101\u2013120 of 120")
    expect(page.locator("#curve-info")).to_contain_text("best 100 of 120 trials by loss")
    page.click("#trials-prev")
    expect(rows).to_have_count(100)
