"""Run a Trial class off-cluster through the ``det_trial_runner`` hook and record what it did.

The trial-runner conformance suite (:mod:`determined.testing.trial_runner_suite`) starts this module
in a fresh interpreter, so each framework (and its global state: TensorFlow, DeepSpeed, signal
handlers) stays out of the test process::

    python -m determined.testing.trial_runs SPEC.json RESULT.json

``SPEC.json`` holds ``{"entrypoint": "module:Class", "runs": [...]}``; each run is
``{"config": {...}, "resume_from": <index of an earlier run> | null, "preempt": bool}``. A run
trains with ``det.experimental.create(..., mode=Mode.LOCAL)`` — the runner the hook picks, a
ClusterInfo built as the master would, and Core API contexts that stay off-cluster — and
``resume_from`` passes that earlier run's last checkpoint as ``latest_checkpoint``. ``preempt``
adds a preemption source that fires as soon as training starts (as a pause or a searcher's stop
does on a master). ``RESULT.json`` gets the runner the hook picked and, per run, the metrics the
off-cluster backend logged and the checkpoints it stored (see :class:`TrialRun`).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import pathlib
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

METRICS_MESSAGE = "%s metrics at step %s: %s"
"""How det-core's off-cluster backend logs a metrics report: (group, steps_completed, metrics)."""
CHECKPOINT_MESSAGE = "checkpoint %s saved (%d files, %d bytes)"
"""How det-core's off-cluster backend logs a stored checkpoint: (uuid, files, bytes)."""


@dataclasses.dataclass
class TrialRun:
    """What one off-cluster run of a Trial class reported.

    Attributes:
        training: ``[steps_completed, metrics]`` of each training metrics report, in order.
        validation: the same for validation metrics.
        checkpoints: ``{"uuid", "steps_completed", "metadata"}`` of each stored checkpoint, in order.
        latest_checkpoint: the checkpoint the run resumed from, or ``None``.
    """

    training: list[tuple[int, dict[str, Any]]] = dataclasses.field(default_factory=list)
    validation: list[tuple[int, dict[str, Any]]] = dataclasses.field(default_factory=list)
    checkpoints: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    latest_checkpoint: str | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrialRun:
        """The run as :func:`dataclasses.asdict` wrote it to JSON."""
        return cls(
            training=[(int(s), dict(m)) for s, m in data["training"]],
            validation=[(int(s), dict(m)) for s, m in data["validation"]],
            checkpoints=list(data["checkpoints"]),
            latest_checkpoint=data.get("latest_checkpoint"),
        )


class _Recorder(logging.Handler):
    """Collects the reports det-core's off-cluster backend logs while a run trains."""

    def __init__(self, run: TrialRun) -> None:
        super().__init__(logging.INFO)
        self.run = run
        self.checkpoint_uuids: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if not isinstance(record.args, tuple):
            return
        if record.msg == METRICS_MESSAGE:
            group, step, metrics = record.args
            entry = (int(step), {k: _plain(v) for k, v in dict(metrics).items()})  # type: ignore[call-overload]
            if group == "training":
                self.run.training.append(entry)
            elif group == "validation":
                self.run.validation.append(entry)
        elif record.msg == CHECKPOINT_MESSAGE:
            self.checkpoint_uuids.append(str(record.args[0]))


def _plain(value: Any) -> Any:
    """A JSON-friendly copy of a metric value (numbers stay numbers, anything else a string)."""
    if isinstance(value, bool | int | float | str) or value is None:
        return value
    try:
        return float(value)
    except (TypeError, ValueError):
        return str(value)


@contextmanager
def _recording(run: TrialRun) -> Iterator[_Recorder]:
    recorder = _Recorder(run)
    core_logger = logging.getLogger("determined.core")
    old_level = core_logger.level
    core_logger.addHandler(recorder)
    core_logger.setLevel(logging.INFO)
    try:
        yield recorder
    finally:
        core_logger.removeHandler(recorder)
        core_logger.setLevel(old_level)


