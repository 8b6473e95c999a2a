"""The Keras names Determined 0.38 deprecated, end to end, in one process (TensorFlow imports are slow).

Run as ``python legacy_names_scenario.py WORKDIR`` under Keras 3 (``KERAS_BACKEND=tensorflow``) or
tf.keras 2.15 (the legacy venv). The TFKerasTrials of ``legacy_names_trials.py`` train for real,
off-cluster, through det's trial runner (``determined.testing.trial_runs.run_trial``):

A. a fresh run: det.keras.callbacks.Callback's workload and checkpoint hooks fire, its state is
   saved, det.keras.callbacks.TensorBoard writes into the trial's TensorBoard directory;
B. A resumed: get_initial_batch() is A's last batch, the callback's state comes back;
C. load_model_from_checkpoint_path on B's checkpoint gives B's final weights and optimizer state;
D. preempted at its first batch, then resumed: the cut epoch is hidden from the callbacks;
E. EarlyStopping and ReduceLROnPlateau end a trial early and lower its learning rate;
F. SequenceAdapter data with loader settings feeds a trial;
and, outside any trial: every deprecated name warns, EarlyStopping works in a plain ``fit()``,
get_rng_state/set_rng_state restore the random generators.
Prints ``ok <keras version> <backend> keras<major>``.
"""

from __future__ import annotations

import json
import os
import pathlib
import pickle
import random
import sys
import warnings
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import legacy_names_trials as trials
import numpy as np

import determined as det
from determined.keras._compat import KERAS_MAJOR, backend_name, keras
from determined.testing.trial_runs import TrialRun, run_trial


def config(storage: pathlib.Path, epochs: int) -> dict[str, Any]:
    return {
        "hyperparameters": {"global_batch_size": trials.BATCH},
        "scheduling_unit": 4,
        "min_validation_period": {"epochs": 1},
        "min_checkpoint_period": {"epochs": 1},
        "searcher": {"name": "single", "metric": "val_loss", "max_length": {"epochs": epochs}},
        "checkpoint_storage": {"type": "shared_fs", "host_path": str(storage)},
    }


def run(trial_class: type, storage: pathlib.Path, epochs: int, **kwargs: Any) -> TrialRun:
    trials.EVENTS.pop("recorder", None)
    return run_trial(trial_class, config(storage, epochs), **kwargs)


def storage_dir() -> pathlib.Path:
    """The checkpoint storage of every run: det-core's off-cluster default, which the trial
    runner's core context uses (``$XDG_DATA_HOME/determined``, set by the test)."""
    return pathlib.Path(os.environ["XDG_DATA_HOME"], "determined")


def calls(kind: str) -> list[list[Any]]:
    return [call[1:] for call in trials.EVENTS["recorder"].calls if call[0] == kind]


