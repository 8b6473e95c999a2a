"""Phase 2 (after defaults), defaulted configs, legacy forms and deprecation warnings."""

from __future__ import annotations

import copy
import json
import re
import time
from typing import Any

import pytest

from determined import config as expconf

STORAGE = {"type": "shared_fs", "host_path": "/tmp/ckpt"}


def base(**overrides: Any) -> dict[str, Any]:
    config: dict[str, Any] = {
        "entrypoint": "python3 train.py",
        "searcher": {"name": "single", "metric": "loss"},
        "checkpoint_storage": dict(STORAGE),
    }
    config.update(overrides)
    return config


def errors_of(config: Any, **kwargs: Any) -> list[str]:
    with pytest.raises(expconf.InvalidConfigError) as info:
        expconf.validate_experiment_config(config, **kwargs)
    return info.value.errors


COMPLETENESS_CASES: list[tuple[dict[str, Any], list[str]]] = [
    ({}, ["checkpoint_storage: required", "entrypoint: required", "searcher: required"]),
    (base(searcher={"name": "single"}), ["searcher.metric: required"]),
    (base(searcher={"metric": "loss"}), ["searcher.name: required"]),
    (
        base(searcher={"name": "random", "metric": "m"}),
        ["searcher.max_trials: required for the random searcher"],
    ),
    (
        base(searcher={"name": "async_halving", "metric": "m"}),
        [
            "searcher.max_time: required for the async_halving searcher",
            "searcher.max_trials: required for the async_halving searcher",
            "searcher.num_rungs: required for the async_halving searcher",
            "searcher.time_metric: required for the async_halving searcher",
        ],
    ),
    (
        base(
            searcher={
                "name": "adaptive_asha",
                "metric": "m",
                "max_trials": 4,
                "time_metric": "batches",
            }
        ),
        ["searcher.max_time: required for the adaptive_asha searcher"],
    ),
    (
        base(checkpoint_storage={"save_trial_best": 2}),
        ["checkpoint_storage.type: required, one of shared_fs, directory, s3, gcs, azure, fsspec"],
    ),
    (
        base(checkpoint_storage={"type": "shared_fs"}),
        ["checkpoint_storage.host_path: required for shared_fs storage"],
    ),
    (
        base(checkpoint_storage={"type": "directory"}),
        ["checkpoint_storage.container_path: required for directory storage"],
    ),
    (
        base(checkpoint_storage={"type": "s3"}),
        ["checkpoint_storage.bucket: required for s3 storage"],
    ),
    (
        base(checkpoint_storage={"type": "gcs"}),
        ["checkpoint_storage.bucket: required for gcs storage"],
    ),
    (
        base(checkpoint_storage={"type": "fsspec"}),
        ["checkpoint_storage.url: required for fsspec storage"],
    ),
    (
        base(checkpoint_storage={"type": "azure"}),
        [
            "checkpoint_storage.connection_string: exactly one of connection_string or account_url must be set",
            "checkpoint_storage.container: required for azure storage",
        ],
    ),
    (
        base(workspace="ws"),
        ["project: required when workspace is set (set both workspace and project, or neither)"],
    ),
    (
        base(project="p"),
        ["workspace: required when project is set (set both workspace and project, or neither)"],
    ),
    (
        base(
            searcher={"name": "grid", "metric": "m"},
            hyperparameters={
                "lr": {"type": "log", "minval": -4, "maxval": -1, "base": 10},
                "ok": {"type": "int", "minval": 1, "maxval": 4, "count": 4},
                "dict_hparam": {
                    "nested": {"log_hparam": {"type": "double", "minval": 0, "maxval": 1}}
                },
                "layers": [{"type": "int", "minval": 1, "maxval": 3}],
                "cat": {"type": "categorical", "vals": [1, 2]},
            },
        ),
        [
            "hyperparameters.dict_hparam.nested.log_hparam.count: required when the grid searcher is in use",
            "hyperparameters.layers[0].count: required when the grid searcher is in use",
            "hyperparameters.lr.count: required when the grid searcher is in use",
        ],
    ),
]


@pytest.mark.parametrize(("config", "expected"), COMPLETENESS_CASES)
def test_completeness_errors(config: dict[str, Any], expected: list[str]) -> None:
    # Complete-only problems pass phase 1 (grid counts are checked there too: the user named grid).
    grid = config.get("searcher", {}).get("name") == "grid"
    assert expconf.sanity_check(config) == (expected if grid else [])
    assert errors_of(config) == expected


