"""``determined.core.plugins``: what plugins and other det distributions use from det-core.

An outside-shaped plugin (its own top-level package, only public det modules) provides a storage
backend and adds a hook of its own the way det-master adds ``det_resource_manager``; det-core names
no other distribution's hook specs.
"""

from __future__ import annotations

import ast
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

from determined.core import plugins

CORE_PACKAGE = pathlib.Path(plugins.__file__).resolve().parent

PLUGIN = '''
"""An outside det plugin: a storage type, and a hook spec of its own that it also implements."""
from determined.core import plugins
from determined.storage import build

from acme_det import hookspecs


@plugins.hookimpl
def det_add_hookspecs(plugin_manager):
    plugin_manager.add_hookspecs(hookspecs)


@plugins.hookimpl
def det_checkpoint_storage(config):
    if config.get("type") != "acme":
        return None
    return build({"type": "fsspec", "url": "memory://acme/" + config["bucket"]})


@plugins.hookimpl
def acme_greeting(name):
    return "hello " + name
'''

HOOKSPECS = '''
"""The acme distribution's own hook."""
from determined.core import plugins


@plugins.hookspec(firstresult=True)
def acme_greeting(name):
    """A greeting for ``name``."""
'''

CHECK = """
import os
from determined.core import plugins
from determined.storage import StorageManager

if os.environ.get("DET_DISABLE_PLUGIN_AUTOLOAD") == "1":
    import acme_det.plugin
    plugins.register(acme_det.plugin, name="acme")
    plugins.register(acme_det.plugin, name="acme")  # idempotent

storage = plugins.checkpoint_storage({"type": "acme", "bucket": "b"})
print(isinstance(storage, StorageManager))
print(plugins.get_plugin_manager().hook.acme_greeting(name="det"))
"""


def _install_acme(site: pathlib.Path) -> None:
    """What ``pip install acme-det`` leaves in site-packages: the package and its entry point."""
    package = site / "acme_det"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "plugin.py").write_text(textwrap.dedent(PLUGIN))
    (package / "hookspecs.py").write_text(textwrap.dedent(HOOKSPECS))
    dist_info = site / "acme_det-1.0.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-det\nVersion: 1.0\n")
    (dist_info / "entry_points.txt").write_text("[determined]\nacme = acme_det.plugin\n")
    (dist_info / "RECORD").write_text("")


def _python(code: str, *, autoload: bool, site: pathlib.Path | None = None) -> str:
    env = dict(os.environ)
    env.pop("DET_DISABLE_PLUGIN_AUTOLOAD", None)
    if not autoload:
        env["DET_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    if site is not None:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(site), env.get("PYTHONPATH")) if p)
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def _private_imports(source: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        found += [n for n in names if any(part.startswith("_") for part in n.split("."))]
    return found


def test_the_outside_plugin_imports_no_private_det_module() -> None:
    assert _private_imports(PLUGIN) == []
    assert _private_imports(HOOKSPECS) == []


@pytest.mark.parametrize("autoload", [True, False], ids=["entry-point", "registered-by-hand"])
def test_an_outside_plugin_provides_storage_and_adds_its_own_hook(
    tmp_path: pathlib.Path, autoload: bool
) -> None:
    _install_acme(tmp_path)
    assert _python(CHECK, autoload=autoload, site=tmp_path).splitlines() == ["True", "hello det"]


MASTER_CHECK = """
from determined.core import plugins

pm = plugins.get_plugin_manager()
caller = getattr(pm.hook, "det_resource_manager", None)
print("before", caller is not None and caller.spec is not None)

from determined.master.rm import resource_manager
rm = resource_manager({"type": "local", "slots": 0})
print("after", pm.hook.det_resource_manager.spec is not None, type(rm).__name__)
import determined.master._plugin as master_plugin
print("master-plugin", sum(plugin is master_plugin for _, plugin in pm.list_name_plugin()))
"""


@pytest.mark.parametrize("autoload", [True, False], ids=["autoload-on", "autoload-off"])
def test_the_masters_hook_specs_arrive_with_its_plugin(autoload: bool) -> None:
    pytest.importorskip("determined.master")
    lines = _python(MASTER_CHECK, autoload=autoload).splitlines()
    # With autoload on, det-master's entry point added the specs while the manager was built (a
    # trial process gets them too); with autoload off, the master registers its plugin when it asks
    # for a resource manager. Either way the plugin is registered once.
    assert lines == [
        f"before {autoload}",
        "after True LocalResourceManager",
        "master-plugin 1",
    ]


def test_det_core_names_no_other_distributions_hook_specs() -> None:
    """No import of, and no code string naming, ``determined.master`` in ``determined.core``."""
    offenders = []
    for source in sorted(CORE_PACKAGE.glob("*.py")):
        tree = ast.parse(source.read_text())
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))
            and node.body
            and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)
        }
        for node in ast.walk(tree):
            named = []
            if isinstance(node, ast.Import):
                named = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                named = [node.module or ""]
            elif (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and id(node) not in docstrings
            ):
                named = [node.value]
            offenders += [
                f"{source.name}:{getattr(node, 'lineno', 0)}: {name}"
                for name in named
                if name.startswith("determined.master")
            ]
    assert offenders == []


def test_the_public_names_are_the_implementations_and_documented() -> None:
    from determined._lazy import lazy_exports
    from determined.core import _hooks, _markers, _searcher
    from determined.launch import _util

    assert plugins.hookimpl is _markers.hookimpl and plugins.hookspec is _markers.hookspec
    assert plugins.get_plugin_manager is _hooks.get_plugin_manager
    assert plugins.lazy_exports is lazy_exports
    assert plugins.parse_max_length is _searcher.parse_max_length
    assert plugins.free_ports is _util.free_ports
    doc = plugins.__doc__ or ""
    assert [name for name in plugins.__all__ if f"`{name}`" not in doc] == []
    import determined.core

    assert determined.core.plugins is plugins


def test_the_helpers_work_through_the_public_module() -> None:
    first, second = plugins.free_ports(2)
    assert first != second and 0 < first < 65536
    length, unit = plugins.parse_max_length({"max_length": {"batches": 7}})
    assert (length, unit and unit.name) == (7, "BATCHES")
    assert plugins.parse_max_length({}) == (None, None)
    getattr_, dir_ = plugins.lazy_exports("acme", {"Unit": "determined.core._searcher"})
    assert dir_() == ["Unit"]
    with pytest.raises(AttributeError):
        getattr_("nothing_here")
