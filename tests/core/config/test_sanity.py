"""Phase 1: the user's own config, checked alone (unknown keys, types, enums, ranges, paths)."""

from __future__ import annotations

from typing import Any

import pytest

from determined import config as expconf

# Each case: a config fragment, and one error that sanity_check must report for it (exactly).
ERROR_CASES: list[tuple[dict[str, Any], str]] = [
    ({"foo": 1}, "foo: unknown field"),
    (
        {"resources": {"slots": 2}},
        "resources.slots: not allowed for experiments",
    ),
    ({"resources": {"priority": 0}}, "resources.priority: must be between 1 and 99"),
    ({"resources": {"priority": 100}}, "resources.priority: must be between 1 and 99"),
    ({"resources": {"slots_per_trial": -1}}, "resources.slots_per_trial: must be ≥ 0"),
    (
        {"resources": {"slots_per_trial": True}},
        "resources.slots_per_trial: must be an integer, got true",
    ),
    (
        {"resources": {"shm_size": "lots"}},
        'resources.shm_size: must be a number of bytes or a size such as "128M" or "1.5G", got "lots"',
    ),
    (
        {"resources": {"devices": ["nocolon"]}},
        'resources.devices[0]: must look like "/host/path:/container/path[:mode]", got "nocolon"',
    ),
    (
        {"resources": {"devices": [{"host_path": "/dev/x"}]}},
        "resources.devices[0].container_path: required",
    ),
    ({"resources": {"weight": -1}}, "resources.weight: must be ≥ 0"),
    (
        {"searcher": {"name": "random", "max_trials": "ten"}},
        'searcher.max_trials: must be an integer, got "ten"',
    ),
    ({"searcher": {"name": "random", "max_trials": 0}}, "searcher.max_trials: must be ≥ 1"),
    (
        {"searcher": {"name": "random", "max_concurrent_trials": -1}},
        "searcher.max_concurrent_trials: must be ≥ 0",
    ),
    (
        {"searcher": {"name": "random", "smaller_is_better": "yes"}},
        'searcher.smaller_is_better: must be a boolean, got "yes"',
    ),
    (
        {"searcher": {"name": "random", "num_rungs": 3}},
        "searcher.num_rungs: unknown field for the random searcher",
    ),
    (
        {"searcher": {"name": "single", "max_trials": 3}},
        "searcher.max_trials: unknown field for the single searcher",
    ),
    (
        {"searcher": {"name": "grid", "max_trials": 3}},
        "searcher.max_trials: unknown field for the grid searcher",
    ),
    ({"searcher": {"name": "async_halving", "divisor": 1}}, "searcher.divisor: must be > 1"),
    ({"searcher": {"name": "async_halving", "num_rungs": 0}}, "searcher.num_rungs: must be ≥ 1"),
    (
        {"searcher": {"name": "adaptive_asha", "mode": "wild"}},
        'searcher.mode: must be one of aggressive, standard, conservative, got "wild"',
    ),
    ({"searcher": {"name": "adaptive_asha", "max_rungs": 0}}, "searcher.max_rungs: must be ≥ 1"),
    (
        {"searcher": {"name": "adaptive_asha", "bracket_rungs": [2, "x"]}},
        'searcher.bracket_rungs[1]: must be an integer, got "x"',
    ),
    ({"searcher": {"name": "adaptive_asha", "max_time": 0}}, "searcher.max_time: must be ≥ 1"),
    (
        {"searcher": {"name": "single", "max_length": {"steps": 3}}},
        'searcher.max_length: must have exactly one of "batches", "records", or "epochs"',
    ),
    (
        {"searcher": {"name": "single", "max_length": {"batches": 1, "epochs": 1}}},
        'searcher.max_length: must have exactly one of "batches", "records", or "epochs"',
    ),
    ({"searcher": {"name": "single", "max_length": -1}}, "searcher.max_length: must be ≥ 0"),
    (
        {"searcher": {"name": "bayes"}},
        "searcher.name: must be one of single, random, grid, async_halving, adaptive_asha, pbt",
    ),
    (
        {"searcher": {"name": "custom", "unit": "batches"}},
        "searcher.name: the 'custom' searcher has been removed and is not valid for new experiments",
    ),
    (
        {"searcher": {"name": "adaptive"}},
        "searcher.name: the 'adaptive' searcher has been removed and is not valid for new experiments",
    ),
    (
        {"searcher": {"name": "adaptive_simple"}},
        "searcher.name: the 'adaptive_simple' searcher has been removed and is not valid for new experiments",
    ),
    (
        {"searcher": {"name": "sync_halving"}},
        "searcher.name: the 'sync_halving' searcher has been removed and is not valid for new experiments",
    ),
    ({"searcher": {"metric": "loss", "bogus": 1}}, "searcher.bogus: unknown field"),
    ({"searcher": "random"}, 'searcher: must be a mapping, got "random"'),
    (
        {"hyperparameters": {"lr": {"type": "double", "minval": 1, "maxval": 1}}},
        "hyperparameters.lr.minval: must be less than maxval",
    ),
    (
        {"hyperparameters": {"optimizer": {"lr": {"type": "double", "minval": 2, "maxval": 1}}}},
        "hyperparameters.optimizer.lr.minval: must be less than maxval",
    ),
    (
        {"hyperparameters": {"n": {"type": "int", "minval": 1.5, "maxval": 3}}},
        "hyperparameters.n.minval: must be an integer, got 1.5",
    ),
    (
        {"hyperparameters": {"n": {"type": "int", "maxval": 3}}},
        "hyperparameters.n.minval: required",
    ),
    (
        {"hyperparameters": {"n": {"type": "int", "minval": 1, "maxval": 3, "count": 0}}},
        "hyperparameters.n.count: must be ≥ 1",
    ),
    (
        {"hyperparameters": {"x": {"type": "log", "minval": -3, "maxval": -1}}},
        "hyperparameters.x.base: required",
    ),
    (
        {"hyperparameters": {"x": {"type": "log", "minval": -3, "maxval": -1, "base": 0}}},
        "hyperparameters.x.base: must be > 0",
    ),
    (
        {"hyperparameters": {"c": {"type": "categorical", "vals": []}}},
        "hyperparameters.c.vals: must not be empty",
    ),
    ({"hyperparameters": {"c": {"type": "categorical"}}}, "hyperparameters.c.vals: required"),
    (
        {"hyperparameters": {"c": {"type": "categorical", "vals": "ab"}}},
        'hyperparameters.c.vals: must be a list, got "ab"',
    ),
    ({"hyperparameters": {"k": {"type": "const"}}}, "hyperparameters.k.val: required"),
    (
        {"hyperparameters": {"k": {"type": "const", "val": 1, "extra": 2}}},
        "hyperparameters.k.extra: unknown field for a const hyperparameter",
    ),
    (
        {"hyperparameters": {"a": {"b": {"type": "uniform"}}}},
        'hyperparameters.a.b.type: must be one of const, int, double, log, categorical, got "uniform"',
    ),
    (
        {"hyperparameters": [1, 2]},
        "hyperparameters: must be a mapping of hyperparameter names to definitions, got a list",
    ),
    (
        {"checkpoint_storage": {"type": "ftp"}},
        'checkpoint_storage.type: must be one of shared_fs, directory, s3, gcs, azure, fsspec, got "ftp"',
    ),
    (
        {"checkpoint_storage": {"type": "shared_fs", "host_path": "rel/dir"}},
        "checkpoint_storage.host_path: must be an absolute path",
    ),
    (
        {"checkpoint_storage": {"type": "shared_fs", "host_path": "/a", "storage_path": "/b/c"}},
        "checkpoint_storage.storage_path: must either be a relative directory or a subdirectory of host_path",
    ),
    (
        {"checkpoint_storage": {"type": "s3", "bucket": "b", "prefix": "a/../b"}},
        'checkpoint_storage.prefix: must not contain ".." segments',
    ),
    (
        {"checkpoint_storage": {"type": "gcs", "bucket": "b", "prefix": ".."}},
        'checkpoint_storage.prefix: must not contain ".." segments',
    ),
    (
        {"checkpoint_storage": {"type": "s3", "bucket": "b", "host_path": "/x"}},
        "checkpoint_storage.host_path: unknown field for s3 storage",
    ),
    (
        {
            "checkpoint_storage": {
                "type": "azure",
                "container": "c",
                "connection_string": "x",
                "account_url": "y",
            }
        },
        "checkpoint_storage.connection_string: exactly one of connection_string or account_url must be set",
    ),
    (
        {
            "checkpoint_storage": {
                "type": "azure",
                "container": "c",
                "connection_string": "x",
                "credential": "y",
            }
        },
        "checkpoint_storage.credential: must not be set together with connection_string",
    ),
    (
        {"checkpoint_storage": {"type": "fsspec", "url": "memory://x", "storage_options": []}},
        "checkpoint_storage.storage_options: must be a mapping, got a list",
    ),
    (
        {"checkpoint_storage": {"save_trial_best": -1}},
        "checkpoint_storage.save_trial_best: must be ≥ 0",
    ),
    (
        {"bind_mounts": [{"host_path": "data", "container_path": "/data"}]},
        "bind_mounts[0].host_path: must be an absolute path",
    ),
    (
        {
            "bind_mounts": [
                {"host_path": "/a", "container_path": "/a"},
                {"host_path": "/b", "container_path": "."},
            ]
        },
        'bind_mounts[1].container_path: must not be "." or empty',
    ),
    ({"bind_mounts": [{"container_path": "/data"}]}, "bind_mounts[0].host_path: required"),
    ({"bind_mounts": {"host_path": "/a"}}, "bind_mounts: must be a list, got a mapping"),
    (
        {"checkpoint_policy": "some"},
        'checkpoint_policy: must be one of best, all, none, got "some"',
    ),
    ({"max_restarts": -1}, "max_restarts: must be ≥ 0"),
    ({"min_validation_period": {"batches": -1}}, "min_validation_period.batches: must be ≥ 0"),
    (
        {"min_checkpoint_period": {"steps": 1}},
        'min_checkpoint_period: must have exactly one of "batches", "records", or "epochs"',
    ),
    ({"scheduling_unit": 0}, "scheduling_unit: must be ≥ 1"),
    (
        {"reproducibility": {"experiment_seed": -1}},
        "reproducibility.experiment_seed: must be between 0 and 4294967295",
    ),
    (
        {"environment": {"image": 3}},
        "environment.image: must be an image name or a mapping of cpu/cuda/rocm to images, got 3",
    ),
    (
        {"environment": {"environment_variables": "A=1"}},
        'environment.environment_variables: must be a list of NAME=VALUE strings or a per-device mapping, got "A=1"',
    ),
    ({"environment": {"image": {"tpu": "x"}}}, "environment.image.tpu: unknown field"),
    (
        {"environment": {"environment_variables": ["=x"]}},
        'environment.environment_variables[0]: must be of the form NAME=VALUE, got "=x"',
    ),
    (
        {"environment": {"environment_variables": {"cuda": [3]}}},
        "environment.environment_variables.cuda[0]: must be a string NAME=VALUE, got 3",
    ),
    (
        {"environment": {"ports": {"web": 70000}}},
        "environment.ports.web: must be between 1 and 65535",
    ),
    (
        {"environment": {"proxy_ports": [{"proxy_tcp": True}]}},
        "environment.proxy_ports[0].proxy_port: required",
    ),
    (
        {"environment": {"python": "/usr/bin/python3", "venv": "/opt/venv"}},
        "environment.venv: must not be set together with python",
    ),
    (
        {"environment": {"registry_auth": {"token": "x"}}},
        "environment.registry_auth.token: unknown field",
    ),
    ({"labels": ["a", 1]}, "labels[1]: must be a string, got 1"),
    ({"labels": "a"}, 'labels: must be a list, got "a"'),
    ({"data": [1]}, "data: must be a mapping, got a list"),
    ({"entrypoint": 3}, "entrypoint: must be a string or a list of strings, got 3"),
    ({"entrypoint": []}, "entrypoint: must not be empty"),
    ({"entrypoint": ["python3", ""]}, "entrypoint[1]: must not be empty"),
    ({"name": ""}, "name: must not be empty"),
    (
        {"log_policies": [{"action": "cancel_retries"}]},
        "log_policies[0].pattern: required when name is not set",
    ),
    (
        {"log_policies": [{"pattern": "x", "action": "reboot"}]},
        'log_policies[0].action: must be one of cancel_retries, exclude_node, got "reboot"',
    ),
    (
        {"log_policies": [{"pattern": "x", "action": {"type": "reboot"}}]},
        'log_policies[0].action.type: must be one of cancel_retries, exclude_node, got "reboot"',
    ),
    (
        {"retention_policy": {"log_retention_days": -2}},
        "retention_policy.log_retention_days: must be between -1 and 32767",
    ),
    ({"preemption_timeout": -5}, "preemption_timeout: must be ≥ 0"),
    (
        {"profiling": {"begin_on_batch": 10, "end_after_batch": 5}},
        "profiling.begin_on_batch: must not be greater than end_after_batch",
    ),
    (
        {"optimizations": {"mixed_precision": "O4"}},
        'optimizations.mixed_precision: must be one of O0, O1, O2, O3, got "O4"',
    ),
    (
        {"integrations": {"webhooks": {"webhook_id": ["a"]}}},
        'integrations.webhooks.webhook_id[0]: must be an integer, got "a"',
    ),
    ({"slurm": {"slots_per_node": 0}}, "slurm.slots_per_node: must be ≥ 1"),
    ({"pbs": {"pbsbatch_args": "x"}}, 'pbs.pbsbatch_args: must be a list, got "x"'),
    ({"debug": "no"}, 'debug: must be a boolean, got "no"'),
    ({"internal": {"x": 1}}, "internal: must be null"),
    ({"description": 5}, "description: must be a string, got 5"),
    ({"workspace": 1}, "workspace: must be a string, got 1"),
    ({1: "x"}, "<config>: keys must be strings, got 1"),
]


