"""``det-cli launch``: an experiment config composed from examples/hydra/conf, submitted to a real
master; the composed hyperparameters reach the trials; user errors are one line and exit 1."""

from __future__ import annotations

import json
import pathlib
import socket
import subprocess
import sys
from typing import Any

import pytest
import yaml
from e2e.harness import EXAMPLES, MasterAPI

from determined.cli.hydra import compose_experiment_config, launch_main
from determined.master import Master

CONF = EXAMPLES / "hydra" / "conf"


def created_id(out: str) -> int:
    lines = [line for line in out.splitlines() if line.startswith("Created experiment ")]
    assert len(lines) == 1, out
    return int(lines[0].split()[-1])


def trial_hparams(api: MasterAPI, trial_id: int) -> dict[str, Any]:
    """What the trial printed as ``det.get_cluster_info().trial.hparams``."""
    lines = [line for line in api.logs(trial_id) if line.startswith("hparams: ")]
    assert len(lines) == 1, api.logs(trial_id)
    return dict(json.loads(lines[0][len("hparams: ") :]))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("det-cli launch: error: "), lines[0]
    return lines[0]


# ---- composing (no master) ----------------------------------------------------------------------


def test_dry_run_prints_the_composed_experiment(capsys: pytest.CaptureFixture[str]) -> None:
    code = launch_main(
        [
            "--config-dir",
            str(CONF),
            "searcher=adaptive",
            "hyperparameters.lr.maxval=0.1",
            "--dry-run",
        ]
    )
    assert code == 0
    config = yaml.safe_load(capsys.readouterr().out)
    assert config["searcher"]["name"] == "adaptive_asha"
    assert config["hyperparameters"]["lr"] == {"type": "double", "minval": 0.001, "maxval": 0.1}
    assert config["name"] == "hydra-linear-adaptive_asha"  # interpolations are resolved
    assert config["searcher"]["max_time"] == config["hyperparameters"]["steps"] == 50
    assert config["entrypoint"] == "python3 train.py"
    assert "defaults" not in config and "hydra" not in config


def test_groups_appends_and_deletions(tmp_path: pathlib.Path) -> None:
    config = compose_experiment_config(
        CONF, "config", ["hyperparameters=fixed", "+max_restarts_note=2", "~description"]
    )
    assert config["hyperparameters"] == {"lr": 0.05, "batch_size": 16, "steps": 50, "seed": 0}
    assert config["max_restarts_note"] == 2
    assert "description" not in config


