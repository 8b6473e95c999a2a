"""One experiment's Optuna study: ask, report, tell, and a JSON snapshot that restores it exactly.

Reproducibility does not rest on pickling a sampler. Every ``ask`` builds a fresh sampler seeded
from the searcher's seed and the number of asks so far, and everything else a sampler reads lives
in the study's storage (trials with their parameters, intermediate values and system attributes;
the study's system attributes, where the QMC sampler counts its samples). The snapshot holds that
storage and the ask counter, so a study rebuilt from it proposes exactly what the original would.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from typing import Any

import optuna
import optuna.distributions as od
from optuna.storages import InMemoryStorage
from optuna.trial import FrozenTrial, TrialState

from determined.optuna._settings import Settings
from determined.optuna._space import SearchSpace

STUDY_NAME = "det-optuna"
"""Fixed: Optuna's Hyperband pruner assigns brackets by hashing the study name with the trial."""

_SEED_STRIDE = 1_000_003


def _encode(value: float | None) -> float | str | None:
    """A float as strict JSON: infinities and NaN become strings."""
    if value is None or math.isfinite(value):
        return value
    return str(value)  # "inf", "-inf", "nan": float() reads them back


def _decode(value: float | str) -> float:
    return float(value)


def make_sampler(settings: Settings, seed: int) -> optuna.samplers.BaseSampler:
    """A fresh sampler of ``settings.sampler`` seeded with ``seed``."""
    with warnings.catch_warnings():
        # QMC and CMA-ES's consider_pruned_trials are "experimental" in Optuna: not news per ask.
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return _sampler(settings, seed)


def _sampler(settings: Settings, seed: int) -> optuna.samplers.BaseSampler:
    startup = settings.n_startup_trials
    kind = settings.sampler
    if kind == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if kind == "qmc":
        # Scrambled Sobol points from the searcher's own seed; the sample counter is in the study.
        return optuna.samplers.QMCSampler(
            scramble=True,
            seed=settings.seed,
            warn_independent_sampling=False,
            warn_asynchronous_seeding=False,
            independent_sampler=optuna.samplers.RandomSampler(seed=seed),
        )
    if kind == "cmaes":
        try:
            import cmaes  # noqa: F401
        except ImportError as exc:
            raise ValueError(
                "searcher.sampler: 'cmaes' needs the cmaes package: pip install 'det-plugin-optuna[cmaes]'"
            ) from exc
        return optuna.samplers.CmaEsSampler(
            seed=seed,
            n_startup_trials=1 if startup is None else startup,
            consider_pruned_trials=True,
            warn_independent_sampling=False,
            independent_sampler=optuna.samplers.RandomSampler(seed=seed),
        )
    if kind == "gp":
        try:
            import scipy  # noqa: F401
            import torch  # noqa: F401
        except ImportError as exc:
            raise ValueError(
                "searcher.sampler: 'gp' needs torch and scipy: pip install 'det-plugin-optuna[gp]'"
            ) from exc
        return optuna.samplers.GPSampler(
            seed=seed,
            n_startup_trials=10 if startup is None else startup,
            warn_independent_sampling=False,
            independent_sampler=optuna.samplers.RandomSampler(seed=seed),
        )
    return optuna.samplers.TPESampler(
        seed=seed,
        n_startup_trials=10 if startup is None else startup,
        multivariate=True,
        group=True,
        constant_liar=True,
    )


def make_pruner(settings: Settings) -> optuna.pruners.BasePruner:
    """Optuna's pruner for ``pruner.type`` ``hyperband``/``median``; det's ASHA needs none."""
    pruner = settings.pruner
    if pruner["type"] == "hyperband":
        return optuna.pruners.HyperbandPruner(
            min_resource=pruner["min_resource"],
            max_resource=settings.max_time or 1,  # the settings refuse hyperband without one
            reduction_factor=pruner["reduction_factor"],
        )
    if pruner["type"] == "median":
        return optuna.pruners.MedianPruner(
            n_startup_trials=pruner["n_startup_trials"], n_warmup_steps=pruner["n_warmup_steps"]
        )
    return optuna.pruners.NopPruner()