def same(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    return len(a) == len(b) and all(np.allclose(x, y) for x, y in zip(a, b, strict=True))


def check_warnings(workdir: pathlib.Path) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        det.keras.callbacks.EarlyStopping()
        det.keras.callbacks.ReduceLROnPlateau()
        det.keras.callbacks.TensorBoard(log_dir=str(workdir / "tb"))
        det.keras.TFKerasTensorBoard(log_dir=str(workdir / "tb"))
        det.keras.SequenceAdapter(trials.ArraySequence(trials.data(0)))

        class Mine(det.keras.callbacks.Callback):
            pass

    messages = [str(w.message) for w in caught if issubclass(w.category, FutureWarning)]
    for name in (
        "det.keras.callbacks.EarlyStopping",
        "det.keras.callbacks.ReduceLROnPlateau",
        "det.keras.callbacks.TensorBoard",
        "det.keras.TFKerasTensorBoard",
        "det.keras.SequenceAdapter",
        "det.keras.callbacks.Callback (subclassed by",
    ):
        assert any(m.startswith(name) and "deprecated" in m for m in messages), (name, messages)


def check_rng() -> None:
    """get_rng_state / set_rng_state: a restored (pickled) state draws the same numbers again."""
    tf = sys.modules.get("tensorflow")

    def draw() -> list[Any]:
        drawn: list[Any] = [np.random.rand(3), random.random()]
        if tf is not None:
            drawn.append(np.asarray(tf.random.get_global_generator().normal([3])))
        return drawn

    state = pickle.loads(pickle.dumps(det.keras.get_rng_state()))
    first = draw()
    det.keras.set_rng_state(state)
    again = draw()
    assert len(first) == (3 if tf is not None else 2)
    assert all(np.allclose(a, b) for a, b in zip(first, again, strict=True)), (first, again)


def check_plain_keras(workdir: pathlib.Path) -> None:
    """EarlyStopping driven by validations, and TensorBoard writing to its log_dir, in plain fit."""
    model = trials.compiled_model()
    log_dir = workdir / "plain-tensorboard"
    history = model.fit(
        *trials.data(0),
        batch_size=trials.BATCH,
        epochs=10,
        validation_data=trials.data(1),
        verbose=0,
        callbacks=[
            det.keras.callbacks.EarlyStopping(monitor="val_loss", min_delta=100.0, patience=1),
            det.keras.callbacks.TensorBoard(log_dir=str(log_dir)),
        ],
    )
    assert len(history.history["loss"]) == 2, history.history
    assert list(log_dir.rglob("*tfevents*")), f"no event files under {log_dir}"


def scenario_hooks_resume_and_load(workdir: pathlib.Path) -> None:
    storage = storage_dir()

    # A: 3 epochs of 8 batches, workloads of 4 batches (scheduling_unit).
    run_a = run(trials.HookTrial, storage, 3)
    assert trials.EVENTS["initial_batches"][-1] == 0
    assert calls("begin") == [[n, 4] for n in range(0, 24, 4)], calls("begin")
    assert calls("end") == [[n, n, True] for n in range(4, 25, 4)], calls("end")
    assert calls("epoch_end") == [[0, True], [1, True], [2, True]], calls("epoch_end")
    assert len(calls("test_end")) == 3
    recorder = trials.EVENTS["recorder"]
    assert recorder.checkpoints == 3 and recorder.restored is None
    assert [c["steps_completed"] for c in run_a.checkpoints] == [8, 16, 24], run_a.checkpoints
    last_a = storage / run_a.checkpoints[-1]["uuid"]
    for name in ("recorder.json", "keras_callbacks_state.pkl", "load_data.json"):
        assert (last_a / name).is_file(), sorted(p.name for p in last_a.iterdir())
    load_data = json.loads((last_a / "load_data.json").read_text())
    assert load_data["trial_type"] == "TFKerasTrial", load_data
    assert load_data["trial_cls_spec"] == "legacy_names_trials:HookTrial", load_data
    assert load_data["hparams"] == {"global_batch_size": trials.BATCH}, load_data
    tensorboard = pathlib.Path(trials.EVENTS["tensorboard"])
    assert list(tensorboard.rglob("*tfevents*")), f"no event files under {tensorboard}"
    assert not pathlib.Path("ignored-in-a-trial").exists()

    # B: resume A up to 5 epochs.
    run_b = run(trials.HookTrial, storage, 5, latest_checkpoint=run_a.checkpoints[-1]["uuid"])
    assert trials.EVENTS["initial_batches"][-1] == 24, trials.EVENTS["initial_batches"]
    recorder = trials.EVENTS["recorder"]
    assert recorder.restored == {"checkpoints": 2, "calls": 18}, recorder.restored
    assert calls("begin")[0] == [24, 4] and calls("end")[-1] == [40, 40, True], recorder.calls
    assert calls("epoch_end") == [[3, True], [4, True]], calls("epoch_end")
    assert [c["steps_completed"] for c in run_b.checkpoints] == [32, 40], run_b.checkpoints
    final_b = trials.EVENTS["final_weights"]

    # C: load B's last checkpoint.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = det.keras.load_model_from_checkpoint_path(
            str(storage / run_b.checkpoints[-1]["uuid"])
        )
    assert any(
        issubclass(w.category, FutureWarning)
        and "load_model_from_checkpoint_path" in str(w.message)
        for w in caught
    ), [str(w.message) for w in caught]
    assert same([np.array(w) for w in model.get_weights()], final_b)
    assert int(np.asarray(model.optimizer.iterations)) == 40
    predictions = model.predict(trials.data(1)[0], verbose=0)
    assert predictions.shape == (trials.SAMPLES, 3)
    try:
        det.keras.load_model_from_checkpoint_path(str(workdir))
    except FileNotFoundError as exc:
        assert "load_data.json" in str(exc), exc
    else:
        raise AssertionError("a directory without load_data.json loaded")