def test_grid_count_is_checked_in_phase_one_when_the_user_names_grid() -> None:
    config = {
        "searcher": {"name": "grid"},
        "hyperparameters": {"x": {"type": "int", "minval": 0, "maxval": 2}},
    }
    assert expconf.sanity_check(config) == [
        "hyperparameters.x.count: required when the grid searcher is in use"
    ]


def test_grid_from_defaults_still_needs_counts() -> None:
    user = base(hyperparameters={"x": {"type": "double", "minval": 0, "maxval": 1}})
    del user["searcher"]
    errors = errors_of(user, defaults={"searcher": {"name": "grid", "metric": "m"}})
    assert errors == ["hyperparameters.x.count: required when the grid searcher is in use"]


def test_entrypoint_optional_when_not_required() -> None:
    config = base()
    del config["entrypoint"]
    v = expconf.validate_experiment_config(config, require_entrypoint=False)
    assert v.config["entrypoint"] is None


def test_defaults_fill_missing_required_fields() -> None:
    user = {"entrypoint": "python3 train.py", "searcher": {"name": "single", "metric": "acc"}}
    v = expconf.validate_experiment_config(
        user, defaults={"checkpoint_storage": {"type": "directory", "container_path": "/ckpt"}}
    )
    assert v.config["checkpoint_storage"] == {
        "type": "directory",
        "container_path": "/ckpt",
        "save_experiment_best": 0,
        "save_trial_best": 1,
        "save_trial_latest": 1,
    }
    assert v.original == user
    assert "checkpoint_storage" not in v.original


def test_whole_defaulted_config() -> None:
    before = int(time.time())
    v = expconf.validate_experiment_config(base())
    config = v.config
    assert re.fullmatch(r"Experiment \([a-z]+-[a-z]+-[a-z]+\)", config.pop("name"))
    seed = config.pop("reproducibility")["experiment_seed"]
    assert before <= seed <= int(time.time()) + 1
    assert config == {
        "entrypoint": "python3 train.py",
        "searcher": {
            "name": "single",
            "metric": "loss",
            "smaller_is_better": True,
            "source_trial_id": None,
            "source_checkpoint_uuid": None,
        },
        "checkpoint_storage": {
            "type": "shared_fs",
            "host_path": "/tmp/ckpt",
            "storage_path": None,
            "propagation": "rprivate",
            "save_experiment_best": 0,
            "save_trial_best": 1,
            "save_trial_latest": 1,
        },
        "description": None,
        "labels": [],
        "data": {},
        "hyperparameters": {},
        "resources": {
            "slots_per_trial": 1,
            "max_slots": None,
            "weight": 1,
            "priority": None,
            "resource_pool": "",
            "is_single_node": None,
            "shm_size": None,
            "devices": [],
        },
        "checkpoint_policy": "best",
        "max_restarts": 5,
        "min_validation_period": {"batches": 0},
        "min_checkpoint_period": {"batches": 0},
        "records_per_epoch": 0,
        "scheduling_unit": 100,
        "perform_initial_validation": False,
        "environment": {
            "image": {
                "cpu": "determinedai/pytorch-ngc-dev:0736b6d",
                "cuda": "determinedai/pytorch-ngc-dev:0736b6d",
                "rocm": "determinedai/environments:rocm-5.6-pytorch-1.3-tf-2.10-rocm-mpich-0736b6d",
            },
            "environment_variables": {"cpu": [], "cuda": [], "rocm": []},
            "ports": {},
            "proxy_ports": [],
            "force_pull_image": False,
            "registry_auth": None,
            "add_capabilities": [],
            "drop_capabilities": [],
            "pod_spec": None,
            "python": None,
            "venv": None,
        },
        "bind_mounts": [],
        "workspace": "",
        "project": "",
        "log_policies": [
            {"name": "CUDA OOM", "pattern": ".*CUDA out of memory.*"},
            {"name": "ECC Error", "pattern": ".*uncorrectable ECC error encountered.*"},
        ],
        "retention_policy": None,
        "preemption_timeout": None,
        "profiling": {
            "enabled": False,
            "begin_on_batch": 0,
            "end_after_batch": None,
            "sync_timings": True,
        },
        "optimizations": {
            "aggregation_frequency": 1,
            "average_aggregated_gradients": True,
            "average_training_metrics": True,
            "gradient_compression": False,
            "grad_updates_size_file": None,
            "mixed_precision": "O0",
            "tensor_fusion_threshold": 64,
            "tensor_fusion_cycle_time": 1,
            "auto_tune_tensor_fusion": False,
        },
        "integrations": None,
        "slurm": {},
        "pbs": {},
        "debug": False,
    }
    assert v.warnings == []