@pytest.mark.parametrize(("config", "error"), ERROR_CASES, ids=[e for _, e in ERROR_CASES])
def test_sanity_error(config: dict[str, Any], error: str) -> None:
    assert error in expconf.sanity_check(config)
    with pytest.raises(expconf.InvalidConfigError) as info:
        expconf.validate_experiment_config(config)
    assert error in info.value.errors


SANE_CASES: list[dict[str, Any]] = [
    {},
    {"searcher": {"metric": "loss"}},  # partial: name may come from a template
    {"checkpoint_storage": {"save_trial_best": 3}},  # partial: type may come from the master
    {"resources": {"shm_size": "1.5G", "devices": ["/dev/a:/dev/a:rwm"], "max_slots": 4}},
    {"resources": {"shm_size": 1 << 30, "priority": 1, "weight": 0.5}},
    {"environment": {"image": "my/image:1", "environment_variables": ["A=1", "B="]}},
    {"environment": {"image": {"cpu": "c", "gpu": "g"}, "environment_variables": {"cpu": ["A=1"]}}},
    {"environment": {"pod_spec": {"spec": {"containers": []}}, "python": "/usr/bin/python3"}},
    {"entrypoint": ["python3", "train.py"]},
    {"entrypoint": "model_def:MyTrial"},
    {"hyperparameters": {"a": 1, "b": "x", "c": [1, 2], "d": None, "e": {}, "f": {"g": {}}}},
    {"searcher": {"name": "single", "max_length": 100}},
    {"searcher": {"name": "single", "metric": None, "max_length": None}},  # null = not provided
    {"log_policies": [{"name": "CUDA OOM"}, {"pattern": "x", "action": {"type": "exclude_node"}}]},
    {"data": {"secrets": {"k": "v"}}, "labels": []},
    {"profiling": {"begin_on_batch": 5, "end_after_batch": 5}},
    {"description": "a: b", "debug": None, "internal": None},
    {"bind_mounts": [{"host_path": "/data", "container_path": "data", "read_only": True}]},
]


