// Compare trials of any experiments: pick them, overlay their curves, line up their hparams.
import { api, el, fillSelect, fmt, pageData, poll } from "./common.js";
import { Chart, colorFor } from "./chart.js";

const state = pageData();
const selected = state.trials.map(Number);
let want = { group: state.group, metric: state.metric };

const query = document.getElementById("picker-query");
const results = document.querySelector("#picker-results tbody");
const chips = document.getElementById("selected-trials");
const groupSelect = document.getElementById("curve-group");
const metricSelect = document.getElementById("curve-metric");
const logBox = document.getElementById("curve-log");
const info = document.getElementById("curve-info");
const table = document.getElementById("compare-table");
const chart = new Chart(document.getElementById("curves"), { name: "compare", height: 360, logY: state.log });
logBox.checked = !!state.log;
let last = null;

function syncUrl() {
  const url = new URL(location.href);
  url.searchParams.set("trials", selected.join(","));
  for (const [k, v] of Object.entries(want)) url.searchParams.set(k, v || "");
  if (logBox.checked) url.searchParams.set("log", "1"); else url.searchParams.delete("log");
  history.replaceState(null, "", url);
}

function renderChips() {
  chips.replaceChildren(
    ...selected.map((id) =>
      el("span", { class: "chip", "data-trial": id }, `trial ${id}`,
        el("button", { title: "Remove", "aria-label": `remove trial ${id}`, onclick: () => remove(id) }, "×")),
    ),
  );
  if (!selected.length) chips.append(el("span", { class: "muted" }, "none — search above and add trials"));
}

function add(id) {
  if (!selected.includes(id)) selected.push(id);
  follow();
}
function remove(id) {
  selected.splice(selected.indexOf(id), 1);
  follow();
}

async function search(event) {
  event?.preventDefault();
  const payload = await api(`/ui/api/trials/search?q=${encodeURIComponent(query.value)}`);
  results.replaceChildren(
    ...payload.trials.map((t) =>
      el("tr", { "data-trial": t.id },
        el("td", {}, el("button", { class: "add-trial", onclick: () => add(t.id), "data-trial": t.id }, "Add")),
        el("td", {}, el("a", { href: `/trials/${t.id}` }, `trial ${t.id}`)),
        el("td", {}, el("a", { href: `/experiments/${t.experimentId}` }, `${t.experimentName} #${t.experimentId}`)),
        el("td", {}, t.state.toLowerCase()),
        el("td", { class: "muted" }, Object.entries(t.hparams).map(([k, v]) => `${k}=${fmt(v)}`).join(" ")),
        el("td", { class: "num" }, t.best === null ? "" : `${t.searcherMetric} ${fmt(t.best)}`),
      ),
    ),
  );
  if (!payload.trials.length) results.append(el("tr", {}, el("td", { class: "empty" }, "No trials match.")));
}
document.getElementById("picker").addEventListener("submit", search);

function renderTable(payload) {
  const trials = payload.trials;
  const names = [];
  for (const t of trials) for (const k of Object.keys(t.hparams)) if (!names.includes(k)) names.push(k);
  table.tHead.replaceChildren(
    el("tr", {}, el("th", {}, ""), ...trials.map((t) => el("th", {}, el("a", { href: `/trials/${t.id}` }, `trial ${t.id}`)))),
  );
  const row = (title, cells, cls) => el("tr", { class: cls || "" }, el("th", {}, title), ...cells.map((c) => el("td", { class: "num" }, c)));
  table.tBodies[0].replaceChildren(
    row("experiment", trials.map((t) => el("a", { href: `/experiments/${t.experimentId}` }, `${t.experimentName} #${t.experimentId}`))),
    row("state", trials.map((t) => t.state.toLowerCase())),
    row("best searcher metric", trials.map((t) => (t.best === null ? "" : `${t.searcherMetric} ${fmt(t.best)}`))),
    row("latest searcher metric", trials.map((t) => fmt(t.latest))),
    ...names.map((n) => row(n, trials.map((t) => fmt(t.hparams[n])), "hp")),
  );
}

let curveGeneration = 0;
async function loadCurves(full = false) {
  const generation = ++curveGeneration;
  renderChips();
  syncUrl();
  if (!selected.length) {
    chart.setSeries([]);
    table.tHead.replaceChildren();
    table.tBodies[0].replaceChildren();
    info.textContent = "";
    return;
  }
  const params = new URLSearchParams({ trials: selected.join(","), width: String(chart.plotWidth()) });
  if (full) params.set("full", "1");
  if (want.group) params.set("group", want.group);
  if (want.metric) params.set("metric", want.metric);
  let payload;
  try {
    payload = await api(`/ui/api/curves?${params}`);
  } catch (error) {
    info.textContent = error.message;
    return;
  }
  if (generation !== curveGeneration) return;  // a newer request (other metric) is under way
  last = payload;
  fillSelect(groupSelect, Object.keys(payload.groups), payload.group);
  fillSelect(metricSelect, payload.groups[payload.group] || [], payload.metric);
  want = { group: payload.group, metric: payload.metric };
  syncUrl();
  chart.setOptions({ yLabel: payload.metric });
  chart.setSeries(
    payload.trials.map((t, i) => ({
      key: t.id, label: `trial ${t.id} (${t.experimentName} #${t.experimentId})`, x: t.x, y: t.y, color: colorFor(i),
    })),
  );
  renderTable(payload);
  if (payload.preview) {
    info.textContent = `${payload.trials.length} trials · preview of 1 in ${payload.preview} reports, loading all…`;
    return loadCurves(true);
  }
  info.textContent = `${payload.trials.length} trials · ${payload.reportedPoints} reports`;
  document.getElementById("curves").dataset.loaded = "true";
}

groupSelect.addEventListener("change", () => { want = { group: groupSelect.value, metric: "" }; loadCurves(); });
metricSelect.addEventListener("change", () => { want.metric = metricSelect.value; loadCurves(); });
logBox.addEventListener("change", () => { chart.setLogY(logBox.checked); syncUrl(); });

// Reload now, then keep reloading while a compared trial still runs.
const running = () => last && last.trials.some((t) => !["COMPLETED", "CANCELED", "ERROR"].includes(t.state));
let stop = null;
function follow() {
  if (stop) stop();
  stop = poll(async () => { await loadCurves(); return Boolean(running()); }, 3000);
}
renderChips();
follow();
