"""det.pytorch.lightning off-cluster: a real pl.Trainer, real checkpoints in a local directory,
preemption through a real SIGTERM."""

from __future__ import annotations

import json
import pathlib
import types
from collections.abc import Callable
from typing import Any

import pytest
import pytorch_lightning as pl
import torch

import determined as det
from determined.pytorch.lightning import CHECKPOINT_FILE, DetCallback, DetLogger, fit

TRAINER_KWARGS: dict[str, Any] = {
    "enable_progress_bar": False,
    "enable_model_summary": False,
    "log_every_n_steps": 2,
    "num_sanity_val_steps": 0,
}


class Reports:
    """Records every metrics report a TrainContext makes (and lets it through)."""

    def __init__(self, core: det.core.Context, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[tuple[str, int, dict[str, Any]]] = []
        train = core.train

        def spy(name: str, group: str | None) -> None:
            real = getattr(train, name)

            def record(*args: Any) -> Any:
                if group is None:
                    self.calls.append((args[0], args[1], dict(args[2])))
                else:
                    self.calls.append((group, args[0], dict(args[1])))
                return real(*args)

            monkeypatch.setattr(train, name, record)

        spy("report_training_metrics", "training")
        spy("report_metrics", None)

    def of(self, group: str) -> list[tuple[int, dict[str, Any]]]:
        return [(step, metrics) for g, step, metrics in self.calls if g == group]


def checkpoints(storage: pathlib.Path) -> list[dict[str, Any]]:
    """Every det checkpoint under ``storage``: its id, metadata and files, oldest first."""
    found = []
    for path in storage.iterdir():
        metadata = json.loads((path / "metadata.json").read_text())
        found.append({"uuid": path.name, "path": path, "metadata": metadata})
    return sorted(found, key=lambda c: (c["path"] / "metadata.json").stat().st_mtime_ns)


def run(
    tiny: types.ModuleType,
    storage: pathlib.Path,
    *,
    resumable: bool = False,
    preempt_at: int | None = None,
    resume: str | None = None,
    policy: str = "none",
    monkeypatch: pytest.MonkeyPatch | None = None,
    **trainer_kwargs: Any,
) -> tuple[pl.Trainer, pl.LightningModule, Reports | None]:
    """One training run of the tiny module through an ordinary pl.Trainer."""
    pl.seed_everything(1, verbose=False)
    module = tiny.TinyModule()
    loader = tiny.ResumableLoader() if resumable else tiny.train_loader()
    with det.core.init(checkpoint_storage=str(storage)) as core:
        reports = Reports(core, monkeypatch) if monkeypatch is not None else None
        det_callback = DetCallback(core, checkpoint_policy=policy, latest_checkpoint=resume)
        callbacks: list[pl.Callback] = [det_callback]
        if preempt_at is not None:
            callbacks.append(tiny.PreemptAt(preempt_at))
        kwargs = {"max_epochs": 3, **TRAINER_KWARGS, **trainer_kwargs}
        trainer = pl.Trainer(logger=DetLogger(core), callbacks=callbacks, **kwargs)
        trainer.fit(
            module,
            loader,
            tiny.val_loader(),
            ckpt_path=det_callback.resume_ckpt_path(),
            weights_only=True,
        )
    return trainer, module, reports


def same_weights(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    first, second = a.state_dict(), b.state_dict()
    return first.keys() == second.keys() and all(torch.equal(first[k], second[k]) for k in first)


def test_logger_reports_training_and_validation_metrics(
    tiny: types.ModuleType, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trainer, _, reports = run(tiny, tmp_path / "ckpt", max_epochs=2, monkeypatch=monkeypatch)
    assert reports is not None and trainer.global_step == 16
    training = reports.of("training")
    # every log step (log_every_n_steps=2), at steps_completed = global_step
    assert [step for step, _ in training] == list(range(2, 17, 2))
    assert all("loss" in metrics for _, metrics in training)
    validation = reports.of("validation")
    assert [step for step, _ in validation] == [8, 16]
    for epochs, (step, metrics) in enumerate(validation, start=1):
        assert metrics["batches"] == step and metrics["epochs"] == epochs
        assert isinstance(metrics["val_loss"], float)


def test_logger_records_hparams_in_run_metadata(
    tiny: types.ModuleType, tmp_path: pathlib.Path
) -> None:
    with det.core.init(checkpoint_storage=str(tmp_path)) as core:
        trainer = pl.Trainer(
            max_steps=1,
            logger=DetLogger(core),
            callbacks=[DetCallback(core, checkpoint_policy="none")],
            **TRAINER_KWARGS,
        )
        trainer.fit(tiny.TinyModule(lr=0.125, hidden=3), tiny.train_loader())
        assert core.train.get_metadata()["hparams"] == {"lr": 0.125, "hidden": 3}


def test_logger_without_callback_reports_everything_as_training(
    tiny: types.ModuleType,
    tmp_path: pathlib.Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    with det.core.init(checkpoint_storage=str(tmp_path)) as core:
        reports = Reports(core, monkeypatch)
        trainer = pl.Trainer(max_epochs=1, logger=DetLogger(core), **TRAINER_KWARGS)
        trainer.fit(tiny.TinyModule(), tiny.train_loader(), tiny.val_loader())
    assert reports.of("validation") == []
    assert any("val_loss" in metrics for _, metrics in reports.of("training"))
    assert "without DetCallback" in caplog.text


def test_checkpoint_contents(tiny: types.ModuleType, tmp_path: pathlib.Path) -> None:
    storage = tmp_path / "ckpt"
    _, module, _ = run(tiny, storage, policy="all", max_epochs=2)
    found = checkpoints(storage)
    # after each validation (end of each epoch); the end of training adds none at the same step
    assert [c["metadata"]["steps_completed"] for c in found] == [8, 16]
    for c in found:
        assert sorted(p.name for p in c["path"].iterdir()) == ["metadata.json", CHECKPOINT_FILE]
        assert c["metadata"]["format"] == "pytorch-lightning"
        assert c["metadata"]["checkpoint_file"] == CHECKPOINT_FILE
    last = found[-1]["path"] / CHECKPOINT_FILE
    raw = torch.load(last, weights_only=True)  # no pickled objects: RNG state is plain data
    assert raw["global_step"] == 16 and "DetCallback" in raw["callbacks"]
    restored = tiny.TinyModule.load_from_checkpoint(last, weights_only=True)
    assert same_weights(restored, module)
    assert dict(restored.hparams) == {"lr": 0.05, "hidden": 8}


def test_checkpoint_policy_best_keeps_only_improvements(
    tiny: types.ModuleType, tmp_path: pathlib.Path
) -> None:
    storage = tmp_path / "ckpt"
    with det.core.init(checkpoint_storage=str(storage)) as core:
        det_callback = DetCallback(core, searcher_metric="val_loss", smaller_is_better=False)
        trainer = pl.Trainer(
            max_epochs=3, logger=DetLogger(core), callbacks=[det_callback], **TRAINER_KWARGS
        )
        trainer.fit(tiny.TinyModule(), tiny.train_loader(), tiny.val_loader())
    # the loss falls every epoch, so with larger-is-better only the first validation is "best";
    # the end of training still checkpoints
    assert [c["metadata"]["steps_completed"] for c in checkpoints(storage)] == [8, 24]


@pytest.mark.parametrize(
    ("resumable", "preempt_at", "stopped_at"),
    [
        pytest.param(False, 10, 16, id="plain-loader-stops-at-epoch-end"),
        pytest.param(True, 10, 10, id="resumable-loader-stops-at-once"),
    ],
)
def test_resume_after_preemption_matches_uninterrupted_run(
    tiny: types.ModuleType,
    tmp_path: pathlib.Path,
    monkeypatch: pytest.MonkeyPatch,
    resumable: bool,
    preempt_at: int,
    stopped_at: int,
) -> None:
    extra = {"val_check_interval": 3}  # validations in the middle of epochs too
    whole, whole_module, whole_reports = run(
        tiny, tmp_path / "a", resumable=resumable, monkeypatch=monkeypatch, **extra
    )
    storage = tmp_path / "b"
    stopped, _, _ = run(tiny, storage, resumable=resumable, preempt_at=preempt_at, **extra)
    assert stopped.should_stop and stopped.global_step == stopped_at
    (preempted,) = checkpoints(storage)
    assert preempted["metadata"]["steps_completed"] == stopped_at

    resumed, resumed_module, resumed_reports = run(
        tiny,
        storage,
        resumable=resumable,
        resume=preempted["uuid"],
        monkeypatch=monkeypatch,
        **extra,
    )
    assert resumed.global_step == whole.global_step == 24
    assert same_weights(resumed_module, whole_module)
    assert whole_reports is not None and resumed_reports is not None
    after = [(s, m) for s, m in whole_reports.of("validation") if s > stopped_at]
    assert resumed_reports.of("validation") == after and after


def test_fit_trains_checkpoints_and_resumes_off_cluster(
    tiny: types.ModuleType, tmp_path: pathlib.Path
) -> None:
    storage = tmp_path / "ckpt"
    kwargs = {**TRAINER_KWARGS, "max_epochs": 1}
    trainer = fit(
        tiny.TinyModule,
        tiny.TinyDataModule,
        hparams={"lr": 0.01, "hidden": 4},
        trainer_kwargs=kwargs,
        checkpoint_storage=str(storage),
        checkpoint_policy="none",
        seed=3,
    )
    assert trainer is not None and trainer.global_step == 8
    assert trainer.lightning_module.hparams["hidden"] == 4
    (first,) = checkpoints(storage)
    assert first["metadata"]["steps_completed"] == 8

    again = fit(
        tiny.TinyModule,
        tiny.TinyDataModule,
        hparams={"lr": 0.01, "hidden": 4},
        trainer_kwargs={**kwargs, "max_epochs": 2},
        checkpoint_storage=str(storage),
        latest_checkpoint=first["uuid"],
    )
    assert again is not None and again.global_step == 16  # continued from step 8


def test_fit_ends_cleanly_on_invalid_hp(tiny: types.ModuleType, tmp_path: pathlib.Path) -> None:
    def build(**hparams: Any) -> pl.LightningModule:
        raise det.InvalidHP("hidden must be positive")

    assert fit(build, tiny.TinyDataModule, checkpoint_storage=str(tmp_path)) is None


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda t: fit(42, trainer_kwargs={}), TypeError, "module: must be a LightningModule"),
        (
            lambda t: fit(t.TinyModule, lambda **h: object()),
            TypeError,
            "datamodule: the callable returned object",
        ),
        (
            lambda t: fit(t.TinyModule, trainer_kwargs={"enable_checkpointing": False}),
            ValueError,
            "trainer_kwargs.enable_checkpointing",
        ),
        (
            lambda t: fit(t.TinyModule, trainer_kwargs=[1]),
            TypeError,
            "trainer_kwargs: must be a dict",
        ),
        (
            lambda t: fit(t.TinyModule, checkpoint_policy="sometimes"),
            ValueError,
            "checkpoint_policy: must be one of best, all, none",
        ),
    ],
)
def test_bad_arguments_are_named(
    tiny: types.ModuleType,
    tmp_path: pathlib.Path,
    monkeypatch: pytest.MonkeyPatch,
    call: Callable[[types.ModuleType], Any],
    error: type[Exception],
    match: str,
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))  # fit's default local checkpoint storage
    with pytest.raises(error, match=match):
        call(tiny)


def test_resuming_from_a_checkpoint_without_a_lightning_file_is_a_clear_error(
    tmp_path: pathlib.Path,
) -> None:
    with det.core.init(checkpoint_storage=str(tmp_path)) as core:
        with core.checkpoint.store_path({"steps_completed": 1}) as (path, storage_id):
            (path / "weights.bin").write_bytes(b"x")
        det_callback = DetCallback(core, latest_checkpoint=storage_id)
        with pytest.raises(FileNotFoundError, match=f"{storage_id} holds no {CHECKPOINT_FILE}"):
            det_callback.resume_ckpt_path()


def test_rng_state_round_trips_as_plain_data() -> None:
    import random

    import numpy as np

    from determined.pytorch.lightning import _rng

    state = _rng.capture()
    json.dumps({k: v for k, v in state.items() if k != "torch"})  # lists and numbers only
    expected = (random.random(), np.random.rand(), torch.rand(1).item())
    random.random(), np.random.rand(), torch.rand(1)
    _rng.restore(state)
    assert (random.random(), np.random.rand(), torch.rand(1).item()) == expected
