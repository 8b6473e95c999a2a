"""Notebooks: JupyterLab as a generic task behind the master's reverse proxy.

A notebook is a proxied task (:mod:`._tasks`) running ``python3 -m jupyterlab`` in the task's work
directory, where the uploaded context is extracted, so the context's files are the notebook's
files. JupyterLab serves under ``/proxy/<task_id>/`` on the port the task service gives it. On this
machine's resource manager it listens on 127.0.0.1 only and has no token of its own: the master's
proxy authenticates every request. Where the task runs on another host (Ray, Slurm) it must listen
on the network, so it also gets a random token, which its ``serviceAddress`` carries.

Idle timeout (upstream's ``idle_timeout`` and ``notebook_idle_type`` task config): the task service
kills a task that saw no proxied traffic for ``idle_timeout``; this service adds Jupyter's own
activity. A poller asks each running notebook with an idle timeout what it is doing and records
activity (``Tasks.touch``) while it is busy in the sense of ``notebook_idle_type``:

- ``kernels_or_terminals`` (default): a kernel or a terminal is running;
- ``kernel_connections``: a kernel has a client connected;
- ``activity``: Jupyter's ``/api/status`` ``last_activity`` moved since the previous look.

Upstream's ``PUT /api/v1/notebooks/{id}/report_idle`` (a notebook reporting on itself) is kept:
``idle: false`` records activity the same way.
"""

from __future__ import annotations

import dataclasses
import logging
import secrets
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from determined.master._core._tasks import Tasks, TaskSpec, TaskView
from determined.master._wire import APIError
from determined.master.db import User

logger = logging.getLogger("determined.master")

KIND = "NOTEBOOK"
IDLE_TYPES = ("kernels_or_terminals", "kernel_connections", "activity")
DEFAULT_IDLE_TYPE = "kernels_or_terminals"
POLL_PERIOD_S = 1.0
"""How often the poller asks running notebooks whether they are busy."""
DEFAULT_SLOTS = 1
"""Upstream's default ``resources.slots`` of a notebook."""


@dataclasses.dataclass(frozen=True)
class NotebookLaunch:
    """A parsed ``POST /api/v1/notebooks``."""

    config: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    context: bytes | None = None
    workspace_id: int = 1


def notebook_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """The config a notebook runs with: the request's plus the defaults (400 naming a bad field)."""
    full = dict(config)
    idle_type = full.setdefault("notebook_idle_type", DEFAULT_IDLE_TYPE)
    if idle_type not in IDLE_TYPES:
        raise APIError(400, f"notebook_idle_type: must be one of {', '.join(IDLE_TYPES)}")
    resources = full.get("resources")
    if resources is None:
        resources = {}
    if not isinstance(resources, dict):
        raise APIError(400, "resources: must be an object")
    full["resources"] = {"slots": DEFAULT_SLOTS, **resources}
    full.setdefault("description", f"JupyterLab ({secrets.token_hex(3)})")
    return full


def service_address(view: TaskView) -> str:
    """Where a notebook is served under the master: its proxy path, with its token if it has one."""
    token = (view.extra or {}).get("jupyterToken")
    return f"{view.base_path}lab?token={token}" if token else view.base_path


