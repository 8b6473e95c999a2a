"""Web UI: time from navigation to the learning-curve chart drawn, and the bytes it downloads.

An experiment with 100 trials x 10,000 training reports each (1,000,000 metric rows, inserted
directly into the master's SQLite database together with their chart tiles, as the metrics writer
keeps them), opened in headless Chromium (/usr/bin/chromium): the time from navigation start until
the chart has drawn all 100 curves (the chart records ``performance.now()`` when it finishes), cold
(first load after the master started) and warm (reloads), plus the bytes the chart's request
transferred. Targets (issue 23): complete chart < 1 s cold, < 300 ms warm.

``--big-rows N`` (e.g. ``10000000``) adds a second experiment of 100 trials x N/100 reports
(bulk-inserted: a few minutes for 10^7) and times opening its page, cold and warm (target < 1 s).

Baseline in the same run: what a page without server-side decimation does — download the raw
reports through the REST API's metrics stream (``/api/v1/trials/metrics/trial_metrics``) and draw
them with the same chart. The REST stream of all 1,000,000 rows would take minutes and gigabytes of
master memory, so the baseline fetches 10 of the 100 trials and its time and size are also shown
scaled x10 (linear in the number of rows).

    .venv/bin/python benchmarks/bench_webui_curves.py [--trials 100] [--points 10000] [--reloads 5]
        [--big-rows 10000000]
"""

from __future__ import annotations

import argparse
import datetime
import math
import statistics
import sys
import time

import orjson
from _master import start_master

from determined.master._core import _metric_tiles
from determined.master.db import Experiment, Run, User

CHROMIUM = "/usr/bin/chromium"

DRAWN = """(n) => {
  const c = (window.detCharts || []).find((c) => c.canvas.dataset.chart === 'curves');
  return c && c.drawn.length === n && c.drawn.every((d) => d.marks > 0) ? c.drawnAt : null;
}"""

RESOURCE = """(part) => performance.getEntriesByType('resource')
  .filter((e) => e.name.includes(part))
  .map((e) => ({transfer: e.transferSize, body: e.decodedBodySize, ms: e.duration}))"""

BASELINE = """async (ids) => {
  const { Chart: ChartClass } = await import('/ui/static/chart.js');
  const started = performance.now();
  const params = new URLSearchParams({group: 'training'});
  for (const id of ids) params.append('trialIds', id);
  const response = await fetch('/api/v1/trials/metrics/trial_metrics?' + params);
  const text = await response.text();
  const series = new Map();
  for (const line of text.split('\\n')) {
    if (!line) continue;
    for (const m of JSON.parse(line).result.metrics) {
      let s = series.get(m.trialId);
      if (!s) { s = {key: m.trialId, label: 'trial ' + m.trialId, x: [], y: []}; series.set(m.trialId, s); }
      s.x.push(m.totalBatches);
      s.y.push(m.metrics.avg_metrics.loss);
    }
  }
  const box = document.createElement('div');
  box.style.width = '1200px';
  document.body.append(box);
  const chart = new ChartClass(box, {name: 'baseline'});
  chart.setSeries([...series.values()]);
  return {ms: performance.now() - started, bytes: text.length,
          points: [...series.values()].reduce((n, s) => n + s.x.length, 0)};
}"""