SEARCHER_DEFAULTS: list[tuple[dict[str, Any], dict[str, Any]]] = [
    ({"name": "single", "metric": "m"}, {}),
    ({"name": "random", "metric": "m", "max_trials": 8}, {"max_concurrent_trials": 16}),
    ({"name": "grid", "metric": "m"}, {"max_concurrent_trials": 16}),
    (
        {
            "name": "async_halving",
            "metric": "m",
            "num_rungs": 3,
            "max_trials": 8,
            "time_metric": "batches",
            "max_time": 900,
        },
        {"divisor": 4, "max_concurrent_trials": 16},
    ),
    (
        {
            "name": "adaptive_asha",
            "metric": "m",
            "max_trials": 8,
            "time_metric": "epochs",
            "max_time": 9,
        },
        {
            "mode": "standard",
            "divisor": 4,
            "max_rungs": 5,
            "bracket_rungs": [],
            "max_concurrent_trials": 16,
        },
    ),
    (
        {
            "name": "adaptive_asha",
            "metric": "m",
            "max_trials": 8,
            "time_metric": "b",
            "max_time": 9,
            "mode": "aggressive",
            "divisor": 3,
            "bracket_rungs": [3, 2],
            "smaller_is_better": False,
            "max_concurrent_trials": 0,
        },
        {"max_rungs": 5},
    ),
]


@pytest.mark.parametrize(("searcher", "added"), SEARCHER_DEFAULTS)
def test_searcher_defaults(searcher: dict[str, Any], added: dict[str, Any]) -> None:
    v = expconf.validate_experiment_config(base(searcher=searcher))
    common = {"smaller_is_better": True, "source_trial_id": None, "source_checkpoint_uuid": None}
    assert v.config["searcher"] == {**common, **searcher, **added}


def test_asha_accepts_legacy_max_length_with_warning() -> None:
    searcher = {
        "name": "adaptive_asha",
        "metric": "m",
        "max_trials": 4,
        "max_length": {"batches": 1000},
    }
    v = expconf.validate_experiment_config(base(searcher=searcher))
    assert v.config["searcher"]["time_metric"] == "batches"
    assert v.config["searcher"]["max_time"] == 1000
    assert v.config["searcher"]["max_length"] == {"batches": 1000}
    assert any(w.startswith("searcher.max_length: deprecated,") for w in v.warnings)
    assert expconf.searcher_length(v.config) == ("batches", 1000)


@pytest.mark.parametrize(
    ("searcher", "expected"),
    [
        ({"name": "single", "max_length": {"batches": 100}}, ("batches", 100)),
        ({"name": "single", "max_length": {"epochs": 2}}, ("epochs", 2)),
        ({"name": "single", "max_length": {"records": 640}}, ("records", 640)),
        ({"name": "single", "max_length": 50}, ("batches", 50)),
        ({"name": "single"}, None),
        ({"name": "single", "max_length": None}, None),
    ],
)
def test_searcher_length(searcher: dict[str, Any], expected: Any) -> None:
    assert expconf.searcher_length({"searcher": searcher}) == expected
    assert expconf.searcher_length({}) is None


DEPRECATIONS: list[tuple[dict[str, Any], str]] = [
    (
        {"searcher": {"name": "single", "metric": "m", "max_length": {"batches": 100}}},
        "searcher.max_length: deprecated,",
    ),
    (
        {
            "searcher": {
                "name": "async_halving",
                "metric": "m",
                "num_rungs": 2,
                "max_trials": 3,
                "time_metric": "b",
                "max_time": 9,
                "stop_once": True,
            }
        },
        "searcher.stop_once: deprecated,",
    ),
    ({"min_validation_period": {"batches": 100}}, "min_validation_period: deprecated,"),
    ({"min_checkpoint_period": {"epochs": 1}}, "min_checkpoint_period: deprecated,"),
    ({"records_per_epoch": 5000}, "records_per_epoch: deprecated,"),
    ({"scheduling_unit": 10}, "scheduling_unit: deprecated,"),
    ({"optimizations": {"aggregation_frequency": 2}}, "optimizations: deprecated,"),
    ({"entrypoint": "model_def:MNistTrial"}, "entrypoint: deprecated,"),
    ({"environment": {"image": {"gpu": "my/gpu:1"}}}, "environment.image.gpu: deprecated,"),
    ({"resources": {"native_parallel": False}}, "resources.native_parallel: deprecated,"),
]


