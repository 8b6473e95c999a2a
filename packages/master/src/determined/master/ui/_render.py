"""Jinja2 rendering for the web UI: the template environment, filters and versioned static URLs."""

from __future__ import annotations

import datetime
import functools
import hashlib
import json
import math
import pathlib
from typing import Any

import jinja2
from starlette.responses import HTMLResponse

from determined.master._wire import as_utc

HERE = pathlib.Path(__file__).parent
TEMPLATES_DIR = HERE / "templates"
STATIC_DIR = HERE / "static"
STATIC_PREFIX = "/ui/static"


@functools.lru_cache(maxsize=1)
def static_version() -> str:
    """A short digest of every static file: changes whenever one does, so browsers refetch."""
    digest = hashlib.sha256()
    for path in sorted(STATIC_DIR.rglob("*")):
        if path.is_file():
            digest.update(path.name.encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def static_url(name: str) -> str:
    """The URL of static file ``name`` with a cache-busting version."""
    return f"{STATIC_PREFIX}/{name}?v={static_version()}"


def fmt_time(value: datetime.datetime | None) -> str:
    """A UTC timestamp as ``YYYY-MM-DD HH:MM:SS`` (the page's script shows it in local time)."""
    utc = as_utc(value)
    return utc.strftime("%Y-%m-%d %H:%M:%S") if utc else ""


def iso_time(value: datetime.datetime | None) -> str:
    utc = as_utc(value)
    return utc.isoformat().replace("+00:00", "Z") if utc else ""


def fmt_number(value: Any) -> str:
    """A metric value short enough for a table cell."""
    if value is None or value == "":
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "∞" if value > 0 else "-∞"
        return f"{value:.6g}"
    return str(value)


def fmt_size(value: Any) -> str:
    """Bytes as a human-readable size."""
    try:
        size = float(value or 0)
    except (TypeError, ValueError):
        return str(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"  # pragma: no cover - loop always returns


def fmt_percent(value: float | None) -> str:
    if value is None:
        return ""
    return f"{max(0.0, min(1.0, float(value))) * 100:.0f}%"


def fmt_hparam(value: Any) -> str:
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return fmt_number(value)


def state_name(value: str | None) -> str:
    """``STATE_ACTIVE``/``ACTIVE`` -> ``ACTIVE``."""
    text = value or ""
    return text[len("STATE_") :] if text.startswith("STATE_") else text


def to_json(value: Any) -> str:
    """JSON for embedding in a ``<script type="application/json">`` block."""
    return json.dumps(value).replace("</", "<\\/")


@functools.lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES_DIR)),
        autoescape=jinja2.select_autoescape(["html"]),
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )
    env.globals["static"] = static_url
    env.filters.update(
        time=fmt_time,
        iso=iso_time,
        num=fmt_number,
        size=fmt_size,
        percent=fmt_percent,
        hparam=fmt_hparam,
        state=state_name,
        tojson_script=to_json,
    )
    return env


def render(template: str, status_code: int = 200, /, **context: Any) -> HTMLResponse:
    """Render ``template`` as an HTML response (never cached: pages show live state)."""
    html = environment().get_template(template).render(**context)
    return HTMLResponse(html, status_code=status_code, headers={"Cache-Control": "no-store"})


def render_fragment(template: str, /, **context: Any) -> str:
    return environment().get_template(template).render(**context)
