"""A user error prints one clear line on stderr and exits non-zero, never a traceback."""

from __future__ import annotations

import pathlib
from collections.abc import Callable

import pytest
from cli.harness import Det
from refused_port import refusing_socket


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


def test_master_down(det: Det) -> None:
    with refusing_socket() as sock:
        url = f"localhost:{sock.getsockname()[1]}"
        code, out, err = det.run("-m", url, "e", "list")
    assert code == 1 and out == ""
    line = _one_line(err)
    assert line.startswith(f"no master at http://{url}")
    assert "det-master up" in line and "det deploy local cluster-up" in line


def test_bad_config_path(det: Det, context_dir: pathlib.Path) -> None:
    code, _, err = det.run("e", "create", "/nonexistent/exp.yaml", str(context_dir))
    assert code == 1
    assert _one_line(err) == "config file '/nonexistent/exp.yaml' does not exist"


def test_bad_yaml(det: Det, tmp_path: pathlib.Path, context_dir: pathlib.Path) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text("name: [unclosed\nentrypoint: x\n")
    code, _, err = det.run("e", "create", str(config), str(context_dir))
    assert code == 1 and "invalid experiment config file" in _one_line(err)


def test_bad_override(
    det: Det, write_config: Callable[..., pathlib.Path], context_dir: pathlib.Path
) -> None:
    code, _, err = det.run("e", "create", str(write_config()), str(context_dir), "--config", "oops")
    assert code == 1 and "--config 'oops': expected key=value" in _one_line(err)


def test_config_refused_by_master_names_the_field(
    det: Det, write_config: Callable[..., pathlib.Path], context_dir: pathlib.Path
) -> None:
    config = write_config(searcher={"name": "random", "metric": "loss", "max_trials": "many"})
    code, out, err = det.run("e", "create", str(config), str(context_dir))
    assert code == 1 and "Created" not in out and "Traceback" not in err
    # the master's message lists every problem of the config, one a line
    assert err.startswith("Failed to create experiment:")
    assert 'searcher.max_trials: must be an integer, got "many"' in err


def test_missing_context_dir(det: Det, write_config: Callable[..., pathlib.Path]) -> None:
    code, _, err = det.run("e", "create", str(write_config()), "/nonexistent/ctx")
    assert code == 1
    assert _one_line(err) == "model definition directory '/nonexistent/ctx' does not exist"


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["e", "describe", "99999"], "experiment 99999 not found"),
        (["e", "pause", "99999"], "experiment 99999 not found"),
        (["e", "logs", "99999"], "experiment 99999 not found"),
        (["t", "logs", "99999"], "trial 99999 not found"),
        (["t", "describe", "99999"], "trial 99999 not found"),
        (["c", "describe", "no-such-uuid"], "checkpoint no-such-uuid not found"),
    ],
)
def test_unknown_ids(det: Det, argv: list[str], expected: str) -> None:
    code, _, err = det.run(*argv)
    assert code == 1
    line = _one_line(err)
    assert line.startswith("Failed to ") and expected in line


def test_usage_errors_exit_2(det: Det) -> None:
    code, _, err = det.run("e", "pause", "not-a-number")
    assert code == 2 and "invalid experiment ID 'not-a-number'" in err
    code, _, err = det.run("no-such-command")
    assert code == 2 and "invalid choice" in err


def test_version_and_help(det: Det) -> None:
    code, out, _ = det.run("-v")
    assert code == 0 and out.startswith("det ")
    code, out, _ = det.run("e", "--help")
    assert code == 0 and "list-checkpoints" in out
