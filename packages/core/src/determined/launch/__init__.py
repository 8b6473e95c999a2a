"""Launchers: run a training script as several processes (``python -m determined.launch.X SCRIPT...``).

- ``wrap_rank``: run a command, prefixing each line of its output with ``[rank=N] ``.
- ``torch_distributed``: run a script (or ``--trial MODULE:Class``) under torchrun with one process
  per slot of each container.
- ``tensorflow``: run a script once per container, with ``TF_CONFIG`` for multi-worker strategies.
- ``deepspeed``: run a script (or ``--trial MODULE:Class``) under DeepSpeed's launcher, one process
  per slot.
- ``horovod``: upstream's Horovod launcher's command line; det does not run Horovod, so it says so
  (and what to use instead) and exits non-zero.

Each works off-cluster too (one node, defaults from the command line) so scripts can be tried locally.
"""

__all__: list[str] = []
