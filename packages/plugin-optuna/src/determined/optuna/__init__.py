"""det.optuna: the ``optuna`` searcher, Optuna's samplers under det's early stopping.

- :class:`OptunaSearch`: the search method (a :class:`determined.searcher.SearchMethod`) for
  ``searcher: {name: optuna, sampler: tpe|cmaes|gp|random|qmc, pruner: {type: asha|...}, ...}``.
- :func:`build_search_method`: ``OptunaSearch`` for a whole experiment config whose
  ``searcher.name`` is ``optuna``, ``None`` for other names (like det-master's built-ins).
- :data:`SAMPLERS`, :data:`PRUNERS`: the accepted ``sampler`` and ``pruner.type`` names.

det-master finds the searcher through this distribution's entry point; nothing needs importing.
Names load on first use, so ``import determined.optuna`` does not import Optuna.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from determined.core.plugins import lazy_exports

if TYPE_CHECKING:
    from determined.optuna._search import OptunaSearch as OptunaSearch
    from determined.optuna._search import build_search_method as build_search_method
    from determined.optuna._settings import PRUNERS as PRUNERS
    from determined.optuna._settings import SAMPLERS as SAMPLERS

_EXPORTS = {
    "OptunaSearch": "determined.optuna._search",
    "build_search_method": "determined.optuna._search",
    "PRUNERS": "determined.optuna._settings",
    "SAMPLERS": "determined.optuna._settings",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
