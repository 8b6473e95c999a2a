"""A Hydra launcher that runs a multirun sweep as one det experiment.

``python train.py -m hydra/launcher=det lr=0.1,0.01`` submits one experiment to the det master with
one trial per sweep point; each trial runs the app's task function with its point's config, and the
task's return values come back in Hydra's multirun output. Settings live under ``hydra.launcher``
(see :class:`hydra_plugins.det_launcher._config.DetLauncherConf`).

``hydra_plugins`` is Hydra's plugin namespace: there is deliberately no ``hydra_plugins/__init__.py``.
"""

__version__ = "0.1.0"
