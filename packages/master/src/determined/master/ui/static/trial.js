// One trial: live status and checkpoints, a chart per metric and group, logs with a live tail.
import { api, el, pageData, poll, refreshRegions } from "./common.js";
import { Chart } from "./chart.js";

const data = pageData();
const liveUrl = `/ui/partials/trials/${data.trialId}`;
let terminal = data.terminal;

async function refreshLive() {
  await refreshRegions(document, liveUrl);
  const state = document.querySelector("#trial-state")?.dataset.state || "";
  terminal = ["COMPLETED", "CANCELED", "ERROR", "DELETED"].includes(state);
}

// ---- metric charts --------------------------------------------------------------------------
const grid = document.getElementById("metric-charts");
const logBox = document.getElementById("metrics-log");
const charts = new Map();

async function loadMetrics() {
  const width = Math.max(300, Math.floor(grid.clientWidth / 2));
  const payload = await api(`/ui/api/trials/${data.trialId}/metrics?width=${width}`);
  if (!payload.charts.length) {
    grid.replaceChildren(el("p", { class: "muted" }, "No metrics reported yet."));
    charts.clear();
    return;
  }
  if (!charts.size) grid.replaceChildren();
  for (const c of payload.charts) {
    const key = `${c.group}/${c.metric}`;
    let chart = charts.get(key);
    if (!chart) {
      const box = el("div", { class: "chart" });
      const card = el("div", { class: "chart-card", "data-key": key }, el("h3", {}, `${c.metric} `, el("span", { class: "muted" }, `(${c.group})`)), box);
      grid.append(card);
      chart = new Chart(box, { name: key, height: 220, logY: logBox.checked, yLabel: c.metric });
      charts.set(key, chart);
    }
    chart.setSeries([{ key, label: `${c.metric} (${c.group})`, x: c.x, y: c.y }]);
  }
  grid.dataset.loaded = "true";
}
logBox.addEventListener("change", () => { for (const c of charts.values()) c.setLogY(logBox.checked); });

// ---- logs -----------------------------------------------------------------------------------
const logBoxEl = document.getElementById("logs");
const rank = document.getElementById("log-rank");
const level = document.getElementById("log-level");
const text = document.getElementById("log-text");
const follow = document.getElementById("log-follow");
const status = document.getElementById("log-status");
const MAX_LINES = 5000;
let last = 0;
let generation = 0;
let quietDoneTicks = 0;  // polls that found the trial finished and no new lines

function logQuery() {
  const params = new URLSearchParams();
  if (rank.value) params.set("rank", rank.value);
  if (level.value) params.set("level", level.value);
  if (text.value) params.set("q", text.value);
  if (last) params.set("after", String(last));
  return params;
}

function appendLines(lines) {
  const atBottom = logBoxEl.scrollTop + logBoxEl.clientHeight >= logBoxEl.scrollHeight - 4;
  const fragment = document.createDocumentFragment();
  for (const line of lines) {
    const when = line.time ? new Date(line.time).toLocaleTimeString() : "";
    const rankText = line.rank === null || line.rank === undefined ? "" : `[rank=${line.rank}] `;
    fragment.append(
      el("span", { class: `line lv-${line.level}`, "data-id": line.id },
        el("span", { class: "meta" }, `${when} ${rankText}${line.level.padEnd(7)} `), line.text, "\n"),
    );
  }
  logBoxEl.append(fragment);
  while (logBoxEl.childElementCount > MAX_LINES) logBoxEl.firstElementChild.remove();
  if (follow.checked && (atBottom || lines.length)) logBoxEl.scrollTop = logBoxEl.scrollHeight;
}

// One logs request at a time: a filter change's pull and the tail's next tick, both in flight
// with the same `after`, would each append the same lines.
let pulling = Promise.resolve(true);
function pullLogs() {
  pulling = pulling.then(pullOnce, pullOnce);
  return pulling;
}

async function pullOnce() {
  const mine = generation;
  const payload = await api(`/ui/api/trials/${data.trialId}/logs?${logQuery()}`);
  if (mine !== generation) return true;  // filters changed meanwhile
  if (payload.logs.length) appendLines(payload.logs);
  last = payload.last || last;
  quietDoneTicks = payload.done && !payload.logs.length ? quietDoneTicks + 1 : 0;
  status.textContent = payload.done ? "trial finished" : "following…";
  logBoxEl.dataset.last = String(last);
  return true;
}

function resetLogs() {
  generation++;
  last = 0;
  logBoxEl.replaceChildren();
  pullLogs();
}
for (const input of [rank, level]) input.addEventListener("change", resetLogs);
let typing = null;
text.addEventListener("input", () => { clearTimeout(typing); typing = setTimeout(resetLogs, 250); });

// ---- live updates ---------------------------------------------------------------------------
poll(async () => { await refreshLive(); return !terminal; }, 2000);
poll(async () => { const was = terminal; await loadMetrics(); return !was; }, 3000);
poll(async () => { await pullLogs(); return quietDoneTicks < 3; }, 1000);