def scenario_preempted_epoch(workdir: pathlib.Path) -> None:
    storage = storage_dir()
    # D: preempted after its first batch: epoch 0 was cut, so no callback saw it end.
    run_d = run(trials.HookTrial, storage, 3, preempt=True)
    assert [c["steps_completed"] for c in run_d.checkpoints] == [1], run_d.checkpoints
    assert calls("begin") == [[0, 4]] and calls("end") == [[1, 1, True]], calls("end")
    assert calls("epoch_end") == [] and calls("test_end") == [], trials.EVENTS["recorder"].calls
    assert trials.EVENTS["recorder"].checkpoints == 1
    assert trials.EVENTS["stop_requested"] is False

    run_e = run(trials.HookTrial, storage, 3, latest_checkpoint=run_d.checkpoints[-1]["uuid"])
    assert trials.EVENTS["initial_batches"][-1] == 1
    assert trials.EVENTS["recorder"].restored == {"checkpoints": 0, "calls": 2}
    assert calls("begin")[0] == [1, 3], calls("begin")  # up to the next multiple of 4
    assert calls("epoch_end") == [[0, True], [1, True], [2, True]]
    assert [c["steps_completed"] for c in run_e.checkpoints] == [9, 17, 25], run_e.checkpoints


def scenario_early_stopping(workdir: pathlib.Path) -> None:
    storage = storage_dir()
    run_f = run(trials.StopTrial, storage, 10)
    assert [step for step, _ in run_f.validation] == [8, 16], run_f.validation
    assert [c["steps_completed"] for c in run_f.checkpoints] == [8, 16], run_f.checkpoints
    assert trials.EVENTS["stop_requested"] is True
    assert np.isclose(trials.EVENTS["learning_rate"], trials.LEARNING_RATE / 2)
    saved = pickle.loads(
        (storage / run_f.checkpoints[-1]["uuid"] / "keras_callbacks_state.pkl").read_bytes()
    )
    stopping, reducing, recorder = saved["callbacks"]
    assert stopping["test_end_count"] == 2 and stopping["wait"] == 1, stopping
    assert stopping["best"] is not None, stopping
    assert reducing["test_end_count"] == 2 and reducing["wait"] == 0, reducing
    assert recorder == {"checkpoints": 1, "calls": 12}, recorder


def scenario_sequence_adapter(workdir: pathlib.Path) -> None:
    run_g = run(trials.SequenceTrial, storage_dir(), 2)
    assert [step for step, _ in run_g.training] == [4, 8, 12, 16], run_g.training
    assert [step for step, _ in run_g.validation] == [8, 16], run_g.validation
    sequence = trials.EVENTS["train_sequence"]
    if KERAS_MAJOR >= 3:  # Keras 3 takes the loader settings on the PyDataset
        assert sequence.workers == 2 and sequence.max_queue_size == 5, vars(sequence)


def main(workdir: pathlib.Path) -> None:
    os.chdir(workdir)
    check_warnings(workdir)
    check_rng()
    check_plain_keras(workdir)
    scenario_hooks_resume_and_load(workdir)
    scenario_preempted_epoch(workdir)
    scenario_early_stopping(workdir)
    scenario_sequence_adapter(workdir)
    print("ok", keras.__version__, backend_name(), f"keras{KERAS_MAJOR}")


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1]).resolve())
