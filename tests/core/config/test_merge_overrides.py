"""merge(): user over defaults; apply_overrides(): ``--config a.b=value``; flatten_hparams()."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from determined import config as expconf

MERGE_CASES: list[tuple[str, dict[str, Any], dict[str, Any], dict[str, Any]]] = [
    ("user wins", {"max_restarts": 1}, {"max_restarts": 5}, {"max_restarts": 1}),
    ("null never overrides", {"max_restarts": None}, {"max_restarts": 5}, {"max_restarts": 5}),
    ("defaults fill gaps", {}, {"debug": True}, {"debug": True}),
    (
        "maps merge recursively",
        {"resources": {"slots_per_trial": 2}},
        {"resources": {"slots_per_trial": 1, "priority": 10}},
        {"resources": {"slots_per_trial": 2, "priority": 10}},
    ),
    ("lists are taken whole", {"labels": ["a"]}, {"labels": ["b", "c"]}, {"labels": ["a"]}),
    (
        "bind mounts append non-colliding entries",
        {"bind_mounts": [{"host_path": "/u", "container_path": "/data"}]},
        {
            "bind_mounts": [
                {"host_path": "/d", "container_path": "/data"},
                {"host_path": "/s", "container_path": "/shared"},
            ]
        },
        {
            "bind_mounts": [
                {"host_path": "/u", "container_path": "/data"},
                {"host_path": "/s", "container_path": "/shared"},
            ]
        },
    ),
    (
        "devices append non-colliding entries",
        {"resources": {"devices": ["/dev/a:/dev/x"]}},
        {
            "resources": {
                "devices": [{"host_path": "/dev/b", "container_path": "/dev/x"}, "/dev/c:/dev/c"]
            }
        },
        {"resources": {"devices": ["/dev/a:/dev/x", "/dev/c:/dev/c"]}},
    ),
    (
        "length objects are not mixed",
        {"min_validation_period": {"epochs": 1}},
        {"min_validation_period": {"batches": 0}},
        {"min_validation_period": {"epochs": 1}},
    ),
    (
        "hyperparameters merge only nested dicts",
        {"hyperparameters": {"lr": {"type": "double", "minval": 0, "maxval": 1}, "opt": {"a": 1}}},
        {
            "hyperparameters": {
                "lr": {"type": "double", "minval": 5, "maxval": 9, "count": 3},
                "opt": {"b": 2},
                "bs": 32,
            }
        },
        {
            "hyperparameters": {
                "lr": {"type": "double", "minval": 0, "maxval": 1},
                "opt": {"a": 1, "b": 2},
                "bs": 32,
            }
        },
    ),
    (
        "hyperparameters: a typed user value is not merged with a nested default",
        {"hyperparameters": {"opt": 3}},
        {"hyperparameters": {"opt": {"a": 1}}},
        {"hyperparameters": {"opt": 3}},
    ),
    (
        "searcher same name merges fully",
        {"searcher": {"name": "random", "max_trials": 3}},
        {"searcher": {"name": "random", "metric": "m", "max_concurrent_trials": 2}},
        {
            "searcher": {
                "name": "random",
                "max_trials": 3,
                "metric": "m",
                "max_concurrent_trials": 2,
            }
        },
    ),
    (
        "searcher without name takes the template's block",
        {"searcher": {"metric": "acc"}},
        {"searcher": {"name": "grid", "metric": "loss", "max_concurrent_trials": 2}},
        {"searcher": {"name": "grid", "metric": "acc", "max_concurrent_trials": 2}},
    ),
    (
        "searcher different name merges only common keys",
        {"searcher": {"name": "single"}},
        {
            "searcher": {
                "name": "random",
                "metric": "m",
                "smaller_is_better": False,
                "max_trials": 9,
            }
        },
        {"searcher": {"name": "single", "metric": "m", "smaller_is_better": False}},
    ),
    (
        "checkpoint storage of another type keeps only the GC knobs",
        {"checkpoint_storage": {"type": "s3", "bucket": "b"}},
        {"checkpoint_storage": {"type": "shared_fs", "host_path": "/x", "save_trial_best": 3}},
        {"checkpoint_storage": {"type": "s3", "bucket": "b", "save_trial_best": 3}},
    ),
    (
        "checkpoint storage GC knobs over the master's storage",
        {"checkpoint_storage": {"save_trial_latest": 0}},
        {"checkpoint_storage": {"type": "shared_fs", "host_path": "/x"}},
        {"checkpoint_storage": {"type": "shared_fs", "host_path": "/x", "save_trial_latest": 0}},
    ),
    (
        "log policies add defaults by name",
        {"log_policies": [{"name": "a", "pattern": "x"}]},
        {"log_policies": [{"name": "a", "pattern": "y"}, {"name": "b", "pattern": "z"}]},
        {"log_policies": [{"name": "a", "pattern": "x"}, {"name": "b", "pattern": "z"}]},
    ),
    (
        "environment variables: defaults first, then the user's",
        {"environment": {"environment_variables": ["A=1"]}},
        {"environment": {"environment_variables": {"cpu": ["B=2"], "gpu": ["C=3"]}}},
        {
            "environment": {
                "environment_variables": {
                    "cpu": ["B=2", "A=1"],
                    "cuda": ["C=3", "A=1"],
                    "rocm": ["A=1"],
                }
            }
        },
    ),
    (
        "image string wins over a default map",
        {"environment": {"image": "me/img"}},
        {"environment": {"image": {"cpu": "c", "cuda": "g"}}},
        {"environment": {"image": "me/img"}},
    ),
]


@pytest.mark.parametrize(
    ("user", "defaults", "expected"), [c[1:] for c in MERGE_CASES], ids=[c[0] for c in MERGE_CASES]
)
def test_merge(user: dict[str, Any], defaults: dict[str, Any], expected: dict[str, Any]) -> None:
    snapshot = repr((user, defaults))
    assert expconf.merge(user, defaults) == expected
    assert repr((user, defaults)) == snapshot  # inputs untouched


OVERRIDE_CASES: list[tuple[dict[str, Any], list[str], dict[str, Any]]] = [
    ({}, ["searcher.max_trials=5"], {"searcher": {"max_trials": 5}}),
    (
        {"searcher": {"name": "random"}},
        ["searcher.name=grid", "searcher.metric=loss"],
        {"searcher": {"name": "grid", "metric": "loss"}},
    ),
    ({}, ["resources.shm_size=1.5G"], {"resources": {"shm_size": "1.5G"}}),
    ({}, ["debug=true", "max_restarts=0"], {"debug": True, "max_restarts": 0}),
    ({}, ["labels=[a, b]"], {"labels": ["a", "b"]}),
    ({}, ["data={x: 1}"], {"data": {"x": 1}}),
    ({"description": "x"}, ["description=null"], {"description": None}),
    ({}, ["description="], {"description": ""}),
    ({}, ["description=a=b"], {"description": "a=b"}),
    ({"labels": ["a", "b"]}, ["labels[1]=c"], {"labels": ["a", "c"]}),
    ({"labels": ["a"]}, ["labels[1]=c"], {"labels": ["a", "c"]}),
    (
        {"bind_mounts": [{"host_path": "/a"}]},
        ["bind_mounts[0].read_only=true"],
        {"bind_mounts": [{"host_path": "/a", "read_only": True}]},
    ),
    ({}, ["bind_mounts[0].host_path=/x"], {"bind_mounts": [{"host_path": "/x"}]}),
    (
        {"environment": None},
        ["environment.image.cpu=me/img"],
        {"environment": {"image": {"cpu": "me/img"}}},
    ),
    ({"m": [[1, 2]]}, ["m[0][1]=9"], {"m": [[1, 9]]}),
]


@pytest.mark.parametrize(("config", "overrides", "expected"), OVERRIDE_CASES)
def test_apply_overrides(
    config: dict[str, Any], overrides: list[str], expected: dict[str, Any]
) -> None:
    snapshot = repr(config)
    assert expconf.apply_overrides(config, overrides) == expected
    assert repr(config) == snapshot


@pytest.mark.parametrize(
    ("config", "override", "fragment"),
    [
        ({}, "searcher.max_trials", "expected KEY.PATH=VALUE"),
        ({}, "=3", "empty field path"),
        ({}, "a..b=3", "bad field path segment ''"),
        ({}, "a[x]=3", "bad field path segment 'a[x]'"),
        ({}, "labels=[a", "bad YAML value"),
        ({"labels": ["a"]}, "labels[5]=b", "index 5 is out of range (the list has 1 items)"),
        ({"max_restarts": 3}, "max_restarts.x=1", "max_restarts is not a mapping"),
        ({"searcher": {"name": "x"}}, "searcher[0]=1", "searcher is not a list"),
    ],
)
def test_bad_overrides_name_the_override(
    config: dict[str, Any], override: str, fragment: str
) -> None:
    with pytest.raises(ValueError) as info:
        expconf.apply_overrides(config, [override])
    assert repr(override) in str(info.value)
    assert fragment in str(info.value)


def test_overrides_then_validate() -> None:
    raw = {
        "entrypoint": "python3 train.py",
        "searcher": {"name": "random", "metric": "m", "max_trials": 2},
    }
    config = expconf.apply_overrides(raw, ["searcher.max_trials=ten"])
    errors = expconf.sanity_check(config)
    assert errors == ['searcher.max_trials: must be an integer, got "ten"']


@pytest.mark.parametrize(
    ("hparams", "flat"),
    [
        (
            {"lr": 0.1, "optimizer": {"name": "sgd", "momentum": {"beta": 0.9}}},
            {"lr": 0.1, "optimizer.name": "sgd", "optimizer.momentum.beta": 0.9},
        ),
        ({"a": {}, "b": [1, {"c": 2}]}, {"b": [1, {"c": 2}]}),
        (
            {
                "opt": {"lr": {"type": "log", "minval": -3, "maxval": -1, "base": 10}},
                "k": {"type": "const", "val": 3},
            },
            {
                "opt.lr": {"type": "log", "minval": -3, "maxval": -1, "base": 10},
                "k": {"type": "const", "val": 3},
            },
        ),
        ({"model": {"type": "resnet", "depth": 50}}, {"model.type": "resnet", "model.depth": 50}),
    ],
)
def test_flatten_hparams(hparams: dict[str, Any], flat: dict[str, Any]) -> None:
    assert expconf.flatten_hparams(hparams) == flat


def test_import_is_light() -> None:
    code = (
        "import sys, determined.config as c; "
        "heavy = {'torch', 'tensorflow', 'requests', 'jsonschema', 'fastapi', 'numpy'} & set(sys.modules); "
        "print(sorted(heavy))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]"