@pytest.mark.parametrize("config", SANE_CASES)
def test_sane(config: dict[str, Any]) -> None:
    assert expconf.sanity_check(config) == []


def test_all_errors_are_collected_and_sorted() -> None:
    errors = expconf.sanity_check(
        {"zeta": 1, "max_restarts": -1, "resources": {"priority": 0}, "alpha": 2}
    )
    assert errors == [
        "alpha: unknown field",
        "max_restarts: must be ≥ 0",
        "resources.priority: must be between 1 and 99",
        "zeta: unknown field",
    ]


def test_sanity_check_accepts_yaml_text_and_reports_syntax() -> None:
    assert expconf.sanity_check("searcher:\n  name: bayes\n") == [
        "searcher.name: must be one of single, random, grid, async_halving, adaptive_asha, pbt"
    ]
    (error,) = expconf.sanity_check("a: [1, 2\nb: 3\n")
    assert error.startswith("<config>: invalid YAML at line ")


def test_yaml_syntax_error_names_the_line() -> None:
    text = "name: x\nsearcher:\n  name: single\n   metric: loss\n"
    with pytest.raises(expconf.InvalidConfigError) as info:
        expconf.validate_experiment_config(text)
    (error,) = info.value.errors
    assert error.startswith("<config>: invalid YAML at line 4, column")
    assert str(info.value) == "invalid experiment configuration:\n" + error
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    ("raw", "got"),
    [("- a\n- b\n", "a list"), ("just text", '"just text"'), ([1], "a list"), (b"3", "3")],
)
def test_top_level_must_be_a_mapping(raw: Any, got: str) -> None:
    with pytest.raises(expconf.InvalidConfigError) as info:
        expconf.validate_experiment_config(raw)
    assert info.value.errors == [f"<config>: must be a mapping of field names to values, got {got}"]