@pytest.mark.parametrize(("fragment", "warning"), DEPRECATIONS)
def test_deprecations_warn_and_never_error(fragment: dict[str, Any], warning: str) -> None:
    v = expconf.validate_experiment_config({**base(), **fragment})
    assert any(w.startswith(warning) for w in v.warnings), v.warnings


def test_legacy_gpu_image_is_read_as_cuda() -> None:
    v = expconf.validate_experiment_config(
        base(environment={"image": {"gpu": "my/gpu:1", "cpu": "my/cpu:1"}})
    )
    assert v.config["environment"]["image"] == {
        "cpu": "my/cpu:1",
        "cuda": "my/gpu:1",
        "rocm": "determinedai/environments:rocm-5.6-pytorch-1.3-tf-2.10-rocm-mpich-0736b6d",
    }


def test_image_string_and_env_var_list_are_normalised() -> None:
    v = expconf.validate_experiment_config(
        base(
            environment={"image": "me/img:2", "environment_variables": ["A=1"], "venv": "/opt/venv"}
        )
    )
    env = v.config["environment"]
    assert env["image"] == {"cpu": "me/img:2", "cuda": "me/img:2", "rocm": "me/img:2"}
    assert env["environment_variables"] == {"cpu": ["A=1"], "cuda": ["A=1"], "rocm": ["A=1"]}
    assert env["venv"] == "/opt/venv" and env["python"] is None


def test_hyperparameters_normalised_and_empty_dicts_kept() -> None:
    hparams = {
        "lr": 0.01,
        "name": "resnet",
        "sizes": [1, 2],
        "empty": {},
        "optimizer": {
            "momentum": {"type": "double", "minval": 0.1, "maxval": 0.9},
            "inner": {"deep": {"k": True}},
        },
    }
    v = expconf.validate_experiment_config(base(hyperparameters=hparams))
    assert v.config["hyperparameters"] == {
        "lr": {"type": "const", "val": 0.01},
        "name": {"type": "const", "val": "resnet"},
        "sizes": {"type": "const", "val": [1, 2]},
        "empty": {},
        "optimizer": {
            "momentum": {"type": "double", "minval": 0.1, "maxval": 0.9},
            "inner": {"deep": {"k": {"type": "const", "val": True}}},
        },
    }
    assert v.original["hyperparameters"] == hparams


def test_log_policy_named_without_pattern_disables_a_default() -> None:
    policies = [
        {"name": "CUDA OOM"},
        {"name": "mine", "pattern": ".*boom.*", "action": "cancel_retries"},
    ]
    v = expconf.validate_experiment_config(base(log_policies=policies))
    assert v.config["log_policies"] == [
        {"name": "mine", "pattern": ".*boom.*", "action": "cancel_retries"},
        {"name": "ECC Error", "pattern": ".*uncorrectable ECC error encountered.*"},
    ]


def test_bind_mount_and_proxy_port_entries_get_defaults() -> None:
    v = expconf.validate_experiment_config(
        base(
            bind_mounts=[{"host_path": "/data", "container_path": "/data"}],
            environment={"proxy_ports": [{"proxy_port": 8080}]},
        )
    )
    assert v.config["bind_mounts"] == [
        {
            "host_path": "/data",
            "container_path": "/data",
            "read_only": False,
            "propagation": "rprivate",
        }
    ]
    assert v.config["environment"]["proxy_ports"] == [
        {
            "proxy_port": 8080,
            "proxy_tcp": False,
            "unauthenticated": False,
            "default_service_id": False,
        }
    ]


