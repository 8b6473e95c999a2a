"""The UI's routes without a browser: auth redirects, cookies, 4xx on bad input, secrets masked,
list pagination over thousands of experiments, decimated and incremental curves, shipped files."""

from __future__ import annotations

import datetime
import gzip
import json
import pathlib
import re
import time
from typing import Any

import pytest
import requests
from sqlalchemy import insert, update
from webui._site import TRIALS, exp_config, login_token

from determined.master import Master
from determined.master._core import _metric_tiles
from determined.master.db import Experiment, Metric, Run, TaskLog, User, utcnow
from determined.master.ui._mask import MASK, is_secret_name, mask
from determined.master.ui._series import chart_level, tile_points

ROOT = pathlib.Path(__file__).resolve().parents[2]
UI = ROOT / "packages/master/src/determined/master/ui"


@pytest.fixture(scope="module")
def master(module_db_url: str, make_module_master: Any) -> Master:
    """One master per module, on SQLite and on PostgreSQL."""
    return make_module_master(module_db_url, slots=1)  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def token(master: Master) -> str:
    return login_token(master.url)


@pytest.fixture
def web(master: Master, token: str) -> requests.Session:
    """A requests session holding the UI's session cookie, as a signed-in browser would."""
    session = requests.Session()
    session.cookies.set("auth", token)
    return session


def admin_id(master: Master) -> int:
    with master.db.read() as session:
        return next(u.id for u in session.query(User).filter(User.username == "admin"))


def add_experiment(master: Master, **fields: Any) -> int:
    """An experiment row inserted directly (no trial process)."""
    config = fields.pop("config", None) or {
        "name": fields.pop("name", "direct"),
        "searcher": {"name": "single", "metric": "loss", "smaller_is_better": True},
    }
    with master.db.write() as session:
        exp = Experiment(
            config=config,
            owner_id=fields.pop("owner_id", admin_id(master)),
            state=fields.pop("state", "COMPLETED"),
            labels=fields.pop("labels", []),
            **fields,
        )
        session.add(exp)
        session.flush()
        return exp.id


def add_trial(master: Master, experiment_id: int, metrics: dict[str, Any] | None = None) -> int:
    with master.db.write() as session:
        run = Run(
            experiment_id=experiment_id,
            request_id="r",
            task_id=f"task-{experiment_id}-{time.monotonic_ns()}",
            state="COMPLETED",
            hparams={"lr": 0.1, "layers": {"n": 2}},
            summary_metrics=metrics or {},
            last_activity=utcnow(),
            run_id=1,
        )
        session.add(run)
        session.flush()
        return run.id


def add_metrics(master: Master, trial_id: int, group: str, points: list[tuple[int, float]]) -> None:
    with master.db.write() as session:
        session.execute(
            insert(Metric),
            [
                {
                    "trial_id": trial_id,
                    "trial_run_id": 1,
                    "group": group,
                    "total_batches": step,
                    "end_time": utcnow(),
                    "metrics": {"avg_metrics": {"loss": value}, "batch_metrics": []},
                    "archived": False,
                }
                for step, value in points
            ],
        )
        # Rows inserted behind the metrics writer's back: build their tiles as it would.
        _metric_tiles.rebuild(session.connection(), trial_id, group, 1)
        session.execute(
            update(Run)
            .where(Run.id == trial_id)
            .values(
                last_activity=utcnow(),
                summary_metrics={group: {"loss": {"type": "number", "count": len(points)}}},
            )
        )


# ---------------------------------------------------------------------------------------------
# sign-in


@pytest.mark.parametrize(
    "path",
    ["/", "/experiments", "/experiments/1?group=training", "/trials/1", "/compare", "/models"],
)
def test_pages_redirect_to_login_without_a_session(master: Master, path: str) -> None:
    response = requests.get(master.url + path, allow_redirects=False, timeout=30)
    assert response.status_code == 303
    location = response.headers["location"]
    assert location.startswith("/login?next=")
    assert requests.utils.unquote(location.split("next=", 1)[1]) == path


@pytest.mark.parametrize(
    "path",
    ["/ui/api/trials/search", "/ui/api/experiments/1/curves", "/ui/partials/experiments"],
)
def test_ui_data_needs_a_session(master: Master, path: str) -> None:
    response = requests.get(master.url + path, cookies={"auth": "forged"}, timeout=30)
    assert response.status_code == 401
    assert "log in again" in response.json()["error"]["error"]


