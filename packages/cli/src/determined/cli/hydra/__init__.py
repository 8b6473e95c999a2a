"""Hydra for det: ``det-cli launch`` composes an experiment config from a Hydra config directory.

The Hydra *launcher* plugin (``python train.py -m hydra/launcher=det ...``) lives in Hydra's own
plugin namespace, ``hydra_plugins.det_launcher``, where Hydra finds it.
"""

from determined.cli.hydra._compose import ComposeError, compose_experiment_config
from determined.cli.hydra._launch import build_parser, launch_main

__all__ = ["ComposeError", "build_parser", "compose_experiment_config", "launch_main"]
