"""``det experiment`` (alias ``e``): create, inspect, steer and clean up experiments.

The subcommands live in modules by group (``_experiment_create``, ``_experiment_inspect``,
``_experiment_lifecycle``, ``_experiment_checkpoints``, ``_experiment_attributes``); this module
assembles them in upstream's order.
"""

from __future__ import annotations

from determined.cli import (
    _experiment_attributes,
    _experiment_checkpoints,
    _experiment_create,
    _experiment_inspect,
    _experiment_lifecycle,
    _project,
)
from determined.cli._declarative import Cmd

COMMANDS = [
    Cmd(
        "e|xperiment",
        None,
        "manage experiments",
        [
            _experiment_inspect.LIST,
            _experiment_inspect.CONFIG,
            _experiment_inspect.DESCRIBE,
            _experiment_inspect.LOGS,
            _experiment_checkpoints.DOWNLOAD_MODEL_DEF,
            _experiment_inspect.LIST_TRIALS,
            _experiment_checkpoints.LIST_CHECKPOINTS,
            _experiment_create.CREATE,
            _experiment_create.CONTINUE,
            _experiment_lifecycle.ACTIVATE,
            _experiment_lifecycle.CANCEL,
            _experiment_lifecycle.PAUSE,
            _experiment_lifecycle.KILL,
            _experiment_lifecycle.ARCHIVE,
            _experiment_lifecycle.UNARCHIVE,
            _experiment_lifecycle.DELETE,
            _experiment_lifecycle.DELETE_TB_FILES,
            _experiment_checkpoints.DOWNLOAD,
            _experiment_lifecycle.WAIT,
            _experiment_attributes.LABEL,
            _project.MOVE_EXPERIMENT,
            _experiment_attributes.SET,
        ],
    )
]
