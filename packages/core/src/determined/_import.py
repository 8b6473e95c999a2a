"""``det.import_from_path``: import modules from a checkpoint's code directory, then forget them.

Typical use: the current ``model_def`` is imported, and an older ``model_def.py`` saved with a
checkpoint must be imported beside it under the same module name. Inside the block the directory
comes first on ``sys.path`` and modules imported from the working directory are set aside; when the
block ends the modules imported from the directory are dropped and everything else is put back.
No ``__pycache__`` is written into the directory (it is often a checkpoint).
"""

from __future__ import annotations

import contextlib
import importlib.machinery
import os
import sys
import threading
from collections.abc import Iterator
from types import ModuleType
from typing import Any

_active = threading.Lock()


class _NoBytecodeFinder(importlib.machinery.PathFinder):
    """A path finder whose source loaders never write ``.pyc`` files."""

    @classmethod
    def find_spec(cls, fullname: str, path: Any = None, target: Any = None) -> Any:
        spec = super().find_spec(fullname, path, target)
        if spec is not None and isinstance(spec.loader, importlib.machinery.SourceFileLoader):
            spec.loader = _NoBytecodeLoader(spec.loader.name, spec.loader.path)
        return spec


class _NoBytecodeLoader(importlib.machinery.SourceFileLoader):
    def set_data(self, path: str, data: Any, *, _mode: int = 0o666) -> None:
        """Write nothing: bytecode caching is off for this directory."""


def _module_dir(module: ModuleType) -> str | None:
    """The directory a module was imported from (a package's parent directory)."""
    filename = getattr(module, "__file__", None)
    if not isinstance(filename, str) or not filename:
        return None
    directory, base = os.path.split(os.path.abspath(filename))
    if base == "__init__.py":
        directory = os.path.dirname(directory)
    return directory


def _modules_from(directory: str) -> set[str]:
    """Names in ``sys.modules`` imported from ``directory`` (with their submodules), and cached
    import misses (``None`` entries), which must not outlive the block either."""
    names: set[str] = set()
    for name, module in sorted(sys.modules.items()):
        if module is None:
            names.add(name)
            continue
        parent = name.rpartition(".")[0]
        if _module_dir(module) == directory or (parent and parent in names):
            names.add(name)
    return names


@contextlib.contextmanager
def import_from_path(path: str | os.PathLike[str]) -> Iterator[None]:
    """Within the block, ``import`` finds modules in ``path`` first, as fresh modules.

    Example::

        import model_def as new_model_def

        with det.import_from_path(checkpoint_dir / "code"):
            import model_def as old_model_def

    Raises:
        RuntimeError: when blocks are nested or used from two threads at once.
    """
    if not _active.acquire(blocking=False):
        raise RuntimeError("det.import_from_path cannot be nested or used from several threads")
    directory = os.path.abspath(os.fspath(path))
    saved_path = sys.path
    saved_meta_path = sys.meta_path
    set_aside: dict[str, ModuleType] = {}
    try:
        cwd = os.getcwd()
        if "" in sys.path or cwd in sys.path:
            sys.path = [p for p in sys.path if p != ""]
            for name in _modules_from(cwd):
                module = sys.modules.pop(name)
                if module is not None:
                    set_aside[name] = module
        sys.path = [directory, *sys.path]
        sys.meta_path = [_NoBytecodeFinder(), *sys.meta_path]
        yield
    finally:
        sys.meta_path = saved_meta_path
        for name in _modules_from(directory):
            sys.modules.pop(name, None)
        sys.path = saved_path
        sys.modules.update(set_aside)
        _active.release()
