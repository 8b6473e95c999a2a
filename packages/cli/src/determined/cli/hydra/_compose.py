"""Compose an experiment config from a Hydra config directory.

The directory is an ordinary Hydra config tree: a primary config (``config.yaml``) whose ``defaults``
list picks one option from each config group (``searcher/``, ``hyperparameters/``, ``resources/``,
...), and overrides change it the way they change any Hydra app (``searcher=adaptive``,
``hyperparameters.lr.maxval=0.1``, ``+max_restarts=2``, ``~description``). The result is a plain
experiment config: interpolations resolved, Hydra's own ``hydra`` section left out.
"""

from __future__ import annotations

import os
import pathlib
from collections.abc import Sequence
from typing import Any

DEFAULT_CONFIG_NAME = "config"
JOB_NAME = "det_launch"


class ComposeError(ValueError):
    """The config directory, the primary config or an override is wrong; the message says which."""


def one_line(message: str) -> str:
    """Hydra's multi-line messages (hints, lists of options) folded into one line, without the
    config search path Hydra appends (its own ``pkg://hydra.conf`` entries only confuse)."""
    text = str(message).split("Config search path:")[0]
    return " ".join(line.strip() for line in text.splitlines() if line.strip())


def compose_experiment_config(
    config_dir: str | os.PathLike[str],
    config_name: str = DEFAULT_CONFIG_NAME,
    overrides: Sequence[str] = (),
) -> dict[str, Any]:
    """The experiment config composed from ``config_dir`` with Hydra's compose API.

    Args:
        config_dir: the Hydra config directory (absolute or relative to the working directory).
        config_name: the primary config in it, without ``.yaml``.
        overrides: Hydra overrides, e.g. ``["searcher=adaptive", "hyperparameters.lr.maxval=0.1"]``.

    Returns:
        The experiment config as plain data (interpolations resolved, no ``hydra`` section).

    Raises:
        ComposeError: the directory or primary config is missing, an override is malformed or names
            a key or option that does not exist, or a mandatory value (``???``) was left unset.
    """
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.singleton import Singleton
    from hydra.errors import HydraException, OverrideParseException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    directory = pathlib.Path(config_dir).expanduser()
    if not directory.is_dir():
        raise ComposeError(f"--config-dir: {str(config_dir)!r} is not a directory")
    name = config_name[:-5] if config_name.endswith(".yaml") else config_name
    if not (directory / f"{name}.yaml").is_file():
        raise ComposeError(
            f"--config-name: {directory / (name + '.yaml')} does not exist "
            f"(the primary config of the config directory)"
        )
    # Composing sets Hydra's process-wide state (its version base, the job runtime) and refuses to
    # run inside another initialized Hydra: start clean and put the caller's state back afterwards.
    saved = Singleton.get_state()
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(
            config_dir=str(directory.resolve()), version_base="1.3", job_name=JOB_NAME
        ):
            composed = compose(config_name=name, overrides=list(overrides))
            container = OmegaConf.to_container(composed, resolve=True, throw_on_missing=True)
    except OverrideParseException as exc:
        raise ComposeError(f"override {exc.override!r}: {one_line(exc.message)}") from None
    except (HydraException, OmegaConfBaseException) as exc:
        raise ComposeError(one_line(str(exc))) from None
    finally:
        GlobalHydra.instance().clear()
        Singleton.set_state(saved)
    if not isinstance(container, dict):
        raise ComposeError(f"{name}.yaml: the composed config is not a mapping")
    config = {str(key): value for key, value in container.items()}
    config.pop("hydra", None)  # Hydra's own settings, never part of an experiment config
    return config
