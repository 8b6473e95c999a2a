// Workspace and project pages: the "New workspace" / "New project" forms post to the REST API
// (which checks the user's roles again) and open what they created; a refusal is shown in place.
import { api } from "./common.js";

for (const form of document.querySelectorAll("form[data-create]")) {
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const kind = form.dataset.create;
    const error = document.getElementById(`new-${kind}-error`);
    const name = form.elements.name.value.trim();
    error.textContent = "";
    try {
      if (kind === "workspace") {
        const created = await api("/api/v1/workspaces", { method: "POST", body: { name } });
        location.href = `/workspaces/${created.workspace.id}`;
      } else {
        const workspaceId = Number(form.dataset.workspace);
        const description = form.elements.description?.value.trim() || "";
        const created = await api(`/api/v1/workspaces/${workspaceId}/projects`, {
          method: "POST",
          body: { name, workspaceId, description },
        });
        location.href = `/projects/${created.project.id}`;
      }
    } catch (failure) {
      error.textContent = failure.message;
    }
  });
}