def test_login_sets_an_httponly_lax_session_cookie_and_logout_revokes_it(master: Master) -> None:
    session = requests.Session()
    response = session.post(
        master.url + "/login",
        data={"username": "admin", "password": "", "next": "/experiments?state=ACTIVE"},
        allow_redirects=False,
        timeout=30,
    )
    assert response.status_code == 303
    assert response.headers["location"] == "/experiments?state=ACTIVE"
    cookie = response.headers["set-cookie"]
    assert re.search(r"(?i)\bhttponly\b", cookie) and re.search(r"(?i)samesite=lax", cookie)
    token = session.cookies["auth"]
    # The cookie is an API session token: Bearer works, and the page shows the user.
    me = requests.get(
        master.url + "/api/v1/me", headers={"Authorization": f"Bearer {token}"}, timeout=30
    )
    assert me.json()["user"]["username"] == "admin"
    page = session.get(master.url + "/experiments", timeout=30)
    assert page.status_code == 200 and 'id="user-name"' in page.text and "Sign out" in page.text
    out = session.post(master.url + "/logout", allow_redirects=False, timeout=30)
    assert out.status_code == 303 and out.headers["location"] == "/login"
    assert "auth" not in session.cookies
    revoked = requests.get(
        master.url + "/api/v1/me", headers={"Authorization": f"Bearer {token}"}, timeout=30
    )
    assert revoked.status_code == 401


@pytest.mark.parametrize(
    ("form", "status", "message"),
    [
        ({"username": "admin", "password": "nope"}, 401, "Wrong username or password."),
        ({"username": "nobody", "password": ""}, 401, "Wrong username or password."),
        ({"username": "  ", "password": ""}, 400, "Enter a username."),
    ],
)
def test_login_errors_show_on_the_form(
    master: Master, form: dict[str, str], status: int, message: str
) -> None:
    response = requests.post(master.url + "/login", data=form, allow_redirects=False, timeout=30)
    assert response.status_code == status
    assert message in response.text
    assert "set-cookie" not in response.headers


@pytest.mark.parametrize("target", ["//evil.example/x", "https://evil.example/", "/\\evil", ""])
def test_login_never_redirects_off_site(master: Master, target: str) -> None:
    response = requests.post(
        master.url + "/login",
        data={"username": "admin", "password": "", "next": target},
        allow_redirects=False,
        timeout=30,
    )
    assert response.status_code == 303
    assert response.headers["location"] == "/"


# ---------------------------------------------------------------------------------------------
# errors


def test_bad_ids_and_parameters_are_4xx_never_500(master: Master, web: requests.Session) -> None:
    exp = add_experiment(master, name="four-oh-four")
    trial = add_trial(master, exp)
    html = {
        "/experiments/abc": 404,
        "/experiments/99999": 404,
        "/experiments/-1": 404,
        "/trials/abc": 404,
        "/trials/99999": 404,
        "/models/no-such-model": 404,
        "/models/no-such-model/versions/1": 404,
        "/experiments?sort=bogus": 400,
        "/experiments?order=sideways": 400,
        "/experiments?limit=0": 400,
        "/experiments?limit=x": 400,
        "/experiments?state=SLEEPING": 400,
        "/experiments?after=%%%": 400,
        "/compare?trials=a,b": 400,
    }
    for path, status in html.items():
        response = web.get(master.url + path, timeout=30)
        assert response.status_code == status, (path, response.text[:300])
        assert response.headers["content-type"].startswith("text/html"), path
        assert 'id="error-message"' in response.text, path
    api = {
        "/ui/api/experiments/99999/curves": 404,
        "/ui/api/experiments/abc/curves": 400,
        f"/ui/api/experiments/{exp}/curves?group=nope": 400,
        f"/ui/api/experiments/{exp}/hparams": 200,
        "/ui/api/curves?trials=a": 400,
        "/ui/api/curves?trials=99999": 404,
        "/ui/api/trials/99999/metrics": 404,
        "/ui/api/trials/99999/logs": 404,
        f"/ui/api/trials/{trial}/logs?level=LOUD": 400,
        f"/ui/api/trials/{trial}/logs?after=x": 400,
        "/ui/partials/experiments/99999": 404,
        "/ui/partials/trials/99999": 404,
        "/ui/partials/experiments?sort=bogus": 400,
    }
    for path, status in api.items():
        response = web.get(master.url + path, timeout=30)
        assert response.status_code == status, (path, response.text[:300])
        if status >= 400:
            assert response.json()["error"]["error"], path


