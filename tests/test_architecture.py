"""The seams of the tree hold: distributions meet only at public modules, every REST call goes through
`determined.client`, and modules and classes stay small enough to read.

These read the source (ast and text), so they run in milliseconds and name the file and line at fault.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = ROOT / "packages"

MAX_MODULE_LINES = 600
MAX_CLASS_LINES = 300

# (importing file relative to packages/, imported module): why the exception is right. Keep it empty.
PRIVATE_IMPORT_ALLOWLIST: dict[tuple[str, str], str] = {}


@dataclasses.dataclass(frozen=True)
class Module:
    distribution: str  # the folder under packages/
    path: pathlib.Path
    name: str  # dotted import name


def _modules(packages: pathlib.Path) -> list[Module]:
    found = []
    for source in sorted(packages.glob("*/src/**/*.py")):
        relative = source.relative_to(packages)
        distribution = relative.parts[0]
        dotted = list(relative.parts[2:])
        dotted[-1] = dotted[-1].removesuffix(".py")
        if dotted[-1] == "__init__":
            dotted.pop()
        found.append(Module(distribution, source, ".".join(dotted)))
    return found


MODULES = _modules(PACKAGES)


@functools.cache
def _tree(path: pathlib.Path) -> ast.Module:
    """``path`` parsed once for all the tests of this module (parsing every module takes seconds)."""
    return ast.parse(path.read_text(), str(path))


def _owner(module_name: str, modules: list[Module] = MODULES) -> str | None:
    """The distribution shipping ``module_name`` (its longest shipped package prefix)."""
    best: tuple[int, str] | None = None
    for module in modules:
        if module_name == module.name or module_name.startswith(module.name + "."):
            depth = module.name.count(".") + 1
            # a distribution's own sub-package beats the namespace owner's __init__
            if best is None or depth > best[0]:
                best = (depth, module.distribution)
    return best[1] if best else None


def _is_private(module_name: str) -> bool:
    return any(
        part.startswith("_") and not part.startswith("__") for part in module_name.split(".")
    )


def _imported_names(tree: ast.AST) -> list[tuple[int, str]]:
    names: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                continue  # relative imports stay inside their own package
            base = node.module or ""
            names.append((node.lineno, base))
            # `from determined.core import _hooks` imports the private module determined.core._hooks
            names.extend(
                (node.lineno, f"{base}.{alias.name}")
                for alias in node.names
                if alias.name.startswith("_") and not alias.name.startswith("__")
            )
    return names


def cross_distribution_private_imports(packages: pathlib.Path = PACKAGES) -> list[str]:
    """``file:line: imports X (distribution)`` for each private module imported across a line."""
    modules = MODULES if packages == PACKAGES else _modules(packages)
    problems = []
    for module in modules:
        tree = _tree(module.path)
        for lineno, name in _imported_names(tree):
            if not (name.startswith("determined") or name.startswith("hydra_plugins")):
                continue
            if not _is_private(name):
                continue
            owner = _owner(name, modules)
            if owner is None or owner == module.distribution:
                continue
            where = str(module.path.relative_to(packages))
            if (where, name) in PRIVATE_IMPORT_ALLOWLIST:
                continue
            problems.append(f"{where}:{lineno}: imports {name} ({owner})")
    return problems


def test_owner_mapping_knows_the_distributions() -> None:
    assert _owner("determined.core._hooks") == "core"
    assert _owner("determined.pytorch._controller") == "plugin-pytorch"
    assert _owner("determined.pytorch.deepspeed._trial") == "plugin-deepspeed"
    assert _owner("determined.master._core") == "master"
    assert _is_private("determined._lazy") and not _is_private("determined.core.plugins")


def test_a_planted_private_import_is_reported(tmp_path: pathlib.Path) -> None:
    core = tmp_path / "core" / "src" / "determined"
    plugin = tmp_path / "plugin-x" / "src" / "determined" / "x"
    (core / "core").mkdir(parents=True)
    plugin.mkdir(parents=True)
    (core / "__init__.py").write_text("")
    (core / "core" / "__init__.py").write_text("")
    (core / "core" / "_hooks.py").write_text("")
    (core / "core" / "plugins.py").write_text("from determined.core import _hooks\n")
    (plugin / "__init__.py").write_text(
        "from determined.core import plugins\nfrom determined.core import _hooks\n"
        "import determined.core._hooks\nfrom . import _own\n"
    )
    (plugin / "_own.py").write_text("from determined.x import _own\n")
    assert cross_distribution_private_imports(tmp_path) == [
        "plugin-x/src/determined/x/__init__.py:2: imports determined.core._hooks (core)",
        "plugin-x/src/determined/x/__init__.py:3: imports determined.core._hooks (core)",
    ]


def test_no_distribution_imports_another_distributions_private_modules() -> None:
    problems = cross_distribution_private_imports()
    assert not problems, "\n".join(problems)


def test_the_allowlist_names_only_real_exceptions() -> None:
    for (where, name), reason in PRIVATE_IMPORT_ALLOWLIST.items():
        assert (PACKAGES / where).exists(), where
        assert reason.strip(), f"{where} -> {name} needs a reason"


API_LITERAL = re.compile(r"""["']/api/v1""")
CLIENT_TREE = PACKAGES / "core" / "src" / "determined" / "client"
MASTER_TREE = PACKAGES / "master"


def test_rest_paths_are_written_only_in_the_client_and_the_master() -> None:
    offenders = []
    for module in MODULES:
        if module.path.is_relative_to(CLIENT_TREE) or module.path.is_relative_to(MASTER_TREE):
            continue
        for lineno, line in enumerate(module.path.read_text().splitlines(), 1):
            if API_LITERAL.search(line):
                offenders.append(f"{module.path.relative_to(PACKAGES)}:{lineno}: {line.strip()}")
    assert not offenders, "REST paths belong in determined.client:\n" + "\n".join(offenders)


def test_modules_stay_small() -> None:
    too_long = []
    for module in MODULES:
        lines = len(module.path.read_text().splitlines())
        if lines > MAX_MODULE_LINES:
            too_long.append(f"{module.path.relative_to(PACKAGES)}: {lines} lines")
    assert not too_long, f"modules over {MAX_MODULE_LINES} lines:\n" + "\n".join(too_long)


def test_classes_stay_small() -> None:
    too_long = []
    for module in MODULES:
        tree = _tree(module.path)
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_CLASS_LINES:
                    too_long.append(
                        f"{module.path.relative_to(PACKAGES)}:{node.lineno}: {node.name} {lines}"
                    )
    assert not too_long, f"classes over {MAX_CLASS_LINES} lines:\n" + "\n".join(too_long)
