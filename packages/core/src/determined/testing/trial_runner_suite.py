"""The conformance suite for trial runners (implementations of the ``det_trial_runner`` hook).

Subclass it in a test module with a name pytest collects, point it at a tiny Trial class of the
framework and say how its training length is counted::

    from determined.testing.trial_runner_suite import TrialRunnerSuite

    class TestMyRunner(TrialRunnerSuite):
        entrypoint = "tiny_trial:TinyTrial"           # module:Class, importable from context_dir
        context_dir = pathlib.Path(__file__).parent
        runner = "my_plugin._runner.MyTrialRunner"    # the runner the hook must pick
        searcher_metric = "val_loss"

        def experiment_config(self) -> dict[str, Any]:
            return {"hyperparameters": {"global_batch_size": 4}, "scheduling_unit": 1}

Every test trains for real, off-cluster, as ``det.experimental.create(..., mode=Mode.LOCAL)`` does
(the runner gets a ClusterInfo like the master's; Core API contexts stay local). All runs of a
class share one fresh interpreter (:mod:`determined.testing.trial_runs`), so the framework is
imported once and never into the test process. The runs are:

- ``first``: ``lengths[0]`` units from scratch;
- ``resumed``: ``lengths[1]`` units, from ``first``'s last checkpoint;
- ``preempted``: ``lengths[1]`` units from scratch, with a preemption signal from the start.
"""

from __future__ import annotations

import copy
import json
import os
import pathlib
import subprocess
import sys
from typing import Any, ClassVar

import pytest

from determined.testing.trial_runs import TrialRun

LAUNCHER_VARIABLES = (
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
    "MASTER_PORT", "CROSS_RANK", "CROSS_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE", "TF_CONFIG",
    "USE_TORCH_DISTRIBUTED", "USE_DEEPSPEED", "OMPI_COMM_WORLD_RANK",
)  # fmt: skip
"""Variables of distributed launchers, removed from the runs' environment (one process each)."""


