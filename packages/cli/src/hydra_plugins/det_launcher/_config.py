"""The launcher's settings (``hydra.launcher``), registered as ``hydra/launcher=det``."""

from __future__ import annotations

import dataclasses
from typing import Any

from hydra.core.config_store import ConfigStore


@dataclasses.dataclass
class DetLauncherConf:
    """Settings of ``hydra/launcher=det``; override any of them as ``hydra.launcher.KEY=VALUE``.

    Attributes:
        master: the master's address; ``None`` uses ``$DET_MASTER``, else ``localhost:8080``.
        user: the user to submit as (``determined.client.login``'s order when ``None``).
        password: that user's password (``None``: a cached token or ``$DET_PASS``).
        python: the interpreter the trials run the task with; it needs det-cli and the app's
            dependencies (a local master's own environment has them).
        context_dir: the directory uploaded as the model definition; ``None`` means the app's
            root (the directory of the script, or of the top package of ``python -m pkg.app``).
            Hydra's output directories inside it are left out; ``.detignore`` is honoured.
        name: the experiment name; ``None`` uses Hydra's job name.
        resources: the experiment's ``resources`` section (``slots_per_trial``, ``resource_pool``).
        max_concurrent_trials: how many sweep points run at once (0: as many as slots allow).
        max_restarts: restarts of a failed trial (0: a failing task fails its job at once).
        metric: the validation metric a task's numeric return value is reported as; it is the
            grid searcher's metric, so the experiment's best trial is the best return value.
        smaller_is_better: whether a smaller ``metric`` is better.
        project_id: the project to create the experiment in (``None``: the default project).
        experiment: more experiment config merged over the generated one (e.g.
            ``checkpoint_storage``, ``environment``, ``description``, ``labels``).
        wait: wait for the experiment and return the tasks' results; ``False`` returns as soon
            as it is created (each job then reports ``None`` as its return value).
    """

    _target_: str = "hydra_plugins.det_launcher.det_launcher.DetLauncher"
    master: str | None = None
    user: str | None = None
    password: str | None = None
    python: str = "python3"
    context_dir: str | None = None
    name: str | None = None
    resources: dict[str, Any] = dataclasses.field(default_factory=lambda: {"slots_per_trial": 1})
    max_concurrent_trials: int = 0
    max_restarts: int = 0
    metric: str = "return_value"
    smaller_is_better: bool = True
    project_id: int | None = None
    experiment: dict[str, Any] = dataclasses.field(default_factory=dict)
    wait: bool = True


ConfigStore.instance().store(
    group="hydra/launcher", name="det", node=DetLauncherConf, provider="det_launcher"
)
