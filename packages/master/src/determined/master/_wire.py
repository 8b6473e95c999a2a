"""protojson conventions: camelCase keys, ``STATE_*`` enums, RFC 3339 timestamps, API errors."""

from __future__ import annotations

import datetime
import math
import re
from typing import Any

TERMINAL_STATES = ("COMPLETED", "CANCELED", "ERROR", "DELETED")
STOP_TO_TERMINAL = {
    "STOPPING_COMPLETED": "COMPLETED",
    "STOPPING_CANCELED": "CANCELED",
    "STOPPING_KILLED": "CANCELED",
    "STOPPING_ERROR": "ERROR",
}
"""Where each stopping state ends once nothing runs any more."""
STOPPING_STATES = ("STOPPING_COMPLETED", "STOPPING_CANCELED", "STOPPING_KILLED", "STOPPING_ERROR")
EXPERIMENT_STATES = (
    "ACTIVE",
    "PAUSED",
    *STOPPING_STATES,
    "COMPLETED",
    "CANCELED",
    "ERROR",
    "DELETING",
    "DELETE_FAILED",
    "DELETED",
)
"""Every state an experiment row holds (upstream's ``experimentv1.State`` without ``STATE_``)."""

# gRPC codes used in error bodies.
GRPC = {
    400: (3, "InvalidArgument"),
    401: (16, "Unauthenticated"),
    403: (7, "PermissionDenied"),
    404: (5, "NotFound"),
    409: (6, "AlreadyExists"),
    412: (9, "FailedPrecondition"),
    413: (8, "ResourceExhausted"),
    500: (13, "Internal"),
    503: (14, "Unavailable"),
}


class APIError(Exception):
    """An error answered as ``{"error": {"code", "reason", "error"}}`` with an HTTP status."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def bad_request(message: str) -> APIError:
    return APIError(400, message)


def not_found(message: str) -> APIError:
    return APIError(404, message)


def error_body(status: int, message: str) -> dict[str, Any]:
    code, reason = GRPC.get(status, (2, "Unknown"))
    return {"error": {"code": code, "reason": reason, "error": message}}


def ts(value: datetime.datetime | None) -> str | None:
    """RFC 3339 UTC timestamp (naive datetimes from SQLite are UTC)."""
    if value is None:
        return None
    if value.tzinfo is None:  # the common case, and the cheap one (a hot path of every listing)
        return value.isoformat() + "Z"
    return value.astimezone(datetime.timezone.utc).isoformat().replace("+00:00", "Z")


def parse_ts(value: Any) -> datetime.datetime | None:
    """Parse an RFC 3339 timestamp (or epoch seconds); None for empty."""
    if value in (None, ""):
        return None
    if isinstance(value, (int, float)):
        return datetime.datetime.fromtimestamp(float(value), datetime.timezone.utc)
    text = str(value).strip().replace("Z", "+00:00")
    # Python < 3.11 cannot parse more than 6 fractional digits.
    text = re.sub(r"(\.\d{6})\d+", r"\1", text)
    try:
        parsed = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise bad_request(f"invalid timestamp {value!r}: expected RFC 3339") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=datetime.timezone.utc)
    return parsed


def as_utc(value: datetime.datetime | None) -> datetime.datetime | None:
    if value is None:
        return None
    return value if value.tzinfo else value.replace(tzinfo=datetime.timezone.utc)


def state(name: str) -> str:
    """``ACTIVE`` -> ``STATE_ACTIVE``."""
    return name if name.startswith("STATE_") else f"STATE_{name}"


def unstate(name: str) -> str:
    """``STATE_ACTIVE`` -> ``ACTIVE``."""
    return name[len("STATE_") :] if name.startswith("STATE_") else name


def snake(name: str) -> str:
    """camelCase -> snake_case."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def numeric_id(text: str) -> int | None:
    """``text`` as a database id when it spells one (ASCII digits, at most 18: always within 64
    bits), else None; ``str.isdigit`` also accepts characters like "²" that ``int`` refuses."""
    if text.isascii() and text.isdigit() and len(text) <= 18:
        return int(text)
    return None


def get(body: dict[str, Any], name: str, default: Any = None) -> Any:
    """Read field ``name`` (snake_case) from a body that may use camelCase or snake_case."""
    if name in body:
        return body[name]
    parts = name.split("_")
    camel = parts[0] + "".join(p[:1].upper() + p[1:] for p in parts[1:])
    return body.get(camel, default)


def sub_object(body: dict[str, Any], name: str) -> dict[str, Any]:
    """``body[name]`` when it is an object (a wrapped message), else ``body`` itself."""
    value = get(body, name)
    return value if isinstance(value, dict) else body


def clean_float(value: Any) -> Any:
    """JSON-safe numbers: NaN/Infinity become the strings protojson uses."""
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
    if isinstance(value, dict):
        return {k: clean_float(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clean_float(v) for v in value]
    return value


def to_float(value: Any) -> float | None:
    """A metric value as a float, accepting protojson's "NaN"/"Infinity" strings; None otherwise."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str) and value in ("NaN", "Infinity", "-Infinity"):
        return float(value.replace("Infinity", "inf"))
    return None


def pagination(offset: int, limit: int, shown: int, total: int) -> dict[str, int]:
    """Upstream's ``pagination`` object for a page of ``shown`` items out of ``total``."""
    return {
        "offset": offset,
        "limit": limit,
        "startIndex": min(offset, total),
        "endIndex": min(offset + shown, total),
        "total": total,
    }