class TrialRunnerSuite:
    """Tests every trial runner must pass; a subclass names a tiny trial of its framework.

    Attributes:
        entrypoint: ``module:TrialClass``, as an experiment's ``entrypoint`` names it.
        context_dir: the directory ``module`` is imported from (put first on ``PYTHONPATH``).
        runner: ``module.QualName`` of the runner the hook must return for the class.
        searcher_metric: a validation metric the trial reports; ``smaller_is_better`` ranks it.
        length_unit: the unit of ``searcher.max_length`` (``batches``, ``epochs``, ``records``).
        batches_per_unit: batches (``steps_completed``) in one ``length_unit``.
        lengths: the first run's and the resumed run's training lengths, in ``length_unit``.
        python: the interpreter of the runs (another venv's, for a framework installed there).
        timeout: seconds the runs of one class may take together.
    """

    entrypoint: ClassVar[str]
    context_dir: ClassVar[str | os.PathLike[str]]
    runner: ClassVar[str]
    searcher_metric: ClassVar[str]
    smaller_is_better: ClassVar[bool] = True
    length_unit: ClassVar[str] = "batches"
    batches_per_unit: ClassVar[int] = 1
    lengths: ClassVar[tuple[int, int]] = (4, 8)
    python: ClassVar[str | os.PathLike[str]] = sys.executable
    timeout: ClassVar[float] = 300

    # ---------------------------------------------------------------------------- what a subclass sets

    def experiment_config(self) -> dict[str, Any]:
        """The experiment config of the tiny trial (hyperparameters, periods), without a searcher
        or checkpoint storage: the suite adds those. Validate at least once per first run, so
        the first run's end (its searcher length) has validation metrics."""
        return {}

    def run_environment(self) -> dict[str, str]:
        """Extra environment variables for the runs (e.g. ``KERAS_BACKEND``)."""
        return {}

    # ---------------------------------------------------------------------------- the runs

    def config(self, length: int, storage: pathlib.Path) -> dict[str, Any]:
        """The experiment config of a run of ``length`` units storing checkpoints in ``storage``."""
        config = copy.deepcopy(self.experiment_config())
        config["searcher"] = {
            "name": "single",
            "metric": self.searcher_metric,
            "smaller_is_better": self.smaller_is_better,
            "max_length": {self.length_unit: length},
        }
        config["checkpoint_storage"] = {"type": "shared_fs", "host_path": str(storage)}
        return config

    def steps(self, length: int) -> int:
        """``steps_completed`` at the end of ``length`` units."""
        return length * self.batches_per_unit

    @pytest.fixture(scope="class")
    @classmethod
    def runs(cls, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
        """The runner the hook picked, and the ``first``/``resumed``/``preempted`` TrialRuns."""
        self = cls()
        work = tmp_path_factory.mktemp(cls.__name__)
        # The default off-cluster storage (XDG_DATA_HOME/determined) and the config's are one, so
        # a runner finds the checkpoints whichever of the two it uses.
        storage = work / "data" / "determined"
        first, second = self.lengths
        spec = {
            "entrypoint": self.entrypoint,
            "runs": [
                {"config": self.config(first, storage)},
                {"config": self.config(second, storage), "resume_from": 0},
                {"config": self.config(second, storage), "preempt": True},
            ],
        }
        (work / "spec.json").write_text(json.dumps(spec))
        (work / "tmp").mkdir()
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("DET_", "PYTHON", "VIRTUAL_ENV")) and k not in LAUNCHER_VARIABLES
        }
        env["PYTHONPATH"] = str(pathlib.Path(self.context_dir).resolve())
        env["TMPDIR"] = str(work / "tmp")
        env["XDG_DATA_HOME"] = str(work / "data")
        env.update(self.run_environment())
        command = [str(self.python), "-m", "determined.testing.trial_runs"]
        completed = subprocess.run(
            [*command, str(work / "spec.json"), str(work / "result.json")],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=self.timeout,
        )
        assert completed.returncode == 0, (
            f"the runs of {self.entrypoint} failed (exit {completed.returncode})\n"
            f"--- stdout\n{completed.stdout[-4000:]}\n--- stderr\n{completed.stderr[-8000:]}"
        )
        result = json.loads((work / "result.json").read_text())
        names = ("first", "resumed", "preempted")
        return {
            "runner": result["runner"],
            "is_trial_runner": result["is_trial_runner"],
            **{
                name: TrialRun.from_dict(run)
                for name, run in zip(names, result["runs"], strict=True)
            },
        }

    # ---------------------------------------------------------------------------- the tests

    def test_hook_picks_the_runner_for_the_entrypoint(self, runs: dict[str, Any]) -> None:
        assert runs["runner"] == self.runner
        assert runs["is_trial_runner"], f"{runs['runner']} does not satisfy core.TrialRunner"

    def test_off_cluster_run_trains_the_requested_length(self, runs: dict[str, Any]) -> None:
        first: TrialRun = runs["first"]
        end = self.steps(self.lengths[0])
        assert first.training, "no training metrics reported"
        assert first.training[-1][0] == end, [step for step, _ in first.training]
        assert all(0 < step <= end for step, _ in first.training)

    def test_training_and_validation_metrics_are_reported(self, runs: dict[str, Any]) -> None:
        first: TrialRun = runs["first"]
        assert first.training and first.validation
        steps = [step for step, _ in first.training]
        assert steps == sorted(steps) and len(set(steps)) == len(steps), steps
        for step, metrics in first.training + first.validation:
            assert metrics, f"an empty metrics report at step {step}"
        for step, metrics in first.validation:
            assert self.searcher_metric in metrics, (step, sorted(metrics))
            assert isinstance(metrics[self.searcher_metric], float | int), metrics

    def test_searcher_length_is_honoured(self, runs: dict[str, Any]) -> None:
        # The searcher's operation ends at its length with a validation there (the metric the
        # searcher needs), and no run trains past its length.
        for name, length in (("first", self.lengths[0]), ("resumed", self.lengths[1])):
            run: TrialRun = runs[name]
            end = self.steps(length)
            assert run.validation, f"{name}: no validation metrics"
            assert run.validation[-1][0] == end, (name, [s for s, _ in run.validation])
            assert max(s for s, _ in run.training) == end, (name, [s for s, _ in run.training])
            assert run.checkpoints[-1]["steps_completed"] == end, (name, run.checkpoints)

    def test_checkpoint_is_written_and_resumed_at_its_step(self, runs: dict[str, Any]) -> None:
        first: TrialRun = runs["first"]
        resumed: TrialRun = runs["resumed"]
        start = self.steps(self.lengths[0])
        assert first.checkpoints, "the first run stored no checkpoint"
        checkpoint = first.checkpoints[-1]
        assert checkpoint["steps_completed"] == start, checkpoint
        assert resumed.latest_checkpoint == checkpoint["uuid"]
        assert resumed.training, "the resumed run reported no training metrics"
        # It continued from the checkpoint's step: nothing reported at or before it ...
        assert min(step for step, _ in resumed.training) > start, resumed.training
        # ... and it trained the rest of its length, to the searcher's end.
        assert resumed.training[-1][0] == self.steps(self.lengths[1])
        assert resumed.checkpoints[-1]["steps_completed"] == self.steps(self.lengths[1])

    def test_preemption_stops_training_with_a_checkpoint(self, runs: dict[str, Any]) -> None:
        preempted: TrialRun = runs["preempted"]
        end = self.steps(self.lengths[1])
        assert preempted.checkpoints, "the preempted run stored no checkpoint"
        stopped_at = preempted.checkpoints[-1]["steps_completed"]
        assert 0 < stopped_at < end, f"preempted at step {stopped_at} of {end}"
        trained = [step for step, _ in preempted.training]
        assert all(step <= stopped_at for step in trained), (stopped_at, trained)
