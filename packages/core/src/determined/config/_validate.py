"""Two-phase validation of an experiment config: sanity on the user's input, completeness after defaults."""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any

import yaml

from determined.config import _checks as c
from determined.config import _defaults, _hparams, _searcher, _sections
from determined.config._checks import Context, describe, join
from determined.config._errors import InvalidConfigError, ValidatedConfig

_LEGACY_ENTRYPOINT = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
_LENGTH_REASON = "the training loop decides when to validate and checkpoint"


class _Loader(yaml.SafeLoader):  # type: ignore[misc]
    """SafeLoader without timestamp parsing: dates stay strings, so the config stays JSON."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def parse(raw: str | bytes | Mapping[str, Any] | None) -> dict[str, Any]:
    """Parse YAML text (or copy a mapping) into a config dict; raise InvalidConfigError if it is not one."""
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidConfigError([f"{c.ROOT}: not valid UTF-8 text ({exc.reason})"]) from None
    if isinstance(raw, str):
        try:
            raw = yaml.load(raw, Loader=_Loader)
        except yaml.YAMLError as exc:
            raise InvalidConfigError([f"{c.ROOT}: {_yaml_message(exc)}"]) from None
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise InvalidConfigError(
            [f"{c.ROOT}: must be a mapping of field names to values, got {describe(raw)}"]
        )
    return copy.deepcopy(dict(raw))


def _yaml_message(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    if mark is None:
        return f"invalid YAML: {problem}"
    return f"invalid YAML at line {mark.line + 1}, column {mark.column + 1}: {problem}"


def _entrypoint(ctx: Context, value: Any, path: str) -> None:
    if isinstance(value, str):
        if not value.strip():
            ctx.error(path, "must not be empty")
        elif _LEGACY_ENTRYPOINT.match(value.strip()):
            ctx.warn(
                path,
                "deprecated, the 'model_def:TrialClass' form; use a script or launcher command",
            )
    elif isinstance(value, list):
        if not value:
            ctx.error(path, "must not be empty")
        c.list_of(c.string(nonempty=True))(ctx, value, path)
    else:
        ctx.error(path, f"must be a string or a list of strings, got {describe(value)}")


def _log_policy(ctx: Context, value: Any, path: str) -> None:
    actions = ("cancel_retries", "exclude_node")

    def action(ctx: Context, value: Any, path: str) -> None:
        if isinstance(value, Mapping):  # legacy {type: ...} form
            if c.check_fields(ctx, value, path, {"type": c.enum(*actions)}):
                c.require(ctx, value, path, "type")
        else:
            c.enum(*actions)(ctx, value, path)

    def pattern(ctx: Context, value: Any, path: str) -> None:
        c.string(nonempty=True)(ctx, value, path)
        if isinstance(value, str) and value:
            try:
                re.compile(value)
            except re.error as exc:
                ctx.error(path, f"not a valid regular expression ({exc})")

    fields = {"name": c.string(nonempty=True), "pattern": pattern, "action": action}
    if c.check_fields(ctx, value, path, fields) and value.get("name") is None:
        # upstream: a policy without a name is the legacy form, which needs a pattern and an action
        if value.get("pattern") is None:
            ctx.error(join(path, "pattern"), "required when name is not set")
        elif value.get("action") is None:
            ctx.error(join(path, "action"), "required when name is not set")


def _profiling(ctx: Context, value: Any, path: str) -> None:
    fields = {
        "enabled": c.boolean(),
        "begin_on_batch": c.integer(0),
        "end_after_batch": c.integer(0),
        "sync_timings": c.boolean(),
    }
    if c.check_fields(ctx, value, path, fields):
        begin, end = value.get("begin_on_batch"), value.get("end_after_batch")
        if c.is_int(begin) and c.is_int(end) and begin > end:
            ctx.error(join(path, "begin_on_batch"), "must not be greater than end_after_batch")


def _must_be_null(ctx: Context, value: Any, path: str) -> None:
    ctx.error(path, "must be null")


_OPTIMIZATIONS: dict[str, c.Checker] = {
    "aggregation_frequency": c.integer(1),
    "average_aggregated_gradients": c.boolean(),
    "average_training_metrics": c.boolean(),
    "gradient_compression": c.boolean(),
    "grad_updates_size_file": c.string(),
    "mixed_precision": c.enum("O0", "O1", "O2", "O3"),
    "tensor_fusion_threshold": c.integer(0),
    "tensor_fusion_cycle_time": c.integer(0),
    "auto_tune_tensor_fusion": c.boolean(),
}

TOP_LEVEL: dict[str, c.Checker] = {
    "name": c.string(nonempty=True),
    "description": c.string(),
    "labels": c.list_of(c.string()),
    "data": c.mapping_any(),
    "entrypoint": _entrypoint,
    "hyperparameters": _hparams.check_hyperparameters,
    "searcher": _searcher.check_searcher,
    "resources": c.obj(_sections.RESOURCES, disallowed=_sections.RESOURCES_DISALLOWED),
    "checkpoint_storage": _sections.check_checkpoint_storage,
    "checkpoint_policy": c.enum("best", "all", "none"),
    "max_restarts": c.integer(0),
    "min_validation_period": c.deprecated(c.length(), _LENGTH_REASON, _defaults.PERIOD_DEFAULT),
    "min_checkpoint_period": c.deprecated(c.length(), _LENGTH_REASON, _defaults.PERIOD_DEFAULT),
    "records_per_epoch": c.deprecated(
        c.integer(0), "report epochs from the training code", _defaults.RECORDS_PER_EPOCH_DEFAULT
    ),
    "scheduling_unit": c.deprecated(
        c.integer(1),
        "the training loop decides how often to report",
        _defaults.SCHEDULING_UNIT_DEFAULT,
    ),
    "perform_initial_validation": c.boolean(),
    "reproducibility": c.obj({"experiment_seed": c.integer(0, 2**32 - 1)}),
    "environment": _sections.check_environment,
    "bind_mounts": _sections.check_bind_mounts,
    "workspace": c.string(),
    "project": c.string(),
    "log_policies": c.list_of(_log_policy),
    "retention_policy": c.obj({"log_retention_days": c.integer(-1, 32767)}),
    "preemption_timeout": c.integer(0),
    "profiling": _profiling,
    "optimizations": c.deprecated(
        c.obj(_OPTIMIZATIONS), "Horovod-era knobs are ignored", _defaults.OPTIMIZATIONS_DEFAULTS
    ),
    "integrations": c.obj(
        {
            "pachyderm": c.mapping_any(),
            "webhooks": c.obj(
                {
                    "webhook_id": c.list_of(c.integer(0)),
                    "webhook_name": c.list_of(c.string()),
                    "exclude": c.boolean(),
                }
            ),
        }
    ),
    "slurm": c.obj(
        {
            "slots_per_node": c.integer(1),
            "gpu_type": c.string(),
            "sbatch_args": c.list_of(c.string()),
        }
    ),
    "pbs": c.obj({"slots_per_node": c.integer(1), "pbsbatch_args": c.list_of(c.string())}),
    "debug": c.boolean(),
    "security": c.deprecated(c.mapping_any(), "it is ignored"),
    "tensorboard_storage": c.deprecated(c.mapping_any(), "it is ignored"),
    "data_layer": c.deprecated(c.mapping_any(), "it is ignored"),
    "internal": _must_be_null,
}


def _check(ctx: Context, config: Mapping[str, Any], *, require_entrypoint: bool = False) -> None:
    c.check_fields(ctx, config, "", TOP_LEVEL)
    if ctx.searcher_name == "grid" and config.get("hyperparameters") is not None:
        _hparams.check_grid_counts(ctx, config["hyperparameters"], "hyperparameters")
    if not ctx.complete:
        return
    c.require(
        ctx,
        config,
        "",
        "name",
        "hyperparameters",
        "searcher",
        "checkpoint_storage",
        "reproducibility",
    )
    if require_entrypoint:
        c.require(ctx, config, "", "entrypoint")
    workspace, project = config.get("workspace") or "", config.get("project") or ""
    if bool(workspace) != bool(project):
        missing, present = ("project", "workspace") if workspace else ("workspace", "project")
        ctx.error(
            missing, f"required when {present} is set (set both workspace and project, or neither)"
        )


def sanity_check(raw: str | bytes | Mapping[str, Any]) -> list[str]:
    """Phase 1 only: the sorted list of problems in the user's own config (empty if it is sane)."""
    try:
        config = parse(raw)
    except InvalidConfigError as exc:
        return exc.errors
    ctx = Context(complete=False)
    _check(ctx, config)
    return sorted(ctx.errors)


