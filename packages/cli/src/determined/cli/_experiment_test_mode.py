"""``det experiment create --test``: a short test experiment that also checks its checkpoint restores.

Upstream's test mode validated the config, then ran a copy of the experiment shortened to one batch
(``searcher: single``, ``max_length: {batches: 1}``) and reported the stages it passed: scheduling,
training, validation, checkpointing. det runs the same stages, then one more: it continues the
finished test trial from its latest checkpoint (the master restarts the trial with that checkpoint
as ``latest_checkpoint``, as after a pause), and the test passes only if the restarted trial ends
normally. A trial whose checkpoint cannot be loaded fails the test with the trial's last log lines.

What is shortened: where the config sets a searcher length (``max_length``, or ASHA's
``max_time``), the test's is one batch (``max_length: {batches: 1}``, as upstream's). Trial
classes (``model_def:Trial``) and Core API scripts that follow ``core.searcher.operations()`` train
for that length. A script that sets its own length (``Trainer.fit(max_length=...)``, ``--epochs``,
Lightning's ``max_steps``) trains that long; shorten it with ``--config entrypoint=...``.
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
from collections.abc import Callable
from typing import Any

from determined import client
from determined.cli import _render, _session
from determined.cli._errors import CliError

STAGES = (
    "Scheduling task",
    "Testing training",
    "Testing validation",
    "Testing checkpointing",
    "Testing restore",
)
TERMINAL = ("STATE_COMPLETED", "STATE_CANCELED", "STATE_ERROR", "STATE_DELETED")
LOG_TAIL = 40


def make_test_config(config: dict[str, Any]) -> dict[str, Any]:
    """The test experiment's config: one trial (``searcher: single``), a length of one batch where
    the config sets a length, a validation after every batch, no restarts, and at least the
    latest checkpoint kept (the restore stage needs it)."""
    test = copy.deepcopy(config)
    description = test.get("description") or test.get("name") or "experiment"
    test["description"] = f"[test-mode] {description}"
    searcher = dict(test.get("searcher") or {})
    single: dict[str, Any] = {"name": "single", "metric": searcher.get("metric")}
    if "smaller_is_better" in searcher:
        single["smaller_is_better"] = searcher["smaller_is_better"]
    if searcher.get("max_length") is not None or searcher.get("max_time") is not None:
        # Where the config sets a length, the test's is one batch. (Not otherwise: a script
        # that validates every N batches, e.g. with Lightning or Hugging Face's Trainer, would
        # then end before its first validation and fail to report its searcher metric.)
        single["max_length"] = {"batches": 1}
    test["searcher"] = {k: v for k, v in single.items() if v is not None}
    test["scheduling_unit"] = 1
    test["min_validation_period"] = {"batches": 1}
    test["max_restarts"] = 0
    storage = test.get("checkpoint_storage")
    if isinstance(storage, dict) and int(storage.get("save_trial_latest", 1) or 0) < 1:
        test["checkpoint_storage"] = {**storage, "save_trial_latest": 1}
    return test


class _Progress:
    """Prints each stage once, in order, as the trial's record shows it passed (a line per stage,
    so logs and pipes read well); a stage the trial never showed is printed as skipped."""

    def __init__(self) -> None:
        self.passed = 0

    def reach(self, stage: int) -> None:
        while self.passed < min(stage, len(STAGES)):
            print(_render.colored(f"{STAGES[self.passed]}... [✔]", "green"))
            self.passed += 1
        sys.stdout.flush()

    def skip(self, stage: int, note: str) -> None:
        """Stage ``stage`` (an index) did not happen; say so and move past it."""
        self.reach(stage)
        if self.passed == stage:
            print(_render.colored(f"{STAGES[stage]}... [-] {note}", "yellow"))
            self.passed += 1
        sys.stdout.flush()

    def fail(self) -> None:
        stage = STAGES[min(self.passed, len(STAGES) - 1)]
        print(_render.colored(f"{stage}... [✗]", "red"))
        sys.stdout.flush()


def _trained(trial: dict[str, Any]) -> bool:
    summary = trial.get("summaryMetrics") or {}
    return bool(summary.get("avg_metrics")) or int(trial.get("totalBatchesProcessed") or 0) > 0


def _validated(trial: dict[str, Any]) -> bool:
    summary = trial.get("summaryMetrics") or {}
    return bool(trial.get("latestValidation") or summary.get("validation_metrics"))


def _trial_stage(trial: dict[str, Any] | None) -> int:
    """How many stages in a row a running trial's record shows as passed."""
    if trial is None or not (trial.get("startTime") or trial.get("state") != "STATE_QUEUED"):
        return 0
    if not _trained(trial):
        return 1
    if not _validated(trial):
        return 2
    return 4 if int(trial.get("checkpointCount") or 0) > 0 else 3