def test_hydra_section_of_the_config_dir_is_left_out(tmp_path: pathlib.Path) -> None:
    (tmp_path / "config.yaml").write_text(
        "hydra:\n  job:\n    chdir: true\nname: x\nentrypoint: python3 t.py\n"
        "searcher: {name: single, metric: m}\n"
    )
    assert compose_experiment_config(tmp_path) == {
        "name": "x",
        "entrypoint": "python3 t.py",
        "searcher": {"name": "single", "metric": "m"},
    }


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["searcher=nope"], "Could not find 'searcher/nope' Available options in 'searcher'"),
        (["hyperparameters.nope=1"], "Could not override 'hyperparameters.nope'"),
        (["searcher.metric=["], "override 'searcher.metric=['"),
        (["searcher=random", "searcher.max_trials=???"], "Missing mandatory value: max_trials"),
        (["--config-name", "other"], "--config-name:"),
        (["--config-dir", "/does/not/exist"], "--config-dir: '/does/not/exist' is not a directory"),
    ],
)
def test_bad_input_is_one_line_and_exit_1(
    args: list[str], expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert launch_main(["--config-dir", str(CONF), *args, "--dry-run"]) == 1
    assert expected in one_error_line(capsys)


def test_master_down_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    assert launch_main(["--config-dir", str(CONF), "-m", url]) == 1
    line = one_error_line(capsys)
    assert f"no master at {url}" in line and "det-master up" in line


# ---- against a master ---------------------------------------------------------------------------


def test_composed_hyperparameters_reach_the_trials(
    det_master: Master, api: MasterAPI, capsys: pytest.CaptureFixture[str]
) -> None:
    code = launch_main(
        [
            "--config-dir",
            str(CONF),
            "-m",
            det_master.url,
            "searcher=random",
            "searcher.max_trials=2",
            "hyperparameters.lr.minval=0.01",
            "hyperparameters.lr.maxval=0.02",
            "hyperparameters.batch_size=8",
            "+hyperparameters.tag=hydra",
        ]
    )
    assert code == 0
    experiment_id = created_id(capsys.readouterr().out)
    assert api.wait_experiment(experiment_id) == "STATE_COMPLETED", api.debug(experiment_id)
    config = api.experiment(experiment_id)["config"]
    assert config["name"] == "hydra-linear-random"
    assert config["hyperparameters"]["lr"]["maxval"] == 0.02
    trials = api.trials(experiment_id)
    assert len(trials) == 2
    for trial in trials:
        seen = trial_hparams(api, trial["id"])
        assert seen == trial["hparams"]
        assert 0.01 <= seen["lr"] < 0.02
        assert seen["batch_size"] == 8 and seen["tag"] == "hydra"
        assert api.metrics(trial["id"], "validation"), "the trial reported its searcher metric"


def det_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """The installed ``det-cli`` console script, as a user runs it."""
    script = pathlib.Path(sys.executable).parent / "det-cli"
    return subprocess.run(
        [str(script), *args], capture_output=True, text=True, timeout=120, cwd=EXAMPLES / "hydra"
    )


def test_det_cli_launch_follows_the_first_trial(det_master: Master, api: MasterAPI) -> None:
    result = det_cli(
        "launch", "-m", det_master.url, "hyperparameters=fixed", "hyperparameters.lr=0.07", "-f"
    )
    assert result.returncode == 0, result.stderr
    experiment_id = created_id(result.stdout)
    trial_id = api.trials(experiment_id)[0]["id"]
    assert f"Following first trial with ID {trial_id}" in result.stdout
    assert 'hparams: {"batch_size": 16, "lr": 0.07, "seed": 0, "steps": 50}' in result.stdout
    assert f"det trial logs -f {trial_id}" in result.stderr
    assert api.wait_experiment(experiment_id) == "STATE_COMPLETED"


def test_det_cli_launch_bad_override_is_one_line() -> None:
    result = det_cli("launch", "searcher=nope", "--dry-run")
    assert result.returncode == 1
    assert result.stdout == ""
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("det-cli launch: error: In 'config': Could not find 'searcher/nope'")


def test_paused_and_explicit_context(
    det_master: Master, api: MasterAPI, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    context = tmp_path / "ctx"
    context.mkdir()
    (context / "train.py").write_text("print('from the explicit context')\n")
    args = ["-cd", str(CONF), "-m", det_master.url, "--context", str(context), "--paused"]
    assert launch_main(args) == 0
    experiment_id = created_id(capsys.readouterr().out)
    assert api.experiment(experiment_id)["state"] == "STATE_PAUSED"
    assert all(t["state"] != "STATE_COMPLETED" for t in api.trials(experiment_id))
    api.post(f"/api/v1/experiments/{experiment_id}/activate")
    assert api.wait_experiment(experiment_id) in {"STATE_COMPLETED", "STATE_ERROR"}
    (trial,) = api.trials(experiment_id)
    assert any("from the explicit context" in line for line in api.logs(trial["id"]))


def test_missing_context_is_one_line(
    det_master: Master, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["-cd", str(CONF), "-m", det_master.url, "--context", "/does/not/exist"]
    assert launch_main(args) == 1
    assert "--context: '/does/not/exist' is not a directory" in one_error_line(capsys)


def test_master_refusal_is_one_line(det_master: Master, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["-cd", str(CONF), "-m", det_master.url, "searcher.name=bogus_searcher"]
    assert launch_main(args) == 1
    line = one_error_line(capsys)
    assert "the master refused the experiment" in line and "searcher" in line


def test_composing_leaves_hydras_global_state_alone() -> None:
    from hydra import version
    from hydra.core.global_hydra import GlobalHydra
    from packaging.version import Version

    before = version.getbase()
    compose_experiment_config(CONF)
    after = version.getbase()  # unset is a sentinel object that the state snapshot copies
    assert after == before if isinstance(before, Version) else not isinstance(after, Version)
    assert not GlobalHydra.instance().is_initialized()