class Study:
    """An in-memory Optuna study whose trials stand for det trials, by request id.

    Args:
        settings: the checked searcher section.
        space: the flattened search space.
    """

    def __init__(self, settings: Settings, space: SearchSpace) -> None:
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.settings = settings
        self.space = space
        self.asks = 0
        self.numbers: dict[str, int] = {}
        """Request id -> Optuna trial number."""
        self.pruner = make_pruner(settings)
        self._new_study()

    def _new_study(self) -> None:
        self.storage = InMemoryStorage()
        self.study = optuna.create_study(
            storage=self.storage,
            sampler=make_sampler(self.settings, self.settings.seed),
            pruner=self.pruner,
            study_name=STUDY_NAME,
            direction="minimize" if self.settings.smaller_is_better else "maximize",
        )
        self.study_id = self.storage.get_study_id_from_name(STUDY_NAME)

    def ask(self) -> tuple[int, dict[str, Any]]:
        """A new trial: its number and its nested det hyperparameters."""
        seed = (self.settings.seed * _SEED_STRIDE + self.asks) & 0xFFFFFFFF
        self.asks += 1
        self.study.sampler = make_sampler(self.settings, seed)
        trial = self.study.ask(fixed_distributions=self.space.distributions)
        return trial.number, self.space.to_hparams(trial.params)

    def bind(self, request_id: str, number: int) -> None:
        """Name the Optuna trial ``number`` by the det request id of its Create."""
        self.numbers[request_id] = number

    def _trial(self, request_id: str) -> FrozenTrial:
        return self.storage.get_trial(self.numbers[request_id])

    def is_running(self, request_id: str) -> bool:
        """Whether the trial is known and not yet told."""
        return request_id in self.numbers and self._trial(request_id).state == TrialState.RUNNING

    def report(self, request_id: str, step: int, value: float) -> None:
        """Record the trial's metric at training length ``step`` (an intermediate value)."""
        if self.is_running(request_id):
            self.storage.set_trial_intermediate_value(self.numbers[request_id], step, value)

    def should_prune(self, request_id: str) -> bool:
        """Optuna's pruner's verdict on the trial's latest intermediate value."""
        trial = self._trial(request_id)
        return bool(self.pruner.prune(self.study, trial))

    def last(self, request_id: str) -> tuple[int, float] | None:
        """The trial's latest ``(step, value)``, if it reported any."""
        values = self._trial(request_id).intermediate_values
        if not values:
            return None
        step = max(values)
        return step, values[step]

    def finish(self, request_id: str, state: TrialState) -> None:
        """Tell the study the trial's end: COMPLETE (with its latest value), PRUNED or FAIL.

        COMPLETE without any value becomes FAIL; a trial already told is left alone.
        """
        if not self.is_running(request_id):
            return
        latest = self.last(request_id)
        self.study.sampler = make_sampler(self.settings, self.settings.seed)
        if state == TrialState.COMPLETE and latest is not None:
            self.study.tell(self.numbers[request_id], latest[1])
        elif state == TrialState.PRUNED and latest is not None:
            self.study.tell(self.numbers[request_id], state=TrialState.PRUNED)
        else:
            self.study.tell(self.numbers[request_id], state=TrialState.FAIL)

    # ---------------------------------------------------------------------------------- state

    def state_dict(self) -> dict[str, Any]:
        """The study as JSON-ready data."""
        trials = []
        space = self.space.distributions
        for trial in self.storage.get_all_trials(self.study_id, deepcopy=False):
            trials.append(
                {
                    "state": trial.state.name,
                    "values": None if trial.values is None else [_encode(v) for v in trial.values],
                    "params": dict(trial.params),
                    # Omitted when they are the search space's (every trial det created): a
                    # third of the snapshot otherwise, and it is saved after every event.
                    "distributions": None
                    if trial.distributions == space
                    else {
                        name: od.distribution_to_json(dist)
                        for name, dist in trial.distributions.items()
                    },
                    "intermediate_values": [
                        [step, _encode(value)] for step, value in trial.intermediate_values.items()
                    ],
                    "system_attrs": dict(trial.system_attrs),
                    "user_attrs": dict(trial.user_attrs),
                }
            )
        return {
            "asks": self.asks,
            "numbers": dict(self.numbers),
            "study_system_attrs": dict(self.storage.get_study_system_attrs(self.study_id)),
            "trials": trials,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Rebuild the study from :meth:`state_dict` output."""
        self._new_study()
        self.asks = int(state.get("asks", 0))
        self.numbers = {str(k): int(v) for k, v in (state.get("numbers") or {}).items()}
        for key, value in (state.get("study_system_attrs") or {}).items():
            self.storage.set_study_system_attr(self.study_id, key, value)
        for number, saved in enumerate(state.get("trials") or []):
            values = saved.get("values")
            template = FrozenTrial(
                number=number,
                state=TrialState[saved["state"]],
                value=None,
                values=None if values is None else [_decode(v) for v in values],
                datetime_start=None,
                datetime_complete=None,
                params=dict(saved.get("params") or {}),
                distributions=self.space.distributions
                if saved.get("distributions") is None
                else {
                    name: od.json_to_distribution(text)
                    for name, text in saved["distributions"].items()
                },
                user_attrs=dict(saved.get("user_attrs") or {}),
                system_attrs=dict(saved.get("system_attrs") or {}),
                intermediate_values={
                    int(step): _decode(value)
                    for step, value in saved.get("intermediate_values") or []
                },
                trial_id=number,
            )
            created = self.storage.create_new_trial(self.study_id, template_trial=template)
            if created != number:
                raise ValueError(
                    f"search_method_state.study.trials: trial {number} restored as {created}"
                )
