"""Pure pieces of the CLI: tables, command-name aliases, ``--config`` overrides, time formats."""

from __future__ import annotations

import argparse

import pytest

from determined.cli import CliError, make_parser
from determined.cli._config_file import apply_overrides
from determined.cli._declarative import names
from determined.cli._render import format_percent, format_time, sizeof_fmt, table


def test_table_is_presto_shaped() -> None:
    text = table(["ID", "Name", "H-Params"], [[1, "a", '{\n    "lr": 0.1\n}'], [12, "bb", None]])
    assert text.splitlines() == [
        " ID | Name | H-Params",
        "----+------+---------------",
        "  1 | a    | {",
        '    |      |     "lr": 0.1',
        "    |      | }",
        " 12 | bb   |",
    ]


def test_table_numbers_right_bools_left_floats_g() -> None:
    text = table(["A", "B"], [[0.123456789, True], [2.0, False]])
    lines = text.splitlines()
    assert lines[2] == " 0.123457 | True"
    assert lines[3] == "        2 | False"


def test_names_follow_upstream_alias_rules() -> None:
    assert names("e|xperiment") == ("experiment", ["e"])
    assert names("list ls") == ("list", ["ls"])
    assert names("c|heck|out co") == ("checkout", ["c", "check", "co"])


@pytest.mark.parametrize(
    "argv",
    [
        ["e", "ls"],
        ["experiment", "list"],
        ["t", "logs", "3", "--tail", "5"],
        ["c", "download", "x"],
        ["m", "ls"],
        ["u", "whoami"],
        ["e", "lt", "1"],
        ["e", "lc", "1", "--best", "2"],
        ["e", "unpause", "1"],
        ["d", "local", "cluster-up"],
        ["deploy", "local", "master-down"],
    ],
)
def test_aliases_parse(argv: list[str]) -> None:
    args = make_parser().parse_args(argv)
    assert callable(args.func)


def test_default_subcommand_lists() -> None:
    args = make_parser().parse_args(["e"])
    assert callable(args.func)


def test_overrides_nest_parse_and_merge() -> None:
    config = {"resources": {"slots_per_trial": 1, "priority": 5}, "slurm": None}
    out = apply_overrides(
        config,
        [
            "resources.slots_per_trial=2",
            "name=x",
            "labels=a,b",
            'hyperparameters={"lr": 0.1}',
            "slurm.sbatch_args=[--mem=1g]",
            'bind_mounts={"host_path": "/a", "container_path": "/b"}',
        ],
    )
    assert out["resources"] == {"slots_per_trial": 2, "priority": 5}
    assert out["name"] == "x"
    assert out["labels"] == ["a", "b"]
    assert out["hyperparameters"] == {"lr": 0.1}
    assert out["slurm"] == {"sbatch_args": ["--mem=1g"]}
    assert out["bind_mounts"] == [{"host_path": "/a", "container_path": "/b"}]


@pytest.mark.parametrize("bad", ["novalue", "=3", "a..b=1"])
def test_bad_override_names_it(bad: str) -> None:
    with pytest.raises(CliError, match="--config"):
        apply_overrides({}, [bad])


def test_time_and_sizes() -> None:
    assert format_time("2024-01-02T03:04:05.123456789Z") == "2024-01-02 03:04:05+0000"
    assert format_time("2024-01-02T05:04:05+02:00") == "2024-01-02 03:04:05+0000"
    assert format_time(None) is None
    assert format_percent(0.5) == "50.0%"
    assert sizeof_fmt(1536) == "1.5KB"


def test_parser_rejects_bad_experiment_id() -> None:
    with pytest.raises(SystemExit):
        make_parser().parse_args(["e", "describe-nope"])
    with pytest.raises(SystemExit):
        make_parser().parse_args(["e", "pause", "abc"])
    assert isinstance(make_parser(), argparse.ArgumentParser)