def _preempt_at_start_plugin() -> object:
    """A plugin whose preemption source fires as soon as a Core API context starts watching."""
    from determined.core import PreemptionSource
    from determined.core.plugins import hookimpl

    class PreemptAtStart(PreemptionSource):
        def start(self, on_preempt: Callable[[], None]) -> None:
            on_preempt()

    class PreemptAtStartPlugin:
        @hookimpl
        def det_preemption_sources(self, cluster_info: Any) -> list[PreemptionSource]:
            return [PreemptAtStart()]

    return PreemptAtStartPlugin()


def _checkpoint_metadata(config: dict[str, Any], uuids: Sequence[str]) -> list[dict[str, Any]]:
    """``metadata.json`` of each checkpoint, read back from the config's checkpoint storage."""
    from determined.core.plugins import checkpoint_storage

    storage = checkpoint_storage(dict(config["checkpoint_storage"]))
    found = []
    for uuid in uuids:
        with storage.restore_path(uuid, selector=lambda p: p == "metadata.json") as path:
            metadata_file = pathlib.Path(path) / "metadata.json"
            metadata = json.loads(metadata_file.read_text()) if metadata_file.exists() else {}
        found.append(
            {"uuid": uuid, "steps_completed": metadata.get("steps_completed"), "metadata": metadata}
        )
    return found


def run_trial(
    trial_class: type,
    config: dict[str, Any],
    *,
    latest_checkpoint: str | None = None,
    preempt: bool = False,
) -> TrialRun:
    """Train ``trial_class`` off-cluster with ``config`` (which must name a ``checkpoint_storage``).

    Returns what the run reported. ``preempt`` makes every preemption check answer "stop" from the
    start of training.
    """
    import determined as det
    from determined.core import plugins

    run = TrialRun(latest_checkpoint=latest_checkpoint)
    preempt_plugin = _preempt_at_start_plugin() if preempt else None
    if preempt_plugin is not None:
        plugins.get_plugin_manager().register(preempt_plugin, name="trial-runs-preempt-at-start")
    try:
        with _recording(run) as recorder:
            det.experimental.create(
                trial_class,
                config,
                mode=det.experimental.Mode.LOCAL,
                latest_checkpoint=latest_checkpoint,
            )
    finally:
        if preempt_plugin is not None:
            plugins.get_plugin_manager().unregister(preempt_plugin)
    run.checkpoints = _checkpoint_metadata(config, recorder.checkpoint_uuids)
    return run


def main(argv: Sequence[str]) -> int:
    """Run the spec in ``argv[0]``, write the result to ``argv[1]``; the exit status."""
    if len(argv) != 2:
        print(
            "usage: python -m determined.testing.trial_runs SPEC.json RESULT.json", file=sys.stderr
        )
        return 2
    from determined.core import TrialRunner
    from determined.core.plugins import trial_runner
    from determined.launch.trial import load_trial_class

    spec = json.loads(pathlib.Path(argv[0]).read_text())
    trial_class = load_trial_class(spec["entrypoint"])
    runner = trial_runner(trial_class)
    result: dict[str, Any] = {
        "runner": f"{type(runner).__module__}.{type(runner).__qualname__}",
        "is_trial_runner": isinstance(runner, TrialRunner),
        "runs": [],
    }
    runs: list[TrialRun] = []
    for run_spec in spec["runs"]:
        resume_from = run_spec.get("resume_from")
        latest = None
        if resume_from is not None:
            earlier = runs[int(resume_from)].checkpoints
            if not earlier:
                raise RuntimeError(f"run {resume_from} stored no checkpoint to resume from")
            latest = earlier[-1]["uuid"]
        runs.append(
            run_trial(
                trial_class,
                run_spec["config"],
                latest_checkpoint=latest,
                preempt=bool(run_spec.get("preempt")),
            )
        )
        result["runs"] = [dataclasses.asdict(r) for r in runs]
        pathlib.Path(argv[1]).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    sys.exit(main(sys.argv[1:]))
