"""The hyperparameter-search interface: search methods, their actions, the RNG and sampling helpers.

Built-in methods (``single``, ``random``, ``grid``, ``async_halving``, ``adaptive_asha``, ``pbt``)
live in det-master (``determined.master.searchers``); a third party implements
:class:`SearchMethod` and returns it from the ``det_search_method`` hook.
"""

from determined.searcher._actions import (
    Action,
    Create,
    ExitedReason,
    Shutdown,
    Stop,
    action_from_dict,
)
from determined.searcher._method import SearchContext, SearchMethod
from determined.searcher._nprand import RandomState
from determined.searcher._sampling import (
    grid_axis,
    grid_size,
    hparam_grid,
    new_create,
    new_request_id,
    round_half_away,
    sample_hparams,
    sample_one,
)

__all__ = [
    "Action",
    "Create",
    "ExitedReason",
    "RandomState",
    "SearchContext",
    "SearchMethod",
    "Shutdown",
    "Stop",
    "action_from_dict",
    "grid_axis",
    "grid_size",
    "hparam_grid",
    "new_create",
    "new_request_id",
    "round_half_away",
    "sample_hparams",
    "sample_one",
]