# ---------------------------------------------------------------------------------------------
# secrets


def test_experiment_config_secrets_are_masked(
    master: Master, web: requests.Session, token: str
) -> None:
    from e2e.harness import MasterAPI

    secret = "AKIA-very-secret-value"
    config = exp_config(
        "masked",
        checkpoint_storage={
            "type": "s3",
            "bucket": "my-bucket",
            "access_key": secret,
            "secret_key": secret,
        },
        data={"secrets": {"token": secret}, "batch_size": 8},
        environment={"environment_variables": [f"WANDB_API_KEY={secret}", "SEED=1"]},
    )
    exp = MasterAPI(master.url, "admin").create_experiment(config, TRIALS, activate=False)
    page = web.get(f"{master.url}/experiments/{exp}", timeout=30)
    assert page.status_code == 200
    assert secret not in page.text
    assert "bucket: my-bucket" in page.text and "batch_size: 8" in page.text
    assert "SEED=1" in page.text and f"WANDB_API_KEY={MASK}" in page.text
    assert page.text.count(MASK) >= 6  # submitted and full config: two keys, the token, the env
    for path in (f"/ui/partials/experiments/{exp}", "/ui/partials/experiments"):
        assert secret not in web.get(master.url + path, timeout=30).text


def test_mask_rules() -> None:
    assert is_secret_name("secret_key") and is_secret_name("secretAccessKey")
    assert is_secret_name("AWS_SECRET_ACCESS_KEY") and is_secret_name("password")
    assert is_secret_name("connection_string") and is_secret_name("auth_token")
    assert not is_secret_name("num_tokens") and not is_secret_name("bucket")
    masked = mask(
        {
            "checkpoint_storage": {"type": "azure", "container": "c", "connection_string": "x"},
            "hyperparameters": {"num_tokens": 5, "password_len": {"type": "const", "val": 3}},
            "data": {"secrets": {"a": [1, {"b": "c"}], "empty": ""}},
            "environment": {"environment_variables": {"cpu": ["PASSWORD=p", "X=1"]}},
        }
    )
    assert masked["checkpoint_storage"] == {
        "type": "azure",
        "container": "c",
        "connection_string": MASK,
    }
    assert masked["hyperparameters"]["num_tokens"] == 5
    assert masked["data"]["secrets"] == {"a": [MASK, {"b": MASK}], "empty": ""}
    assert masked["environment"]["environment_variables"]["cpu"] == [f"PASSWORD={MASK}", "X=1"]


# ---------------------------------------------------------------------------------------------
# the experiment list


