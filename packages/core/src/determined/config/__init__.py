"""Experiment configuration: parsing, defaults and two-phase validation.

Phase 1 (:func:`sanity_check`) looks at the user's config alone: unknown keys, types, enums, ranges.
Phase 2 runs after the caller's defaults and det's schema defaults are merged in, and enforces the
fields every experiment eventually needs. Errors always name the full field path
(``bind_mounts[0].host_path: must be an absolute path``), and all of them are reported at once::

    from determined import config as expconf

    validated = expconf.validate_experiment_config(yaml_text, defaults=master_defaults)
    validated.config    # fully defaulted
    validated.warnings  # deprecations
"""

from __future__ import annotations

from determined.config._defaults import merge
from determined.config._errors import InvalidConfigError, ValidatedConfig
from determined.config._hparams import flatten_hparams
from determined.config._overrides import apply_overrides
from determined.config._searcher import REMOVED_SEARCHERS, SEARCHERS, searcher_length
from determined.config._sections import STORAGE_TYPES
from determined.config._validate import sanity_check, validate_experiment_config

__all__ = [
    "REMOVED_SEARCHERS",
    "SEARCHERS",
    "STORAGE_TYPES",
    "InvalidConfigError",
    "ValidatedConfig",
    "apply_overrides",
    "flatten_hparams",
    "merge",
    "sanity_check",
    "searcher_length",
    "validate_experiment_config",
]