def _wait(
    api: client.Client,
    experiment_id: int,
    on_poll: Callable[[dict[str, Any] | None], None],
    until: Callable[[dict[str, Any], dict[str, Any] | None], bool],
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Poll the experiment and its first trial until ``until(experiment, trial)`` holds."""
    delay = 0.1
    while True:
        experiment = api.experiments.get(experiment_id)["experiment"]
        trials = api.experiments.trials(experiment_id).get("trials") or []
        trial = min(trials, key=lambda t: int(t["id"])) if trials else None
        on_poll(trial)
        if until(experiment, trial):
            return experiment, trial
        time.sleep(delay)
        delay = min(delay * 1.5, 1.0)


def _print_log_tail(api: client.Client, trial_id: int) -> None:
    params = {"limit": LOG_TAIL, "orderBy": "ORDER_BY_DESC"}
    entries = list(api.trials.logs(trial_id, params))[::-1]
    print(f"The last {len(entries)} log lines of trial {trial_id}:", file=sys.stderr)
    for entry in entries:
        message = str(entry.get("message") or entry.get("log") or "").rstrip("\n")
        print(f"  {message}", file=sys.stderr)
    sys.stderr.flush()


def _latest_checkpoint(api: client.Client, trial_id: int) -> dict[str, Any] | None:
    checkpoints: list[dict[str, Any]] = api.trials.checkpoints(trial_id).get("checkpoints") or []
    done = [c for c in checkpoints if c.get("state") == "STATE_COMPLETED"]
    if not done:
        return None

    def steps(c: dict[str, Any]) -> int:
        meta = c.get("metadata") or {}
        return int(meta.get("steps_completed") or c.get("totalBatches") or 0)

    return max(done, key=lambda c: (steps(c), str(c.get("reportTime") or "")))


def _failed(api: client.Client, experiment_id: int, trial: dict[str, Any] | None, why: str) -> None:
    if trial is not None:
        _print_log_tail(api, int(trial["id"]))
    raise CliError(
        f"Model definition test failed: {why}. The test experiment is {experiment_id}"
        + (f"; its trial's logs: det trial logs {trial['id']}" if trial is not None else "")
    )


def run_test(args: argparse.Namespace, config: dict[str, Any], files: list[dict[str, Any]]) -> int:
    """Validate ``config``, run its test experiment through every stage, check the restore; return
    the test experiment's id. Raises CliError naming the stage that failed."""
    session = _session.setup_session(args)
    api = _session.api(args)
    text = _render.dump_yaml(config)
    print(_render.colored("Validating experiment configuration...", "yellow"))
    template = getattr(args, "template", None)
    client.create_experiment(
        session, text, files, validate_only=True, project_id=args.project_id, template=template
    )
    print(_render.colored("Experiment configuration validation succeeded! 🎉", "green"))
    test_text = _render.dump_yaml(make_test_config(config))
    created = client.create_experiment(
        session, test_text, files, activate=True, project_id=args.project_id, template=template
    )
    assert created.id is not None
    experiment_id = created.id
    print(_render.colored(f"Created test experiment {experiment_id}", "green"))
    sys.stdout.flush()
    progress = _Progress()

    def show(trial: dict[str, Any] | None) -> None:
        progress.reach(_trial_stage(trial))

    experiment, trial = _wait(api, experiment_id, show, lambda e, _t: e["state"] in TERMINAL)
    state = experiment["state"]
    if state != "STATE_COMPLETED":
        progress.fail()
        _failed(api, experiment_id, trial, f"the test trial ended {_render.state_name(state)}")
    assert trial is not None
    progress.reach(1)
    if not _trained(trial):
        progress.skip(1, "the trial reported no training metrics")
    if not _validated(trial):
        progress.skip(2, "the trial reported no validation metrics")
    checkpoint = _latest_checkpoint(api, int(trial["id"]))
    if checkpoint is None:
        progress.skip(3, "the trial saved no checkpoint")
        progress.skip(4, "no checkpoint to restore")
    else:
        progress.reach(4)
        _check_restore(api, experiment_id, int(trial["id"]), checkpoint, progress)
        progress.reach(len(STAGES))
    print(_render.colored("Model definition test succeeded! 🎉", "green"))
    _archive(api, experiment_id)
    return experiment_id


def _check_restore(
    api: client.Client,
    experiment_id: int,
    trial_id: int,
    checkpoint: dict[str, Any],
    progress: _Progress,
) -> None:
    """Continue the finished test trial from ``checkpoint``; it must end normally again."""
    uuid = checkpoint["uuid"]
    api.experiments.continue_experiment(experiment_id, "")
    print(f"Restarting trial {trial_id} from its latest checkpoint {uuid}")
    sys.stdout.flush()

    def ended(e: dict[str, Any], _t: dict[str, Any] | None) -> bool:
        return e["state"] in TERMINAL

    experiment, trial = _wait(api, experiment_id, lambda _t: None, ended)
    state = experiment["state"]
    if state != "STATE_COMPLETED":
        progress.fail()
        _failed(
            api,
            experiment_id,
            trial,
            f"checkpoint {uuid} could not be restored: the trial restarted from it ended "
            f"{_render.state_name(state)}",
        )


def _archive(api: client.Client, experiment_id: int) -> None:
    """Archive a passed test experiment so it stays out of ``det e list`` (as upstream did)."""
    try:
        api.experiments.act(experiment_id, "archive")
    except client.ClientError:
        pass
