"""Upstream's small ``determined.common.api`` helpers: the default master and paginated reads."""

from __future__ import annotations

import enum
import os
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from determined.common.api._messages import v1LaunchWarning

T = TypeVar("T")

WARNING_MESSAGE_MAP = {
    v1LaunchWarning.CURRENT_SLOTS_EXCEEDED: (
        "Warning: The requested job requires more slots than currently available. "
        "You may need to increase cluster resources in order for the job to run."
    )
}
"""What to tell the user for each warning the master attaches to a launched job."""


class PageOpts(str, enum.Enum):
    """How many pages :func:`read_paginated` reads: one, or all of them."""

    single = "1"
    all = "all"


def get_default_master_url() -> str:
    """The master address from ``$DET_MASTER`` (or ``$DET_MASTER_ADDR``), else ``localhost:8080``;
    not canonicalized (see ``canonicalize_master_url``)."""
    return os.environ.get("DET_MASTER", os.environ.get("DET_MASTER_ADDR", "localhost:8080"))


def read_paginated(
    get_with_offset: Callable[[int], T], offset: int = 0, pages: PageOpts = PageOpts.all
) -> Iterator[T]:
    """Yield the pages of a listing: ``get_with_offset(offset)`` answers one page (a bindings
    response with a ``pagination``), and the next offset is that page's ``endIndex``."""
    while True:
        page = get_with_offset(offset)
        pagination: Any = getattr(page, "pagination", None)
        if pagination is None or pagination.endIndex is None or pagination.total is None:
            raise ValueError(f"read_paginated: {type(page).__name__} has no pagination")
        yield page
        if pagination.endIndex >= pagination.total or pages == PageOpts.single:
            return
        offset = pagination.endIndex
