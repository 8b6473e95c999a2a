"""Merging a config template underneath an experiment config: upstream's rules, one per test."""

from __future__ import annotations

from determined.master._core._config_merge import merge_template


def test_the_experiment_wins_and_maps_merge_recursively() -> None:
    config = {"name": "mine", "resources": {"slots_per_trial": 2}, "labels": ["a"]}
    template = {
        "name": "theirs",
        "description": "from the template",
        "resources": {"slots_per_trial": 8, "max_slots": 4},
        "labels": ["b", "c"],
    }
    merged = merge_template(config, template)
    assert merged == {
        "name": "mine",
        "description": "from the template",
        "resources": {"slots_per_trial": 2, "max_slots": 4},
        "labels": ["a"],  # a list is replaced whole, not joined
    }
    assert config == {"name": "mine", "resources": {"slots_per_trial": 2}, "labels": ["a"]}


def test_a_null_in_the_experiment_takes_the_template_value() -> None:
    assert merge_template({"description": None}, {"description": "t"}) == {"description": "t"}


def test_bind_mounts_and_devices_join_dropping_colliding_container_paths() -> None:
    config = {"bind_mounts": [{"host_path": "/mine", "container_path": "/data"}]}
    template = {
        "bind_mounts": [
            {"host_path": "/theirs", "container_path": "/data"},
            {"host_path": "/cache", "container_path": "/cache"},
        ]
    }
    assert merge_template(config, template)["bind_mounts"] == [
        {"host_path": "/mine", "container_path": "/data"},
        {"host_path": "/cache", "container_path": "/cache"},
    ]


def test_hyperparameters_merge_only_nested_groups() -> None:
    config = {
        "hyperparameters": {
            "lr": {"type": "double", "minval": 0.1, "maxval": 1.0},
            "optimizer": {"momentum": 0.9},
        }
    }
    template = {
        "hyperparameters": {
            "lr": {"type": "log", "minval": -3, "maxval": -1, "base": 10},
            "optimizer": {"momentum": 0.5, "nesterov": True},
            "batch": 32,
        }
    }
    assert merge_template(config, template)["hyperparameters"] == {
        "lr": {"type": "double", "minval": 0.1, "maxval": 1.0},
        "optimizer": {"momentum": 0.9, "nesterov": True},
        "batch": 32,
    }


def test_searcher_of_another_name_takes_only_the_shared_fields() -> None:
    config = {"searcher": {"name": "single", "max_length": 10}}
    template = {
        "searcher": {
            "name": "adaptive_asha",
            "metric": "loss",
            "smaller_is_better": True,
            "max_trials": 16,
        }
    }
    assert merge_template(config, template)["searcher"] == {
        "name": "single",
        "max_length": 10,
        "metric": "loss",
        "smaller_is_better": True,
    }
    same = merge_template({"searcher": {"max_trials": 4}}, template)["searcher"]
    assert same == {**template["searcher"], "max_trials": 4}


def test_checkpoint_storage_of_another_type_keeps_only_the_gc_policy() -> None:
    config = {"checkpoint_storage": {"type": "shared_fs", "host_path": "/ckpt"}}
    template = {"checkpoint_storage": {"type": "s3", "bucket": "b", "save_trial_latest": 3}}
    assert merge_template(config, template)["checkpoint_storage"] == {
        "type": "shared_fs",
        "host_path": "/ckpt",
        "save_trial_latest": 3,
    }


def test_environment_variables_put_the_template_first() -> None:
    config = {"environment": {"environment_variables": ["A=mine"], "image": "mine"}}
    template = {"environment": {"environment_variables": ["A=theirs", "B=1"], "image": "theirs"}}
    assert merge_template(config, template)["environment"] == {
        "environment_variables": ["A=theirs", "B=1", "A=mine"],
        "image": "mine",
    }
