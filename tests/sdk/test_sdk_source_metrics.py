"""Checkpoint and model-version metrics: the reports of the tasks that used a checkpoint.

A finished experiment of ``sdk_trial.py`` gives a checkpoint, registered as a model version;
inference experiments of ``inference_trial.py`` link themselves to it with
``report_task_using_checkpoint`` / ``report_task_using_model_version`` (``POST
/api/v1/trial-source-info``) and report "inference" and validation metrics, which
``Checkpoint.get_metrics`` and ``ModelVersion.iter_metrics`` read back.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from sdk.harness import TRIALS, WAIT_S, trial_config, trial_logs

from determined.client import APIError, Client, NotFoundError
from determined.experimental import Checkpoint, Determined, TrialMetrics


def _infer(sdk: Determined, **hparams: Any) -> Any:
    config = trial_config(
        name="inference",
        entrypoint="python3 inference_trial.py",
        hyperparameters=hparams,
        searcher={"name": "single", "metric": "accuracy", "max_length": 1},
    )
    exp = sdk.create_experiment(config, TRIALS)
    state = exp.wait(interval=0.05, timeout=WAIT_S)
    assert state.name == "COMPLETED", trial_logs(exp)
    (trial,) = exp.list_trials()
    return trial


@pytest.fixture(scope="module")
def lineage(master: Any, finished: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The finished experiment's best checkpoint, a model version of it, and three inference
    trials: two used the checkpoint (scale 1 and 10), one the model version (scale 100)."""
    import os

    previous = os.environ.get("DET_CONFIG_DIR")
    os.environ["DET_CONFIG_DIR"] = str(tmp_path_factory.mktemp("lineage-login"))
    try:
        sdk = Determined(master.url, "determined", "")
        checkpoint = finished.list_checkpoints()[0]
        model = sdk.create_model(f"lineage-{uuid.uuid4().hex[:8]}")
        version = model.register_version(checkpoint.uuid)
        by_checkpoint = [_infer(sdk, checkpoint_uuid=checkpoint.uuid, scale=s) for s in (1, 10)]
        by_version = _infer(sdk, model=model.name, version=version.model_version, scale=100)
    finally:
        if previous is None:
            os.environ.pop("DET_CONFIG_DIR")
        else:
            os.environ["DET_CONFIG_DIR"] = previous
    return sdk, checkpoint, version, by_checkpoint, by_version


def test_checkpoint_get_metrics_by_group(lineage: Any) -> None:
    sdk, checkpoint, _version, by_checkpoint, by_version = lineage
    reports = list(sdk.get_checkpoint(checkpoint.uuid).get_metrics("inference"))
    assert all(isinstance(r, TrialMetrics) for r in reports)
    # the model version's task used the same checkpoint, so it counts for the checkpoint too
    trial_ids = sorted({t.id for t in by_checkpoint} | {by_version.id})
    assert sorted({r.trial_id for r in reports}) == trial_ids
    assert {(r.trial_id, r.steps_completed, r.metrics["predicted"]) for r in reports} == {
        (t.id, step, step * scale)
        for t, scale in ((by_checkpoint[0], 1.0), (by_checkpoint[1], 10.0), (by_version, 100.0))
        for step in (1, 2)
    }
    assert {r.group for r in reports} == {"inference"}
    assert all(r.end_time is not None and r.trial_run_id >= 1 for r in reports)

    validation = list(checkpoint.get_metrics("validation"))
    assert sorted(r.metrics["accuracy"] for r in validation) == [0.75, 7.5, 75.0]


def test_checkpoint_get_metrics_of_every_group(lineage: Any) -> None:
    _sdk, checkpoint, _version, _by_checkpoint, _by_version = lineage
    everything = list(checkpoint.get_metrics())
    assert sorted({r.group for r in everything}) == ["inference", "validation"]
    assert len(everything) == 3 * 3
    # validation reports carry their values under "validation_metrics": read per report group
    assert all("accuracy" in r.metrics for r in everything if r.group == "validation")
    assert list(checkpoint.get_metrics("")) == everything


def test_model_version_iter_metrics(lineage: Any) -> None:
    _sdk, _checkpoint, version, _by_checkpoint, by_version = lineage
    reports = list(version.iter_metrics("inference"))
    assert [(r.trial_id, r.metrics["predicted"]) for r in reports] == [
        (by_version.id, 100.0),
        (by_version.id, 200.0),
    ]
    assert {r.group for r in version.iter_metrics()} == {"inference", "validation"}
    with pytest.warns(FutureWarning, match="iter_metrics"):
        legacy = list(version.get_metrics("inference"))
    assert legacy == reports


def test_unused_checkpoint_has_no_metrics(lineage: Any, finished: Any, master: Any) -> None:
    _sdk, checkpoint, _version, _by_checkpoint, _by_version = lineage
    other = next(c for c in finished.list_checkpoints() if c.uuid != checkpoint.uuid)
    assert list(other.get_metrics()) == []
    with pytest.raises(NotFoundError):
        list(Checkpoint(master.session("determined"), "no-such-checkpoint").get_metrics())


def test_trial_source_info_route(lineage: Any, master: Any) -> None:
    """The wire: upstream's ReportTrialSourceInfo body and GetTrialMetricsByCheckpoint filters."""
    _sdk, checkpoint, _version, by_checkpoint, _by_version = lineage
    api = Client(master.session("admin"))
    session = api.session
    trial_id = by_checkpoint[0].id
    body = {
        "trialSourceInfo": {
            "trialId": trial_id,
            "checkpointUuid": checkpoint.uuid,
            "trialSourceInfoType": "TRIAL_SOURCE_INFO_TYPE_FINE_TUNING",
        }
    }
    answer = session.request("POST", "/api/v1/trial-source-info", body=body, idempotent=False)
    assert answer == {"trialId": trial_id, "checkpointUuid": checkpoint.uuid}
    fine_tuning = api.checkpoints.metrics(
        checkpoint.uuid, group="inference", source_type="TRIAL_SOURCE_INFO_TYPE_FINE_TUNING"
    )
    assert {m["trialId"] for m in fine_tuning["metrics"]} == {trial_id}
    report = fine_tuning["metrics"][0]
    assert set(report) >= {"id", "trialId", "trialRunId", "totalBatches", "endTime", "metrics"}
    assert report["metrics"]["avg_metrics"]["predicted"] == 1.0
    # an inference-only read no longer sees the trial now recorded as fine-tuning
    inference = api.checkpoints.metrics(
        checkpoint.uuid, group="inference", source_type="TRIAL_SOURCE_INFO_TYPE_INFERENCE"
    )
    assert trial_id not in {m["trialId"] for m in inference["metrics"]}
    # restore the inference link for the other tests of the module
    body["trialSourceInfo"]["trialSourceInfoType"] = "TRIAL_SOURCE_INFO_TYPE_INFERENCE"
    session.request("POST", "/api/v1/trial-source-info", body=body, idempotent=False)

    bad = {"trialSourceInfo": {"trialId": trial_id, "checkpointUuid": "no-such-checkpoint"}}
    with pytest.raises(NotFoundError):
        session.request("POST", "/api/v1/trial-source-info", body=bad, idempotent=False)
    with pytest.raises(APIError, match="trialSourceInfoType"):
        api.checkpoints.metrics(checkpoint.uuid, source_type="TRIAL_SOURCE_INFO_TYPE_NOPE")
