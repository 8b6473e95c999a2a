"""Web UI: time from navigation to the learning-curve chart drawn, and the bytes it downloads.

An experiment with 100 trials x 10,000 training reports each (1,000,000 metric rows, inserted
directly into the master's SQLite database), opened in headless Chromium (/usr/bin/chromium):
the time from navigation start until the chart has drawn all 100 curves (the chart records
``performance.now()`` when it finishes), cold (the master's series cache empty) and warm (reloads),
plus the bytes the chart's request transferred.

Baseline in the same run: what a page without server-side decimation does — download the raw
reports through the REST API's metrics stream (``/api/v1/trials/metrics/trial_metrics``) and draw
them with the same chart. The REST stream of all 1,000,000 rows would take minutes and gigabytes of
master memory, so the baseline fetches 10 of the 100 trials and its time and size are also shown
scaled x10 (linear in the number of rows).

    .venv/bin/python benchmarks/bench_webui_curves.py [--trials 100] [--points 10000] [--reloads 5]
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


def populate(master: object, trials: int, points: int) -> tuple[int, list[int]]:
    """One experiment with ``trials`` trials of ``points`` training reports each (direct inserts)."""
    db = master.db  # type: ignore[attr-defined]
    now = datetime.datetime.now(datetime.timezone.utc)
    with db.write() as session:
        owner = session.query(User).filter(User.username == "determined").one().id
        exp = Experiment(
            config={
                "name": "bench-100x10k",
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
    with db.engine.begin() as connection:
        for n, run_id in enumerate(run_ids):
            rate = 0.0002 + n * 0.00001
            rows = [
                (
                    run_id,
                    1,
                    "training",
                    step,
                    stamp,
                    orjson.dumps(
                        {
                            "avg_metrics": {
                                "loss": math.exp(-rate * step) + 0.01 * ((step * 7) % 13) / 13
                            },
                            "batch_metrics": [],
                        }
                    ).decode(),
                    0,
                )
                for step in range(1, points + 1)
            ]
            connection.exec_driver_sql(
                "INSERT INTO metrics (trial_id, trial_run_id, metric_group, total_batches, "
                "end_time, metrics, archived) VALUES (?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
    return exp_id, run_ids


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--points", type=int, default=10000)
    parser.add_argument("--reloads", type=int, default=5)
    parser.add_argument("--baseline-trials", type=int, default=10)
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
        url = f"{master.url}/experiments/{exp_id}?group=training&metric=loss"
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM)
            context = browser.new_context(viewport={"width": 1400, "height": 900})
            context.add_cookies([{"name": "auth", "value": token, "url": master.url}])
            page = context.new_page()

            def load() -> tuple[float, float, list[dict[str, float]]]:
                """(ms to the first drawn chart, ms to the complete one, the chart's requests)."""
                page.goto(url)
                first = page.wait_for_function(DRAWN, arg=args.trials, timeout=120_000)
                page.wait_for_selector("#curves[data-loaded='true']", timeout=120_000)
                complete = page.evaluate(DRAWN, args.trials)
                entries = page.evaluate(RESOURCE, f"/ui/api/experiments/{exp_id}/curves")
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
            browser.close()
    finally:
        master.stop()

    scale = args.trials / args.baseline_trials
    print(f"\nnavigation -> {args.trials} curves drawn ({args.trials * args.points:,} reports)")
    print(f"  det, cold cache, first (sampled) chart: {cold_first:6.0f} ms")
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
    target = "met" if warm_ms < 1000 else "NOT met"
    print(
        f"  target < 1 s: warm {target}; cold first chart {'met' if cold_first < 1000 else 'NOT met'}"
        f", cold complete {'met' if cold_ms < 1000 else 'NOT met'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
