"""The entry point det's plugin manager loads (group ``determined``, name ``optuna``).

Kept light: Optuna is imported only when an experiment asks for ``searcher.name: optuna``, so every
other process that builds the plugin manager (trials, the CLI) does not pay for it.
"""

from __future__ import annotations

from typing import Any

from determined.core.plugins import hookimpl
from determined.searcher import SearchMethod


@hookimpl
def det_search_method(config: dict[str, Any]) -> SearchMethod | None:
    """Provide the ``optuna`` searcher; ``None`` for every other searcher name."""
    section = config.get("searcher")
    if not isinstance(section, dict) or section.get("name") != "optuna":
        return None
    from determined.optuna._search import OptunaSearch

    return OptunaSearch(config)