@pytest.mark.parametrize(
    ("storage", "expected_extra"),
    [
        (
            {"type": "s3", "bucket": "b"},
            {"access_key": None, "secret_key": None, "endpoint_url": None, "prefix": None},
        ),
        ({"type": "gcs", "bucket": "b", "prefix": "runs/a"}, {}),
        (
            {"type": "azure", "container": "c", "account_url": "https://x"},
            {"connection_string": None, "credential": None},
        ),
        (
            {"type": "azure", "container": "c", "connection_string": "cs"},
            {"account_url": None, "credential": None},
        ),
        ({"type": "fsspec", "url": "memory://ckpt"}, {"storage_options": {}}),
        ({"type": "fsspec", "url": "s3://b/p", "storage_options": {"anon": True}}, {}),
        (
            {"type": "shared_fs", "host_path": "/mnt", "storage_path": "/mnt/sub"},
            {"propagation": "rprivate"},
        ),
        (
            {"type": "shared_fs", "host_path": "/mnt", "storage_path": "rel"},
            {"propagation": "rprivate"},
        ),
        ({"type": "directory", "container_path": "/ckpt", "save_trial_latest": 0}, {}),
    ],
)
def test_checkpoint_storage_types(storage: dict[str, Any], expected_extra: dict[str, Any]) -> None:
    v = expconf.validate_experiment_config(base(checkpoint_storage=storage))
    gc = {"save_experiment_best": 0, "save_trial_best": 1, "save_trial_latest": 1}
    assert v.config["checkpoint_storage"] == {**gc, **storage, **expected_extra}


REALISTIC = """
name: mnist-pytorch-adaptive
description: MNIST with adaptive ASHA
labels: [mnist, cnn]
workspace: research
project: vision
entrypoint: python3 -m determined.launch.torch_distributed python3 train.py
data:
  url: https://example.com/mnist.tar.gz
  secrets: {token: abc}
hyperparameters:
  global_batch_size: 64
  learning_rate:
    type: log
    minval: -4.0
    maxval: -1.0
    base: 10
  n_filters1: {type: int, minval: 8, maxval: 64}
  dropout: {type: double, minval: 0.2, maxval: 0.5}
  optimizer:
    kind: {type: categorical, vals: [sgd, adam]}
    betas: [0.9, 0.999]
searcher:
  name: adaptive_asha
  metric: validation_loss
  smaller_is_better: true
  max_trials: 16
  time_metric: batches
  max_time: 937
  max_concurrent_trials: 4
resources:
  slots_per_trial: 2
  max_slots: 8
  priority: 10
  resource_pool: gpu-pool
  shm_size: 2G
checkpoint_storage:
  type: s3
  bucket: my-bucket
  prefix: experiments
  save_experiment_best: 2
max_restarts: 2
environment:
  image: determinedai/pytorch-ngc:0.38.1
  environment_variables:
    cpu: [OMP_NUM_THREADS=2]
    cuda: [NCCL_DEBUG=INFO]
  force_pull_image: true
bind_mounts:
  - host_path: /datasets
    container_path: /datasets
    read_only: true
reproducibility:
  experiment_seed: 42
profiling:
  enabled: true
  begin_on_batch: 10
  end_after_batch: 20
retention_policy: {log_retention_days: 30}
integrations:
  webhooks: {webhook_name: [slack], exclude: false}
"""


def test_realistic_config_round_trips() -> None:
    v = expconf.validate_experiment_config(REALISTIC)
    assert v.warnings == []
    config = v.config
    json.dumps(config)  # storable as JSON
    assert config["name"] == "mnist-pytorch-adaptive"
    assert config["reproducibility"] == {"experiment_seed": 42}
    assert config["searcher"]["max_rungs"] == 5 and config["searcher"]["max_concurrent_trials"] == 4
    assert config["hyperparameters"]["optimizer"]["betas"] == {"type": "const", "val": [0.9, 0.999]}
    assert config["environment"]["environment_variables"] == {
        "cpu": ["OMP_NUM_THREADS=2"],
        "cuda": ["NCCL_DEBUG=INFO"],
        "rocm": [],
    }
    assert config["resources"]["shm_size"] == "2G"
    # Validating the stored config again is a fixed point (the master re-validates on restore).
    again = expconf.validate_experiment_config(copy.deepcopy(config))
    assert again.config == config
    assert again.warnings == []
    # The original keeps the user's shapes.
    assert v.original["environment"]["image"] == "determinedai/pytorch-ngc:0.38.1"
    assert v.original["hyperparameters"]["global_batch_size"] == 64


def test_config_is_independent_of_inputs() -> None:
    user = base(labels=["a"])
    defaults = {"resources": {"devices": ["/dev/x:/dev/x"]}}
    v = expconf.validate_experiment_config(user, defaults=defaults)
    v.config["labels"].append("b")
    v.config["resources"]["devices"].append("y")
    assert user["labels"] == ["a"] and v.original["labels"] == ["a"]
    assert defaults == {"resources": {"devices": ["/dev/x:/dev/x"]}}


def test_invalid_defaults_are_reported_in_phase_two() -> None:
    errors = errors_of(base(), defaults={"resources": {"priority": 0}})
    assert errors == ["resources.priority: must be between 1 and 99"]