def test_list_pages_stay_fast_and_exact_over_thousands_of_experiments(
    master: Master, web: requests.Session
) -> None:
    owner = admin_id(master)
    with master.db.write() as session:
        other = User(username="pager-bob", password_hash="")
        session.add(other)
        session.flush()
        bob = other.id
        start = datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)
        session.execute(
            insert(Experiment),
            [
                {
                    "config": {
                        "name": f"bulk-{i % 37:02d}",
                        "searcher": {"name": "single", "metric": "loss"},
                    },
                    "owner_id": bob if i % 3 == 0 else owner,
                    "state": ("COMPLETED", "ERROR", "PAUSED")[i % 3 if i % 5 else 0],
                    "labels": ["bulk", "odd"] if i % 2 else ["bulk"],
                    "start_time": start + datetime.timedelta(minutes=i % 500),
                    "progress": (i % 11) / 10 if i % 7 else None,
                    "archived": i % 50 == 0,
                }
                for i in range(3000)
            ],
        )
    with master.db.read() as session:
        rows = [
            (
                e.id,
                e.config["name"],
                e.owner_id,
                e.state,
                e.labels,
                e.archived,
                e.start_time.replace(tzinfo=None),
                -1.0 if e.progress is None else e.progress,
            )
            for e in session.query(Experiment).filter(
                Experiment.config["name"].as_string().like("bulk-%")
            )
        ]
    assert len(rows) == 3000

    def walk(query: str, limit: int) -> tuple[list[int], list[float]]:
        ids: list[int] = []
        times: list[float] = []
        url = f"{master.url}/ui/partials/experiments?label=bulk&limit={limit}{query}"
        while url:
            started = time.perf_counter()
            response = web.get(url, timeout=60)
            times.append(time.perf_counter() - started)
            assert response.status_code == 200, response.text[:300]
            ids += [int(x) for x in re.findall(r'<tr data-id="(\d+)"', response.text)]
            nxt = re.search(r'id="page-next" href="([^"]+)"', response.text)
            url = (
                master.url
                + nxt.group(1)
                .replace("&amp;", "&")
                .replace("/experiments", "/ui/partials/experiments", 1)
                if nxt
                else ""
            )
        return ids, times

    visible = [r for r in rows if not r[5]]
    ids, times = walk("", 500)
    assert ids == sorted((r[0] for r in visible), reverse=True)
    assert sorted(times)[len(times) // 2] < 1.0, times  # a page costs what page one costs

    ids, _ = walk("&sort=name&order=asc&archived=1", 400)
    assert ids == [r[0] for r in sorted(rows, key=lambda r: (r[1], r[0]))]
    ids, _ = walk("&sort=start&order=asc", 500)  # timestamps in the cursor
    assert ids == [r[0] for r in sorted(visible, key=lambda r: (r[6], r[0]))]
    ids, _ = walk("&sort=progress", 500)  # experiments without progress sort last
    assert ids == [r[0] for r in sorted(visible, key=lambda r: (r[7], r[0]), reverse=True)]

    ids, _ = walk("&owner=pager-bob&state=COMPLETED&name=BULK-0", 100)
    want = [
        r[0] for r in visible if r[2] == bob and r[3] == "COMPLETED" and r[1].startswith("bulk-0")
    ]
    assert ids == sorted(want, reverse=True) and want

    ids, _ = walk("&label=odd", 500)
    assert ids == sorted((r[0] for r in visible if "odd" in r[4]), reverse=True)

    # Previous goes back to exactly the page before.
    first = web.get(f"{master.url}/experiments?label=bulk&limit=20", timeout=30).text
    nxt = re.search(r'id="page-next" href="([^"]+)"', first).group(1).replace("&amp;", "&")
    second = web.get(master.url + nxt, timeout=30).text
    prev = re.search(r'id="page-prev" href="([^"]+)"', second).group(1).replace("&amp;", "&")
    back = web.get(master.url + prev, timeout=30).text
    pattern = r'<tr data-id="(\d+)"'
    assert re.findall(pattern, back) == re.findall(pattern, first)
    assert "page-prev" not in back.split('class="pager"')[1]


# ---------------------------------------------------------------------------------------------
# curves


def test_curves_are_decimated_per_pixel_column_and_keep_extremes(
    master: Master, web: requests.Session
) -> None:
    exp = add_experiment(master, name="curvy")
    trials = [add_trial(master, exp) for _ in range(3)]
    for n, trial in enumerate(trials):
        points = [(step, 1.0 / step + n) for step in range(1, 5001)]
        points[2500] = (2501, 100.0 + n)  # a spike must survive decimation
        add_metrics(master, trial, "training", points)
    response = web.get(
        f"{master.url}/ui/api/experiments/{exp}/curves?group=training&metric=loss&width=200",
        headers={"Accept-Encoding": "gzip"},
        timeout=30,
    )
    assert response.status_code == 200
    assert response.headers.get("content-encoding") == "gzip"
    payload = response.json()
    assert payload["group"] == "training" and payload["metric"] == "loss"
    assert payload["reportedPoints"] == 15000
    assert [t["id"] for t in payload["trials"]] == trials
    for n, trial in enumerate(payload["trials"]):
        assert trial["points"] == 5000
        assert len(trial["x"]) <= 2 * 200 + 1
        assert max(trial["y"]) == 100.0 + n and trial["x"][trial["y"].index(100.0 + n)] == 2501
        assert trial["x"][0] == 1 and trial["x"][-1] == 5000
        assert min(trial["y"]) == pytest.approx(1 / 5000 + n, rel=1e-5)
    # Raw points are sent whole when they fit.
    short = add_trial(master, exp)
    add_metrics(master, short, "training", [(s, 1.0 / s) for s in range(1, 501)])
    small = web.get(
        f"{master.url}/ui/api/curves?trials={short}&group=training&metric=loss&width=4000",
        timeout=30,
    ).json()
    assert small["trials"][0]["x"] == list(range(1, 501))


def test_a_search_of_hundreds_of_trials_pages_its_table_and_charts_the_best(
    master: Master, web: requests.Session
) -> None:
    """The page, its live refresh and the curves read a page or the best 100, never every trial:
    250 trials give a table of 100 rows a page over 3 pages, the best value of all of them, and
    curves of the 100 with the lowest loss; the hyperparameter view still has every trial."""
    exp = add_experiment(master, name="wide-search")
    count, unmetered = 250, 10
    with master.db.write() as session:
        session.execute(
            insert(Run),
            [
                {
                    "experiment_id": exp,
                    "request_id": f"r{i}",
                    "task_id": f"wide-{exp}-{i}",
                    "state": "COMPLETED",
                    "hparams": {"lr": i / 1000},
                    # the later a trial, the better (the best is on the last page); ten never
                    # validated
                    "searcher_metric_value": None if i < unmetered else 1000.0 - i,
                    "summary_metrics": {},
                    "last_activity": utcnow(),
                    "run_id": 1,
                }
                for i in range(count)
            ],
        )
        ids = sorted(r.id for r in session.query(Run).filter(Run.experiment_id == exp))
    page_url = f"{master.url}/experiments/{exp}"

    def rows(html: str) -> list[int]:
        return [int(i) for i in re.findall(r'<tr data-id="(\d+)"', html)]

    first = web.get(page_url, timeout=30)
    assert first.status_code == 200
    assert rows(first.text) == ids[:100]
    assert 'id="trial-count">(250)' in first.text
    assert (
        'page <b id="trials-page">1</b> of 3' in first.text and 'id="trials-prev"' not in first.text
    )
    assert f'<b id="exp-best">{1000.0 - (count - 1):g}' in first.text  # from the last page
    last = web.get(page_url, params={"trials_page": 3}, timeout=30).text
    assert rows(last) == ids[200:] and 'id="trials-next"' not in last
    assert rows(web.get(page_url, params={"trials_page": 99}, timeout=30).text) == ids[200:]
    for bad in ("0", "two"):
        response = web.get(page_url, params={"trials_page": bad}, timeout=30)
        assert response.status_code == 400 and "trials_page" in response.text
    partial = web.get(
        f"{master.url}/ui/partials/experiments/{exp}", params={"trials_page": 2}, timeout=30
    )
    assert rows(partial.text) == ids[100:200]
    assert "trials 101\u2013200 of 250" in partial.text

    curves = web.get(f"{master.url}/ui/api/experiments/{exp}/curves", timeout=30).json()
    assert curves["totalTrials"] == count
    assert [t["id"] for t in curves["trials"]] == ids[-100:]  # the lowest loss, in id order
    hparams = web.get(f"{master.url}/ui/api/experiments/{exp}/hparams", timeout=30).json()
    assert [t["id"] for t in hparams["trials"]] == ids and hparams["hparams"] == ["lr"]
    assert hparams["trials"][0]["best"] is None and hparams["trials"][-1]["best"] == 751.0


def test_the_chart_of_a_small_search_shows_every_trial_even_without_metrics(
    master: Master, web: requests.Session
) -> None:
    exp = add_experiment(master, name="narrow-search")
    trials = [add_trial(master, exp) for _ in range(3)]
    payload = web.get(f"{master.url}/ui/api/experiments/{exp}/curves", timeout=30).json()
    assert payload["totalTrials"] == 3 and [t["id"] for t in payload["trials"]] == trials
    page = web.get(f"{master.url}/experiments/{exp}", timeout=30).text
    assert 'id="trial-count">(3)' in page and 'id="trials-pager"' not in page


def _statements(master: Master) -> Any:
    """A context manager collecting the SQL statements the master's engine runs meanwhile."""
    import contextlib

    from sqlalchemy import event

    @contextlib.contextmanager
    def collect() -> Any:
        seen: list[str] = []

        def record(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
            seen.append(statement)

        event.listen(master.db.engine, "before_cursor_execute", record)
        try:
            yield seen
        finally:
            event.remove(master.db.engine, "before_cursor_execute", record)

    return collect()


RAW_READ = re.compile(r"\bFROM metrics\b", re.IGNORECASE)


def test_curves_read_tiles_never_the_raw_metrics(master: Master, web: requests.Session) -> None:
    exp = add_experiment(master, name="tiled")
    trials = [add_trial(master, exp) for _ in range(4)]
    for n, trial in enumerate(trials):
        add_metrics(master, trial, "training", [(s, 1.0 / s + n) for s in range(1, 20001)])
    url = f"{master.url}/ui/api/experiments/{exp}/curves?group=training&metric=loss&width=1000"
    with _statements(master) as seen:
        payload = web.get(url, timeout=30).json()
    assert payload["reportedPoints"] == 80000
    tile_reads = [s for s in seen if "metric_tiles" in s]
    assert len(tile_reads) == 1  # every trial at one level: one query
    # The raw table is only ever looked up by id (each trial's best and latest validation).
    assert [s for s in seen if RAW_READ.search(s) and "metrics.id IN" not in s] == []
    for trial in payload["trials"]:
        assert trial["points"] == 20000 and 300 <= len(trial["x"]) <= 2 * 1024 + 2
        assert trial["x"][0] == 1 and trial["x"][-1] == 20000
    # With the raw rows gone, the chart still draws the same curves: it reads only tiles.
    with master.db.write() as session:
        session.execute(Metric.__table__.delete().where(Metric.trial_id.in_(trials)))
        session.execute(update(Run).where(Run.id.in_(trials)).values(last_activity=utcnow()))
    again = web.get(url, timeout=30).json()
    assert [t["y"] for t in again["trials"]] == [t["y"] for t in payload["trials"]]
    per_trial = web.get(f"{master.url}/ui/api/trials/{trials[0]}/metrics?width=500", timeout=30)
    (chart,) = per_trial.json()["charts"]
    assert chart["points"] == 20000 and chart["x"][-1] == 20000 and len(chart["x"]) <= 2 * 512 + 2


def test_new_reports_reach_the_chart(master: Master, web: requests.Session) -> None:
    exp = add_experiment(master, name="growing")
    trials = [add_trial(master, exp) for _ in range(2)]
    for trial in trials:
        add_metrics(master, trial, "training", [(s, float(s)) for s in range(1, 101)])
    url = f"{master.url}/ui/api/experiments/{exp}/curves?group=training&metric=loss&width=4000"
    first = web.get(url, timeout=30).json()
    assert [len(t["x"]) for t in first["trials"]] == [100, 100]
    add_metrics(master, trials[1], "training", [(s, float(s)) for s in range(101, 111)])
    second = web.get(url, timeout=30).json()
    assert [t["points"] for t in second["trials"]] == [100, 110]
    assert second["trials"][1]["x"][-1] == 110


def test_tile_points_keep_min_max_of_every_bucket() -> None:
    points = [(x, float((x * 7919) % 1000)) for x in range(10000)]
    level = chart_level(0, 9999, 100)
    assert level == 7  # 128-wide buckets: 79 of them
    tiles = _metric_tiles.aggregate(((x, {"m": y}) for x, y in points), level)
    ordered = [tiles[key] for key in sorted(tiles, key=lambda k: k[1])]
    xs, ys, total = tile_points(ordered)
    assert total == 10000 and xs == sorted(xs) and len(xs) <= 2 * 79 + 2
    assert (xs[0], ys[0]) == points[0] and (xs[-1], ys[-1]) == points[-1]
    for bucket in range(79):
        inside = [y for x, y in points if x >> level == bucket]
        kept = [y for x, y in zip(xs, ys, strict=True) if x >> level == bucket]
        assert min(inside) in kept and max(inside) in kept
    # Buckets of one or two reports keep them all.
    two = _metric_tiles.aggregate([(1, {"m": 5.0}), (2, {"m": 5.0}), (3, {"m": 1.0})], 1)
    assert tile_points([two[("m", 0)], two[("m", 1)]])[:2] == ([1, 2, 3], [5.0, 5.0, 1.0])
    assert chart_level(0, 1234, 1000) == 1 and chart_level(5, 5, 10) == 0


# ---------------------------------------------------------------------------------------------
# logs, search, compare


def test_trial_logs_tail_and_filters(master: Master, web: requests.Session) -> None:
    exp = add_experiment(master, name="logged")
    trial = add_trial(master, exp)
    with master.db.read() as session:
        task_id = session.get(Run, trial).task_id
    lines = [
        (0, "LOG_LEVEL_INFO", "starting"),
        (1, "LOG_LEVEL_INFO", "worker up"),
        (0, "LOG_LEVEL_WARNING", "learning rate is high"),
        (1, "LOG_LEVEL_ERROR", "NaN loss"),
        (None, None, "plain stdout line"),
    ]
    with master.db.write() as session:
        session.add_all(
            TaskLog(task_id=task_id, rank_id=r, level=lv, log=text + "\n", timestamp=utcnow())
            for r, lv, text in lines
        )

    def texts(**params: Any) -> list[str]:
        response = web.get(f"{master.url}/ui/api/trials/{trial}/logs", params=params, timeout=30)
        assert response.status_code == 200, response.text
        return [line["text"] for line in response.json()["logs"]]

    assert texts() == [text for _, _, text in lines]
    assert texts(rank=1) == ["worker up", "NaN loss"]
    assert texts(level="WARNING") == ["learning rate is high", "NaN loss"]
    assert texts(level="info") == [text for _, _, text in lines]
    assert texts(q="nan LOSS") == ["NaN loss"]
    assert texts(tail=2) == ["NaN loss", "plain stdout line"]
    everything = web.get(f"{master.url}/ui/api/trials/{trial}/logs", timeout=30).json()
    assert everything["done"] is True
    after = everything["logs"][2]["id"]
    assert texts(after=after) == ["NaN loss", "plain stdout line"]


def test_search_and_compare_trials_across_experiments(
    master: Master, web: requests.Session
) -> None:
    first = add_experiment(master, name="compare-left")
    second = add_experiment(master, name="compare-right")
    left, right = add_trial(master, first), add_trial(master, second)
    add_metrics(master, left, "validation", [(10, 0.5), (20, 0.25)])
    add_metrics(master, right, "validation", [(10, 0.4)])
    found = web.get(f"{master.url}/ui/api/trials/search?q=compare-", timeout=30).json()
    assert {t["id"] for t in found["trials"]} == {left, right}
    assert (
        web.get(f"{master.url}/ui/api/trials/search?q={right}", timeout=30).json()["trials"][0][
            "experimentName"
        ]
        == "compare-right"
    )
    payload = web.get(f"{master.url}/ui/api/curves?trials={right},{left}", timeout=30).json()
    assert [t["id"] for t in payload["trials"]] == [right, left]
    assert payload["group"] == "validation" and payload["metric"] == "loss"
    assert [t["experimentName"] for t in payload["trials"]] == ["compare-right", "compare-left"]
    assert payload["trials"][1]["y"] == [0.5, 0.25]
    assert payload["trials"][0]["hparams"] == {"lr": 0.1, "layers.n": 2}


# ---------------------------------------------------------------------------------------------
# the app around the UI


def test_ui_does_not_shadow_the_api(master: Master, web: requests.Session) -> None:
    docs = requests.get(master.url + "/api/v1/docs", timeout=30)
    assert docs.status_code == 200 and "swagger" in docs.text.lower()
    spec = requests.get(master.url + "/api/v1/openapi.json", timeout=30).json()
    ui_paths = ("/login", "/logout", "/experiments", "/trials", "/compare", "/models", "/ui/")
    assert not [path for path in spec["paths"] if path == "/" or path.startswith(ui_paths)]
    missing = web.get(master.url + "/api/v1/no-such-route", timeout=30)
    assert missing.status_code == 404 and missing.headers["content-type"] == "application/json"
    assert requests.get(master.url + "/health", timeout=30).json()["status"] == "up"


def test_static_files_are_served_revalidated_and_need_no_network(master: Master) -> None:
    for path in sorted((UI / "static").iterdir()):
        response = requests.get(f"{master.url}/ui/static/{path.name}", timeout=30)
        assert response.status_code == 200, path.name
        assert response.headers["cache-control"] == "no-cache"
    for path in [*(UI / "static").iterdir(), *(UI / "templates").rglob("*.html")]:
        text = path.read_text()
        assert not re.search(r"""(src|href)=["']?(https?:)?//""", text), path
        assert not re.search(r"""import[^;]*["']https?://""", text), path


def test_the_wheel_ships_templates_and_static_files() -> None:
    from hatchling.builders.wheel import WheelBuilder

    shipped = {
        f.distribution_path
        for f in WheelBuilder(str(ROOT / "packages/master")).recurse_included_files()
    }
    for path in [*(UI / "static").iterdir(), *(UI / "templates").rglob("*.html")]:
        relative = path.relative_to(UI.parents[2]).as_posix()
        assert relative in shipped, relative


def test_gzip_is_skipped_for_clients_that_do_not_ask(master: Master, web: requests.Session) -> None:
    raw = web.get(
        f"{master.url}/ui/api/trials/search?q=", headers={"Accept-Encoding": "identity"}, timeout=30
    )
    assert "content-encoding" not in raw.headers
    assert isinstance(json.loads(raw.content), dict)
    assert gzip  # (gzip-encoded answers are checked in the curves test)


def test_workspace_and_project_pages_count_filter_and_hide(
    master: Master, web: requests.Session, token: str
) -> None:
    """Workspaces → projects → experiments with their counts (SQLite and PostgreSQL), archived
    workspaces only when asked, and a user outside the workspace gets 404s and empty lists (its
    experiments and models too)."""
    api = requests.Session()
    api.headers["Authorization"] = f"Bearer {token}"

    def post(path: str, body: dict[str, Any]) -> Any:
        response = api.post(master.url + path, json=body, timeout=30)
        assert response.ok, response.text
        return response.json()

    suffix = time.monotonic_ns()
    ws = post("/api/v1/workspaces", {"name": f"routes-{suffix}"})["workspace"]["id"]
    gone = post("/api/v1/workspaces", {"name": f"routes-gone-{suffix}"})["workspace"]["id"]
    post(f"/api/v1/workspaces/{gone}/archive", {})
    project = post(f"/api/v1/workspaces/{ws}/projects", {"name": "p", "workspaceId": ws})
    pid = project["project"]["id"]
    old = post(f"/api/v1/workspaces/{ws}/projects", {"name": "old", "workspaceId": ws})
    post(f"/api/v1/projects/{old['project']['id']}/archive", {})
    exps = [add_experiment(master, name=f"in-project-{i}", project_id=pid) for i in range(2)]
    model = f"routes-model-{suffix}"
    post("/api/v1/models", {"name": model, "workspaceId": ws})
    add_experiment(master, name="deleted-one", project_id=pid, state="DELETED")

    page = web.get(f"{master.url}/workspaces", timeout=30).text
    row = re.search(rf"<tr data-id=\"{ws}\".*?</tr>", page, re.S)
    assert row is not None
    assert re.findall(r'class="num \w+">(\d+)<', row.group(0)) == ["2", "2"]
    assert f'data-id="{gone}"' not in page
    assert f'data-id="{gone}"' in web.get(f"{master.url}/workspaces?archived=1", timeout=30).text
    page = web.get(f"{master.url}/workspaces/{ws}", timeout=30).text
    assert re.search(rf'<tr data-id="{pid}".*?class="num experiments">2<', page, re.S)
    assert f'<tr data-id="{old["project"]["id"]}"' not in page
    page = web.get(f"{master.url}/workspaces/{ws}?archived=1", timeout=30).text
    assert f'<tr data-id="{old["project"]["id"]}" class="archived"' in page
    for path in (f"/projects/{pid}", f"/ui/partials/experiments?project={pid}"):
        page = web.get(master.url + path, timeout=30).text
        assert ">2 experiments<" in page, path
        assert sorted(int(i) for i in re.findall(r'<tr data-id="(\d+)"', page)) == exps
    assert web.get(f"{master.url}/experiments?project=x", timeout=30).status_code == 400

    post("/api/v1/users", {"user": {"username": f"outsider-{suffix}"}, "password": ""})
    outsider = requests.Session()
    outsider.cookies.set("auth", login_token(master.url, f"outsider-{suffix}"))
    for path in (
        f"/workspaces/{ws}",
        f"/projects/{pid}",
        f"/experiments/{exps[0]}",
        f"/ui/partials/experiments/{exps[0]}",
        f"/ui/api/experiments/{exps[0]}/hparams",
        f"/ui/api/workspaces/{ws}/permissions",
        f"/models/{model}",
    ):
        assert outsider.get(master.url + path, timeout=30).status_code == 404, path
    assert model in web.get(f"{master.url}/models", timeout=30).text
    assert model not in outsider.get(f"{master.url}/models", timeout=30).text
    listed = outsider.get(f"{master.url}/ui/partials/experiments?project={pid}", timeout=30)
    assert ">0 experiments<" in listed.text
    assert f"routes-{suffix}" not in outsider.get(f"{master.url}/workspaces", timeout=30).text
