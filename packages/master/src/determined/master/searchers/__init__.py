"""det-master's hyperparameter search: the ``Searcher`` wrapper, the built-in methods and preview.

The built-in methods (``single``, ``random``, ``grid``, ``async_halving``, ``adaptive_asha``,
``pbt``) are offered to the master through the ``det_search_method`` hook by
``determined.master.searchers._plugin``.
"""

from determined.master.searchers._adaptive_asha import (
    AdaptiveASHASearch,
    Bracket,
    bracket_max_concurrent_trials,
    bracket_max_trials,
    make_brackets,
)
from determined.master.searchers._asha import AsyncHalvingSearch, rung_units
from determined.master.searchers._grid import GridSearch
from determined.master.searchers._pbt import PBTConfig, PBTSearch, explore
from determined.master.searchers._plugin import BUILTIN_SEARCHERS, build_search_method
from determined.master.searchers._preview import preview
from determined.master.searchers._random import RandomSearch
from determined.master.searchers._searcher import Searcher

__all__ = [
    "BUILTIN_SEARCHERS",
    "AdaptiveASHASearch",
    "AsyncHalvingSearch",
    "Bracket",
    "GridSearch",
    "PBTConfig",
    "PBTSearch",
    "RandomSearch",
    "Searcher",
    "bracket_max_concurrent_trials",
    "bracket_max_trials",
    "build_search_method",
    "explore",
    "make_brackets",
    "preview",
    "rung_units",
]
