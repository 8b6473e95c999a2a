// Shared helpers of the det web UI: JSON fetches, live regions, polling, local times.

/** GET/POST JSON with the session cookie; a 401 sends the browser to the login page. */
export async function api(path, { method = "GET", body } = {}) {
  const response = await fetch(path, {
    method,
    credentials: "same-origin",
    headers: body === undefined ? {} : { "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (response.status === 401) {
    toLogin();
    throw new Error("signed out");
  }
  const text = await response.text();
  const data = text ? JSON.parse(text) : {};
  if (!response.ok) {
    const message = (data.error && (data.error.error || data.error.message)) || response.statusText;
    throw new Error(`${response.status}: ${message}`);
  }
  return data;
}

export function toLogin() {
  const next = location.pathname + location.search;
  location.href = "/login?next=" + encodeURIComponent(next);
}

/** Replace every `[data-region]` element of `container` by its namesake in the fetched HTML. */
export async function refreshRegions(container, url) {
  const response = await fetch(url, { credentials: "same-origin" });
  if (response.status === 401) return toLogin();
  if (!response.ok) return;
  const template = document.createElement("template");
  template.innerHTML = await response.text();
  for (const fresh of template.content.querySelectorAll("[data-region]")) {
    const old = container.querySelector(`[data-region="${fresh.dataset.region}"]`);
    if (old && old.innerHTML !== fresh.innerHTML) {
      old.replaceWith(fresh);
      localTimes(fresh);
      container.dispatchEvent(new CustomEvent("region-updated", { detail: fresh.dataset.region }));
    }
  }
}

/**
 * Call `task` now and then every `ms` while the page is visible, until it returns false.
 * A failing task is retried on the next tick. Returns a function that stops the polling.
 */
export function poll(task, ms) {
  let timer = null;
  let stopped = false;
  const tick = async () => {
    timer = null;
    if (stopped) return;
    if (document.hidden) {
      timer = setTimeout(tick, ms);
      return;
    }
    let again = true;
    try {
      again = (await task()) !== false;
    } catch (error) {
      console.warn("det: refresh failed", error);
    }
    if (again && !stopped) timer = setTimeout(tick, ms);
  };
  tick();
  return () => {
    stopped = true;
    if (timer) clearTimeout(timer);
  };
}

/** Show `<time datetime>` elements in the browser's time zone. */
export function localTimes(root = document) {
  for (const el of root.querySelectorAll("time[datetime]")) {
    const date = new Date(el.getAttribute("datetime"));
    if (!isNaN(date)) {
      el.textContent = date.toLocaleString();
      el.title = el.getAttribute("datetime");
    }
  }
}

/** The JSON a page embedded for its script. */
export function pageData() {
  const el = document.getElementById("page-data");
  return el ? JSON.parse(el.textContent) : {};
}

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (value !== undefined && value !== null && value !== false) node.setAttribute(key, value);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

export function fmt(value) {
  if (value === null || value === undefined || value === "") return "";
  if (typeof value === "number") {
    if (Number.isInteger(value)) return String(value);
    return Number(value.toPrecision(6)).toString();
  }
  if (typeof value === "object") return JSON.stringify(value);
  return String(value);
}

/** Fill a <select> with `values`, keeping `wanted` selected when present. */
export function fillSelect(select, values, wanted) {
  const current = wanted ?? select.value;
  select.replaceChildren(...values.map((v) => el("option", { value: v }, v)));
  if (values.includes(current)) select.value = current;
  return select.value;
}

document.addEventListener("DOMContentLoaded", () => localTimes());

/** The admins' cluster-wide message, shown under the top bar of every page while it is active. */
async function showClusterMessage() {
  let info;
  try {
    const response = await fetch("/api/v1/master", { credentials: "same-origin" });
    if (!response.ok) return;
    info = await response.json();
  } catch {
    return;
  }
  const notice = info.clusterMessage;
  const header = document.querySelector("header.topbar");
  if (!notice || !notice.message || !header || document.getElementById("cluster-message")) return;
  const banner = document.createElement("div");
  banner.id = "cluster-message";
  banner.className = "cluster-message";
  banner.setAttribute("role", "status");
  banner.textContent = notice.message;
  header.after(banner);
}

showClusterMessage();