def populate(
    master: object, trials: int, points: int, name: str = "bench-100x10k"
) -> tuple[int, list[int]]:
    """One experiment with ``trials`` trials of ``points`` training reports each (direct inserts of
    the raw rows and of their tiles)."""
    db = master.db  # type: ignore[attr-defined]
    now = datetime.datetime.now(datetime.timezone.utc)
    with db.write() as session:
        owner = session.query(User).filter(User.username == "determined").one().id
        exp = Experiment(
            config={
                "name": name,
                "searcher": {"name": "random", "metric": "loss", "smaller_is_better": True},
                "hyperparameters": {"lr": {"type": "double", "minval": 0.001, "maxval": 0.1}},
            },
            owner_id=owner,
            state="COMPLETED",
        )
        session.add(exp)
        session.flush()
        runs = [
            Run(
                experiment_id=exp.id,
                request_id=str(i),
                task_id=f"bench-{exp.id}-{i}",
                state="COMPLETED",
                hparams={"lr": 0.001 + i / 1000},
                summary_metrics={"training": {"loss": {"type": "number", "count": points}}},
                last_activity=now,
                total_batches=points,
                run_id=1,
            )
            for i in range(trials)
        ]
        session.add_all(runs)
        session.flush()
        exp_id, run_ids = exp.id, [r.id for r in runs]
    stamp = now.strftime("%Y-%m-%d %H:%M:%S.%f")
    chunk = 200_000
    for n, run_id in enumerate(run_ids):
        rate = 0.0002 * 10_000 / points + n * 0.00001
        values = [
            (step, {"loss": math.exp(-rate * step) + 0.01 * ((step * 7) % 13) / 13})
            for step in range(1, points + 1)
        ]
        with db.engine.begin() as connection:
            for start in range(0, points, chunk):
                connection.exec_driver_sql(
                    "INSERT INTO metrics (trial_id, trial_run_id, metric_group, total_batches, "
                    "end_time, metrics, archived) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    [
                        (
                            run_id,
                            1,
                            "training",
                            step,
                            stamp,
                            orjson.dumps({"avg_metrics": avg, "batch_metrics": []}).decode(),
                            0,
                        )
                        for step, avg in values[start : start + chunk]
                    ],
                )
            _metric_tiles.store(connection, run_id, "training", 1, values)
    return exp_id, run_ids


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--points", type=int, default=10000)
    parser.add_argument("--reloads", type=int, default=5)
    parser.add_argument("--baseline-trials", type=int, default=10)
    parser.add_argument(
        "--big-rows", type=int, default=0, help="also time an experiment of this many rows"
    )
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    master, session = start_master(slots=1)
    try:
        started = time.perf_counter()
        exp_id, run_ids = populate(master, args.trials, args.points)
        print(
            f"inserted {args.trials} trials x {args.points} reports "
            f"in {time.perf_counter() - started:.1f} s"
        )
        token = session.request(
            "POST", "/api/v1/auth/login", body={"username": "determined", "password": ""}
        )["token"]
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM)
            context = browser.new_context(viewport={"width": 1400, "height": 900})
            context.add_cookies([{"name": "auth", "value": token, "url": master.url}])
            page = context.new_page()

            def load(
                exp: int = exp_id, trials: int = args.trials
            ) -> tuple[float, float, list[dict[str, float]]]:
                """(ms to the first drawn chart, ms to the complete one, the chart's requests)."""
                page.goto(f"{master.url}/experiments/{exp}?group=training&metric=loss")
                first = page.wait_for_function(DRAWN, arg=trials, timeout=120_000)
                page.wait_for_selector("#curves[data-loaded='true']", timeout=120_000)
                complete = page.evaluate(DRAWN, trials)
                entries = page.evaluate(RESOURCE, f"/ui/api/experiments/{exp}/curves")
                return float(first.json_value()), float(complete), entries

            cold_first, cold_ms, cold_entries = load()
            warm = [load() for _ in range(args.reloads)]
            warm_ms = statistics.median(ms for _, ms, _ in warm)
            warm_res = warm[-1][2][-1]
            cold_res = {
                "transfer": sum(e["transfer"] for e in cold_entries),
                "body": sum(e["body"] for e in cold_entries),
                "ms": sum(e["ms"] for e in cold_entries),
            }
            sent = page.evaluate(
                "() => window.detCharts.find((c) => c.canvas.dataset.chart === 'curves')"
                ".series.reduce((n, s) => n + s.x.length, 0)"
            )
            draw_ms = page.evaluate(
                "() => window.detCharts.find((c) => c.canvas.dataset.chart === 'curves').drawMs"
            )
            base = page.evaluate(BASELINE, run_ids[: args.baseline_trials])
            big: tuple[float, float] | None = None
            if args.big_rows:
                started = time.perf_counter()
                big_exp, _ = populate(master, 100, args.big_rows // 100, name="bench-big")
                print(
                    f"inserted 100 trials x {args.big_rows // 100:,} reports (and their tiles) "
                    f"in {time.perf_counter() - started:.1f} s"
                )
                big_cold = load(big_exp, 100)[1]
                big_warm = statistics.median(load(big_exp, 100)[1] for _ in range(args.reloads))
                big = (big_cold, big_warm)
            browser.close()
    finally:
        master.stop()

    scale = args.trials / args.baseline_trials
    print(f"\nnavigation -> {args.trials} curves drawn ({args.trials * args.points:,} reports)")
    print(f"  det, cold, first drawn chart: {cold_first:6.0f} ms")
    print(
        f"  det, cold cache, complete chart: {cold_ms:8.0f} ms   ({len(cold_entries)} requests, "
        f"{cold_res['transfer'] / 1024:.0f} KiB transferred, {cold_res['body'] / 1024:.0f} KiB JSON)"
    )
    print(
        f"  det, warm (median of {args.reloads}): {warm_ms:6.0f} ms   "
        f"({warm_res['transfer'] / 1024:.0f} KiB transferred, request {warm_res['ms']:.0f} ms)"
    )
    print(f"  points sent to the browser: {sent:,} (chart draw {draw_ms:.0f} ms)")
    print(
        f"  baseline, raw REST stream of {args.baseline_trials} trials: {base['ms']:8.0f} ms, "
        f"{base['bytes'] / 2**20:.1f} MiB, {base['points']:,} points"
    )
    print(
        f"  baseline scaled to {args.trials} trials (x{scale:.0f}): {base['ms'] * scale:8.0f} ms, "
        f"{base['bytes'] * scale / 2**20:.0f} MiB"
    )
    print(
        f"  ratio baseline(scaled) / det warm: {base['ms'] * scale / warm_ms:.0f}x time, "
        f"{base['bytes'] * scale / max(1, warm_res['transfer']):.0f}x bytes"
    )
    print(f"  ratio baseline(scaled) / det cold: {base['ms'] * scale / cold_ms:.0f}x time")
    print(
        f"  target complete chart < 1 s cold: {'met' if cold_ms < 1000 else 'NOT met'}; "
        f"< 300 ms warm: {'met' if warm_ms < 300 else 'NOT met'}"
    )
    if big is not None:
        print(f"\nexperiment of {args.big_rows:,} metric rows (100 trials): page -> chart drawn")
        print(f"  cold {big[0]:6.0f} ms, warm (median of {args.reloads}) {big[1]:6.0f} ms")
        print(f"  target < 1 s: {'met' if max(big) < 1000 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
