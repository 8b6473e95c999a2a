// "Open TensorBoard": start (or reuse) a TensorBoard over an experiment or a selection of trials
// and open it, through the master's proxy, in a new tab.
//
// A button with `data-tensorboard-experiment="ID"` shows that experiment, one with
// `data-tensorboard-trial="ID"` that trial; `#tensorboard-selected` shows the trials whose
// `.trial-select` boxes are checked. A running TensorBoard of the same
// user over the same experiments and trials is reused, as upstream's web UI does.
import { api } from "./common.js";

const sameIds = (a, b) => a.length === b.length && [...a].sort().every((x, i) => x === [...b].sort()[i]);

async function findOrLaunch(experimentIds, trialIds) {
  const me = (await api("/api/v1/me")).user;
  const params = new URLSearchParams({ users: me.username });
  const { tensorboards } = await api(`/api/v1/tensorboards?${params}`);
  const running = (tensorboards || []).find(
    (tb) =>
      !["STATE_TERMINATING", "STATE_TERMINATED"].includes(tb.state) &&
      sameIds(tb.experimentIds || [], experimentIds) &&
      sameIds(tb.trialIds || [], trialIds),
  );
  if (running) return running;
  const body = trialIds.length ? { trialIds } : { experimentIds };
  return (await api("/api/v1/tensorboards", { method: "POST", body })).tensorboard;
}

async function waitReady(id) {
  for (;;) {
    const { tensorboard } = await api(`/api/v1/tensorboards/${id}`);
    if (tensorboard.isReady) return tensorboard;
    if (tensorboard.state === "STATE_TERMINATED") {
      throw new Error(`TensorBoard ${id} ended: ${tensorboard.exitStatus || "it exited"}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}

export async function openTensorBoard({ experimentIds = [], trialIds = [] }) {
  // Open the tab now, inside the click, so no popup blocker stops it; fill it in when ready.
  const tab = window.open("", "_blank");
  if (tab) tab.document.title = "Starting TensorBoard…";
  if (tab) tab.document.body.textContent = "Starting TensorBoard…";
  try {
    const tensorboard = await waitReady((await findOrLaunch(experimentIds, trialIds)).id);
    if (tab) tab.location.href = tensorboard.serviceAddress;
    else location.href = tensorboard.serviceAddress;
  } catch (error) {
    if (tab) tab.close();
    window.alert(`TensorBoard failed: ${error.message}`);
  }
}

function selectedTrials() {
  return [...document.querySelectorAll(".trial-select:checked")].map((box) => Number(box.value));
}

function syncSelectedButton() {
  const button = document.getElementById("tensorboard-selected");
  if (button) button.disabled = selectedTrials().length === 0;
}

document.addEventListener("click", (event) => {
  const button = event.target.closest(
    "[data-tensorboard-experiment], [data-tensorboard-trial], #tensorboard-selected",
  );
  if (!button) return;
  if (button.id === "tensorboard-selected") {
    const trialIds = selectedTrials();
    if (trialIds.length) openTensorBoard({ trialIds });
  } else if (button.dataset.tensorboardTrial) {
    openTensorBoard({ trialIds: [Number(button.dataset.tensorboardTrial)] });
  } else {
    openTensorBoard({ experimentIds: [Number(button.dataset.tensorboardExperiment)] });
  }
});
document.addEventListener("change", syncSelectedButton);
document.addEventListener("region-updated", syncSelectedButton);
