"""``ClusterInfo.trial``: the public ``config``/``steps_completed``/``debug`` and upstream's names."""

from __future__ import annotations

import json
import pathlib

from determined import ClusterInfo, TrialInfo


def _trial_info() -> TrialInfo:
    return TrialInfo(
        trial_id=3,
        experiment_id=2,
        trial_seed=7,
        hparams={"lr": 0.1},
        config={"searcher": {"name": "single"}, "data": {"path": "/d"}},
        steps_completed="40",  # type: ignore[arg-type]  # JSON from older launchers
        trial_run_id=2,
        debug=1,  # type: ignore[arg-type]
        inter_node_network_interface=None,
    )


def _cluster_info(trial: TrialInfo) -> ClusterInfo:
    return ClusterInfo(
        master_url="localhost",
        cluster_id="c",
        agent_id="a",
        slot_ids=[0],
        task_id="t",
        allocation_id="t.1",
        session_token="s",
        task_type="TRIAL",
        trial_info=trial,
    )


def test_public_fields_and_upstream_private_names_are_the_same_values() -> None:
    trial = _trial_info()
    assert trial.config["searcher"] == {"name": "single"}
    assert (trial.steps_completed, trial.debug) == (40, True)
    # User code written for Determined reads (and sometimes sets) the underscored names.
    assert trial._config is trial.config
    assert (trial._steps_completed, trial._debug) == (40, True)
    trial._steps_completed = "50"  # type: ignore[assignment]
    trial._debug = 0  # type: ignore[assignment]
    trial._config = {"searcher": {"name": "random"}}
    assert (trial.steps_completed, trial.debug) == (50, False)
    assert trial.config == {"searcher": {"name": "random"}}


def test_the_json_form_round_trips_with_the_public_fields(tmp_path: pathlib.Path) -> None:
    info = _cluster_info(_trial_info())
    data = info.to_dict()["trial_info"]
    assert (data["config"], data["steps_completed"], data["debug"]) == (
        _trial_info().config,
        40,
        True,
    )
    info.write(tmp_path / "cluster.json")
    again = ClusterInfo.read(tmp_path / "cluster.json")
    assert again.trial.config == info.trial.config
    assert (again.trial.steps_completed, again.trial.debug) == (40, True)
    assert again.user_data == {"path": "/d"}


def test_a_config_encoded_beforehand_writes_the_same_file(tmp_path: pathlib.Path) -> None:
    """det-master hands the config it encoded once per experiment: the file is byte for byte the
    one encoding it again gives, whatever the hyperparameters hold (a string like the marker the
    splice uses among them)."""
    trial = _trial_info()
    trial.hparams = {"tag": "det-config-0123456789abcdef", "lr": 0.1}
    info = _cluster_info(trial)
    info.write(tmp_path / "plain.json")
    info.write(tmp_path / "spliced.json", config_json=json.dumps(trial.config))
    assert (tmp_path / "spliced.json").read_bytes() == (tmp_path / "plain.json").read_bytes()
    assert ClusterInfo.read(tmp_path / "spliced.json").trial.config == trial.config
    assert (tmp_path / "spliced.json").stat().st_mode & 0o777 == 0o600
