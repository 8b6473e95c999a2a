// One experiment: live status and trials, actions, learning curves, hyperparameter view.
import { api, fillSelect, pageData, poll, refreshRegions } from "./common.js";
import { Chart, colorFor } from "./chart.js";

const data = pageData();
const live = document;  // the live regions (status, trials) are refreshed in place
/** The live regions' URL, for the page of the trials table the address names. */
function liveUrl() {
  const page = new URL(location.href).searchParams.get("trials_page");
  const base = `/ui/partials/experiments/${data.experimentId}`;
  return page ? `${base}?trials_page=${encodeURIComponent(page)}` : base;
}
const selected = new Set();
let terminal = data.terminal;

// ---- actions (pause, activate, cancel, kill, archive) through the REST API -----------------
live.addEventListener("click", async (event) => {
  const button = event.target.closest("button[data-action]");
  if (!button) return;
  const action = button.dataset.action;
  if (button.dataset.confirm && !window.confirm(button.dataset.confirm)) return;
  button.disabled = true;
  showActionError("");
  try {
    await api(`/api/v1/experiments/${data.experimentId}/${action}`, { method: "POST", body: {} });
  } catch (error) {
    showActionError(`${action} failed: ${error.message}`);
  }
  await refreshLive();
});

/** Show why an action failed (e.g. "403: ... lacks PERMISSION_TYPE_...") under the status bar. */
function showActionError(message) {
  const box = document.getElementById("action-error");
  if (!box) return;
  box.textContent = message;
  box.hidden = !message;
}

// ---- trial selection for the compare page ---------------------------------------------------
function restoreSelection() {
  for (const box of live.querySelectorAll(".trial-select")) box.checked = selected.has(box.value);
  const button = document.getElementById("compare-selected");
  if (button) button.disabled = selected.size === 0;
}
live.addEventListener("change", (event) => {
  const box = event.target;
  if (box.id === "select-all-trials") {
    for (const b of live.querySelectorAll(".trial-select")) {
      if (box.checked) selected.add(b.value); else selected.delete(b.value);
    }
  } else if (box.classList.contains("trial-select")) {
    if (box.checked) selected.add(box.value); else selected.delete(box.value);
  }
  restoreSelection();
});
live.addEventListener("click", (event) => {
  if (event.target.id === "compare-selected" && selected.size) {
    location.href = "/compare?trials=" + [...selected].join(",");
  }
});
live.addEventListener("region-updated", restoreSelection);

// ---- the trials table's pages (a 10,000-trial search shows 100 at a time) -------------------
live.addEventListener("click", async (event) => {
  const link = event.target.closest("a[data-trials-page]");
  if (!link) return;
  event.preventDefault();
  const url = new URL(location.href);
  url.searchParams.set("trials_page", link.dataset.trialsPage);
  history.replaceState(null, "", url);
  await refreshLive();
});

async function refreshLive() {
  await refreshRegions(live, liveUrl());
  const state = live.querySelector("#exp-state")?.dataset.state || "";
  terminal = ["COMPLETED", "CANCELED", "ERROR", "DELETED"].includes(state);
}

// ---- learning curves ------------------------------------------------------------------------
const groupSelect = document.getElementById("curve-group");
const metricSelect = document.getElementById("curve-metric");
const logBox = document.getElementById("curve-log");
const info = document.getElementById("curve-info");
const curves = new Chart(document.getElementById("curves"), { name: "curves", logY: data.log, height: 360 });
logBox.checked = !!data.log;
let want = { group: data.group, metric: data.metric };

let curveGeneration = 0;
async function loadCurves(full = false) {
  const generation = ++curveGeneration;
  const params = new URLSearchParams({ width: String(curves.plotWidth()) });
  if (full) params.set("full", "1");
  if (want.group) params.set("group", want.group);
  if (want.metric) params.set("metric", want.metric);
  let payload;
  try {
    payload = await api(`/ui/api/experiments/${data.experimentId}/curves?${params}`);
  } catch (error) {
    info.textContent = error.message;
    return;
  }
  if (generation !== curveGeneration) return;  // a newer request (other metric) is under way
  fillSelect(groupSelect, Object.keys(payload.groups), payload.group);
  fillSelect(metricSelect, payload.groups[payload.group] || [], payload.metric);
  want = { group: payload.group, metric: payload.metric };
  curves.setOptions({ yLabel: payload.metric });
  curves.setSeries(
    payload.trials
      .map((t, i) => ({ key: t.id, label: `trial ${t.id}`, x: t.x, y: t.y, color: colorFor(i) }))
      .filter((s) => s.x.length),  // colours stay with their trial as others start reporting
  );
  const shown = payload.trials.reduce((n, t) => n + t.x.length, 0);
  const total = payload.totalTrials ?? payload.trials.length;
  const which = total > payload.trials.length
    ? `best ${payload.trials.length} of ${total} trials by ${payload.searcherMetric}`
    : `${payload.trials.length} trials`;
  if (payload.preview) {
    // A sample of the reports came first (fast): now the whole curves.
    info.textContent = `${which} · preview of 1 in ${payload.preview} reports, loading all…`;
    document.getElementById("curves").dataset.preview = "true";
    return loadCurves(true);
  }
  info.textContent = `${which} · ${payload.reportedPoints} reports · ${shown} points sent`;
  document.getElementById("curves").dataset.preview = "false";
  document.getElementById("curves").dataset.loaded = "true";
}

function syncUrl() {
  const url = new URL(location.href);
  url.searchParams.set("group", want.group || "");
  url.searchParams.set("metric", want.metric || "");
  if (logBox.checked) url.searchParams.set("log", "1"); else url.searchParams.delete("log");
  history.replaceState(null, "", url);
}
groupSelect.addEventListener("change", () => { want = { group: groupSelect.value, metric: "" }; syncUrl(); loadCurves(); });
metricSelect.addEventListener("change", () => { want.metric = metricSelect.value; syncUrl(); loadCurves(); });
logBox.addEventListener("change", () => { curves.setLogY(logBox.checked); syncUrl(); });

// ---- hyperparameter vs. metric scatter ------------------------------------------------------
const hpSelect = document.getElementById("hp-name");
const hpChart = new Chart(document.getElementById("hp-chart"), { name: "hparams", scatter: true, height: 300 });
let hpData = null;

function drawHparams() {
  if (!hpData) return;
  const name = hpSelect.value;
  const points = hpData.trials.filter((t) => t.best !== null && t.best !== undefined && name in t.hparams);
  const values = points.map((t) => t.hparams[name]);
  const numeric = values.every((v) => typeof v === "number");
  let categories = null;
  let xs = values;
  if (!numeric) {
    categories = [...new Set(values.map((v) => JSON.stringify(v)))].sort();
    xs = values.map((v) => categories.indexOf(JSON.stringify(v)));
  }
  hpChart.setOptions({ categories, xLabel: name, yLabel: hpData.metric });
  hpChart.setSeries([{ key: "trials", label: hpData.metric, x: xs, y: points.map((t) => t.best), color: "#2f6fde" }]);
}

async function loadHparams() {
  hpData = await api(`/ui/api/experiments/${data.experimentId}/hparams`);
  fillSelect(hpSelect, hpData.hparams, hpSelect.value);
  drawHparams();
}
hpSelect.addEventListener("change", drawHparams);

// ---- live updates ---------------------------------------------------------------------------
poll(async () => {
  await refreshLive();
  return !terminal;
}, 2000);
poll(async () => {
  const wasTerminal = terminal;
  await Promise.all([loadCurves(), loadHparams()]);
  return !wasTerminal;
}, 3000);
