"""Finding or creating the master's records of an unmanaged run, and the ClusterInfo it gets.

An unmanaged run is a training script started by hand (or by Slurm, Ray, a notebook...) rather than
by the master. The chief asks the master for its experiment and trial (by external ids, so a re-run
finds the same ones), starts a new run of the trial and learns the checkpoint to resume from; every
rank then builds the same :class:`determined.ClusterInfo` from the chief's answer.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import yaml

import determined

if TYPE_CHECKING:
    from determined.core import DistributedContext
    from determined.experimental import Determined

logger = logging.getLogger("determined.core")


def _find_or_create(
    client: Determined,
    config: dict[str, Any],
    external_experiment_id: str | None,
    external_trial_id: str | None,
    hparams: dict[str, Any],
) -> dict[str, Any]:
    """The chief's calls to the master; everything the ranks need to build their ClusterInfo."""
    api = client._api
    text = yaml.safe_dump(config, sort_keys=False)
    if external_experiment_id is None:
        answer = api.experiments.create_unmanaged(text)
    else:
        answer = api.experiments.put_unmanaged(external_experiment_id, text)
    exp_id = int(answer["experiment"]["id"])
    exp_config = dict(answer.get("config") or config)
    if external_trial_id is None:
        trial = api.trials.create_unmanaged(exp_id, hparams)["trial"]
    else:
        trial = api.trials.put_unmanaged(exp_id, external_trial_id, hparams)["trial"]
    trial_id = int(trial["id"])
    started = api.trials.start_unmanaged(trial_id, resume=True)
    cluster_id = str(api.master.info().get("clusterId") or "")
    return {
        "experiment_id": exp_id,
        "trial_id": trial_id,
        "task_id": str(trial["taskId"]),
        "config": exp_config,
        "trial_run_id": int(started["trialRunId"]),
        "steps_completed": int(started.get("stepsCompleted") or 0),
        "latest_checkpoint": started.get("latestCheckpoint") or None,
        "cluster_id": cluster_id,
    }


def get_or_create_experiment_and_trial(
    client: Determined,
    config: dict[str, Any],
    external_experiment_id: str | None,
    external_trial_id: str | None,
    hparams: dict[str, Any] | None,
    distributed: DistributedContext,
) -> determined.ClusterInfo:
    """The ClusterInfo of a new run of this process's unmanaged trial.

    The chief (rank 0) talks to the master and broadcasts the answer; a failure there is raised on
    every rank.

    Raises:
        ValueError: ``external_trial_id`` without ``external_experiment_id`` (a trial is only found
            again inside its experiment), or an external id that is not a string.
    """
    for name, value in (
        ("external_experiment_id", external_experiment_id),
        ("external_trial_id", external_trial_id),
    ):
        if value is not None and (not isinstance(value, str) or not value):
            raise ValueError(f"{name}: must be a non-empty string, got {value!r}")
    if external_trial_id is not None and external_experiment_id is None:
        raise ValueError(
            "external_trial_id needs external_experiment_id: a trial is found again only inside "
            "its experiment"
        )
    hparams = dict(hparams or {})
    if distributed.rank == 0:
        try:
            found = _find_or_create(
                client, config, external_experiment_id, external_trial_id, hparams
            )
        except Exception as exc:
            if distributed.size > 1:
                distributed.broadcast(("error", f"{type(exc).__name__}: {exc}"))
            raise
        if distributed.size > 1:
            distributed.broadcast(("ok", found))
    else:
        kind, found = distributed.broadcast(None)
        if kind == "error":
            raise RuntimeError(f"core_v2.init() failed on the chief: {found}")
    if found["latest_checkpoint"]:
        logger.info(
            "unmanaged trial %s resumes from checkpoint %s",
            found["trial_id"],
            found["latest_checkpoint"],
        )
    return determined.ClusterInfo(
        master_url=client._master,
        cluster_id=found["cluster_id"],
        agent_id="unmanaged",
        slot_ids=[],
        task_id=found["task_id"],
        allocation_id=found["task_id"],
        session_token=client._session.token or "",
        task_type="TRIAL",
        latest_checkpoint=found["latest_checkpoint"],
        trial_info=determined.TrialInfo(
            trial_id=found["trial_id"],
            experiment_id=found["experiment_id"],
            trial_seed=0,
            hparams=hparams,
            config=found["config"],
            steps_completed=found["steps_completed"],
            trial_run_id=found["trial_run_id"],
            debug=False,
            inter_node_network_interface=None,
        ),
        rendezvous_info=determined.RendezvousInfo(["127.0.0.1"], 0, [0]),
    )


def url_reverse_webui_exp_view(master_url: str, experiment_id: int) -> str:
    """The web UI's page of an experiment on the master at ``master_url``."""
    return f"{master_url.rstrip('/')}/experiments/{int(experiment_id)}"