class Notebooks:
    """Launch, list and kill notebook tasks; watch Jupyter's activity for the idle timeout.

    Args:
        tasks: the task service that places, proxies and kills the notebooks.
        bind_host: where JupyterLab listens: 127.0.0.1 where tasks run on the master's host,
            else 0.0.0.0 (and the notebook gets a token).
        poll_period: seconds between looks at the running notebooks' activity.
    """

    def __init__(
        self, tasks: Tasks, bind_host: str = "127.0.0.1", poll_period: float = POLL_PERIOD_S
    ) -> None:
        self._tasks = tasks
        self._bind_host = bind_host
        self._poll_period = poll_period
        self._last_status: dict[str, str] = {}
        self._watched: dict[str, dict[str, Any]] = {}  # task id -> its record's extra
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    # ------------------------------------------------------------------------------- launch

    def launch(self, owner: User, launch: NotebookLaunch) -> TaskView:
        """Start JupyterLab in the context directory (400 naming a bad config field)."""
        config = notebook_config(launch.config)
        extra: dict[str, Any] = {"idleType": config["notebook_idle_type"]}
        argv = [
            "python3",
            "-m",
            "jupyterlab",
            "--no-browser",
            f"--ip={self._bind_host}",
            "--port={port}",
            "--ServerApp.base_url={base_path}",
            "--ServerApp.root_dir={work_dir}",
            "--ServerApp.password=",
            # the proxy forwards the browser's Host header; the proxy is the gatekeeper
            "--ServerApp.allow_remote_access=True",
            "--ServerApp.allow_root=True",
        ]
        if self._bind_host in ("127.0.0.1", "localhost", "::1"):
            argv.append("--IdentityProvider.token=")
        else:
            token = secrets.token_urlsafe(24)
            extra["jupyterToken"] = token
            argv.append(f"--IdentityProvider.token={token}")
        spec = TaskSpec(
            kind=KIND,
            owner_id=owner.id,
            argv=argv,
            config=config,
            description=str(config["description"]),
            context=launch.context,
            proxied=True,
            extra=extra,
            workspace_id=launch.workspace_id,
        )
        view = self._tasks.start(spec)
        with self._lock:
            self._watched[view.task_id] = dict(view.extra)
        self._start_poller()
        return view

    # ------------------------------------------------------------------------- read / kill

    def get(self, notebook_id: str) -> TaskView:
        """The notebook task, or a 404 naming it."""
        view = self._tasks.get(notebook_id)
        if view is None or view.kind != KIND:
            raise APIError(404, f"notebook {notebook_id} not found")
        return view

    def list(self, owner_ids: Sequence[int] | None = None) -> list[TaskView]:
        """Every notebook task (of ``owner_ids`` when given)."""
        return self._tasks.list(kind=KIND, owner_ids=list(owner_ids) if owner_ids else None)

    def kill(self, notebook_id: str, user: User) -> TaskView:
        """Stop a notebook (its owner or an admin)."""
        self.get(notebook_id)
        return self._tasks.kill(notebook_id, user)

    def report_idle(self, notebook_id: str, idle: bool, user: User) -> None:
        """Upstream's idle report: a busy notebook (``idle`` false) defers its idle timeout."""
        view = self.get(notebook_id)
        if not user.admin and user.id != view.owner_id:
            raise APIError(403, f"only the owner of notebook {notebook_id} or an admin may do this")
        if not idle and not view.done:
            self._tasks.touch(notebook_id)

    # ------------------------------------------------------------------------------ activity

    def _start_poller(self) -> None:
        with self._lock:
            if self._thread is not None or self._stop.is_set():
                return
            self._thread = threading.Thread(
                target=self._run, name="det-notebook-activity", daemon=True
            )
            self._thread.start()

    def close(self) -> None:
        """Stop the activity poller."""
        self._stop.set()
        thread = self._thread
        if thread is not None:
            thread.join(timeout=5)

    def _run(self) -> None:
        with httpx.Client(timeout=2.0, trust_env=False) as http:
            while not self._stop.wait(self._poll_period):
                try:
                    self.poll(http)
                except Exception:
                    logger.exception("master: watching notebooks' activity failed")

    def poll(self, http: httpx.Client) -> None:
        """Look at every running notebook that has an idle timeout; touch the busy ones.

        Reads the task service's in-memory state only (no database read per look)."""
        live = {t.task_id: t for t in self._tasks.runs.live() if t.kind == KIND}
        with self._lock:
            for gone in set(self._watched) - set(live):
                del self._watched[gone]
                self._last_status.pop(gone, None)
            watched = dict(self._watched)
        for task_id, extra in watched.items():
            task = live[task_id]
            if not task.ready or task.exited or task.kill_reason is not None:
                continue
            if task.idle_timeout is None or task.port is None:
                continue
            base = f"http://{_host(task.address)}:{task.port}/proxy/{task_id}/api/"
            try:
                busy = self._busy(http, task_id, base, extra)
            except (httpx.HTTPError, ValueError) as exc:
                logger.debug("master: notebook %s did not answer: %s", task_id, exc)
                continue
            if busy:
                self._tasks.touch(task_id)

    def _busy(self, http: httpx.Client, task_id: str, base: str, extra: dict[str, Any]) -> bool:
        """Whether Jupyter is busy in the sense of the notebook's ``notebook_idle_type``."""
        token = extra.get("jupyterToken")
        headers = {"Authorization": f"token {token}"} if token else {}
        idle_type = extra.get("idleType") or DEFAULT_IDLE_TYPE
        if idle_type == "activity":
            # /api/status does not count as activity itself; the other API routes do.
            status = _get_json(http, base + "status", headers)
            last = str(status.get("last_activity") or "")
            previous = self._last_status.get(task_id)
            self._last_status[task_id] = last
            return previous is not None and last != previous
        kernels = _get_json(http, base + "kernels", headers)
        if idle_type == "kernel_connections":
            return any(int(k.get("connections") or 0) > 0 for k in kernels)
        terminals = _get_json(http, base + "terminals", headers)
        return bool(kernels) or bool(terminals)


def _host(address: str | None) -> str:
    host = address or "127.0.0.1"
    return f"[{host}]" if ":" in host else host


def _get_json(http: httpx.Client, url: str, headers: Mapping[str, str]) -> Any:
    response = http.get(url, headers=dict(headers))
    response.raise_for_status()
    return response.json()