def validate_experiment_config(
    raw: str | bytes | Mapping[str, Any],
    *,
    defaults: Mapping[str, Any] | None = None,
    require_entrypoint: bool = True,
) -> ValidatedConfig:
    """Validate an experiment config in two phases and return it fully defaulted.

    Phase 1 checks the user's input alone (unknown keys, types, ranges), so a default can never mask a
    mistake. Then ``defaults`` (e.g. the master's ``checkpoint_storage``) and det's schema defaults are
    merged underneath, and phase 2 checks completeness (eventually-required fields, cross-field rules).

    Args:
        raw: YAML text or an already-parsed mapping.
        defaults: a partial config merged under the user's values before phase 2.
        require_entrypoint: whether ``entrypoint`` must be set (managed experiments need one).

    Raises:
        InvalidConfigError: listing every problem found, each with its field path.
    """
    user = parse(raw)
    sanity = Context(complete=False, warn=True)
    _check(sanity, user)
    if sanity.errors:
        raise InvalidConfigError(sanity.errors)
    warnings = list(sanity.warnings)

    base = parse(defaults) if defaults is not None else {}
    merged = _defaults.normalize(_defaults.merge(user, base))
    full = _defaults.normalize(_defaults.merge(merged, _defaults.schema_defaults()))
    full = _defaults.fill_unions(full, warnings)

    complete = Context(complete=True)
    _check(complete, full, require_entrypoint=require_entrypoint)
    if complete.errors:
        raise InvalidConfigError(complete.errors)
    return ValidatedConfig(config=full, original=user, warnings=list(dict.fromkeys(warnings)))
