// The experiment list: filters apply on change; rows refresh live (state, progress, best metric).
import { poll, refreshRegions } from "./common.js";

const list = document.getElementById("experiment-list");
const form = document.getElementById("filters");

for (const id of ["filter-state", "filter-owner", "filter-archived", "filter-limit"]) {
  document.getElementById(id)?.addEventListener("change", () => form.requestSubmit());
}

if (list) poll(() => refreshRegions(list, list.dataset.live), 3000);