def test_bad_utf8() -> None:
    (error,) = expconf.sanity_check(b"name: \xff\xfe")
    assert error.startswith("<config>: not valid UTF-8 text")


def test_dates_stay_strings() -> None:
    config = {"entrypoint": "x", "searcher": {"name": "single", "metric": "m"}}
    text = "description: 2024-01-01\n"
    v = expconf.validate_experiment_config(
        text,
        defaults={**config, "checkpoint_storage": {"type": "directory", "container_path": "/c"}},
    )
    assert v.config["description"] == "2024-01-01"


def test_phase_one_errors_are_not_masked_by_defaults() -> None:
    # The defaults would supply a valid value for each of these; the user's mistakes must still show.
    defaults = {
        "searcher": {"name": "random", "metric": "loss", "max_trials": 4},
        "resources": {"priority": 10},
        "checkpoint_storage": {"type": "shared_fs", "host_path": "/ckpt"},
    }
    user = {"searcher": {"max_trials": "ten"}, "resources": {"priority": 500, "slots": 1}}
    with pytest.raises(expconf.InvalidConfigError) as info:
        expconf.validate_experiment_config(user, defaults=defaults)
    assert info.value.errors == [
        "resources.priority: must be between 1 and 99",
        "resources.slots: not allowed for experiments",
        'searcher.max_trials: must be an integer, got "ten"',
    ]


def test_removed_searcher_reports_only_the_name() -> None:
    errors = expconf.sanity_check(
        {"searcher": {"name": "adaptive", "budget": 3, "train_stragglers": True}}
    )
    assert errors == [
        "searcher.name: the 'adaptive' searcher has been removed and is not valid for new experiments"
    ]
