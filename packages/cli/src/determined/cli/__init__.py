"""det's command line: ``det`` and ``det-cli`` with Determined's command tree, aliases and flags.

``det experiment|e``, ``trial|t``, ``checkpoint|c``, ``model|m``, ``user|u``, ``master``,
``preview-search`` and ``deploy local``; ``det-cli`` adds ``launch`` (Hydra). The console scripts
call ``determined.cli.__main__:main`` / ``main_det_cli``; :func:`run` is the same in-process.
"""

from __future__ import annotations

from determined.cli._app import make_parser, run
from determined.cli._errors import CliError

__all__ = ["CliError", "make_parser", "run"]
