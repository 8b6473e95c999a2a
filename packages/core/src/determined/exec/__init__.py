"""Programs the master runs as tasks of their own (``python -m determined.exec.<name>``).

- :mod:`determined.exec.gc_checkpoints`: checkpoint garbage collection (a ``CHECKPOINT_GC`` task).
"""

__all__: list[str] = []
