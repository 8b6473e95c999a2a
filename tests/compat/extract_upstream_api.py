"""Regenerate ``upstream_api_0_38_1.json``: Determined 0.38.1's public names and parameter lists.

Run by hand (CI has no upstream copy), from a clone of https://github.com/determined-ai/determined::

    python tests/compat/extract_upstream_api.py --repo /path/to/determined \
        > tests/compat/upstream_api_0_38_1.json

It reads the sources with :mod:`ast` (nothing upstream is imported or executed) from two revisions:
``v0.38.1`` for every module, and the parent of the commit that removed ``determined.estimator``
(``f1e9b72d4a``, 2023) for that module, which 0.38.1 no longer ships. Only names and parameter lists
are written: no code, no docstrings, no annotations.

What counts as public in a module: the names it binds at top level (including inside ``if``/``try``/
``with`` blocks) that do not start with ``_``; of imported names only those imported from
``determined.*`` (re-exports), never standard-library or third-party imports, and modules only when
a package's ``__init__`` imports them; module loggers and ``TypeVar``s are left out. For ``determined.launch`` the names
are its submodules (each is run with ``python -m``).

For a class: its constructor's parameter list, its public methods' (inherited ones from classes
inside ``determined`` included), its public attributes (properties, record fields and what
``__init__`` assigns to ``self``) and an enum's members.

A parameter list is a list of tokens in Python's own signature notation without annotations:
``"name"`` (required), ``"name="`` (has a default), ``"/"`` (the ones before are positional-only),
``"*"`` (the ones after are keyword-only), ``"*args"``, ``"**kwargs"``. Methods omit ``self``/``cls``.
"""

from __future__ import annotations

import argparse
import ast
import json
import pathlib
import subprocess
import sys
import tarfile
import tempfile
from typing import Any

UPSTREAM_REV = "v0.38.1"
ESTIMATOR_REV = "f1e9b72d4a^"

# module name -> which revision it is read from
MODULES: dict[str, str] = {
    "determined": UPSTREAM_REV,
    "determined.core": UPSTREAM_REV,
    "determined.errors": UPSTREAM_REV,
    "determined.util": UPSTREAM_REV,
    "determined.experimental": UPSTREAM_REV,
    "determined.experimental.client": UPSTREAM_REV,
    "determined.experimental.core_v2": UPSTREAM_REV,
    "determined.common.api": UPSTREAM_REV,
    "determined.common.api.errors": UPSTREAM_REV,
    "determined.pytorch": UPSTREAM_REV,
    "determined.pytorch.samplers": UPSTREAM_REV,
    "determined.pytorch.experimental": UPSTREAM_REV,
    "determined.pytorch.deepspeed": UPSTREAM_REV,
    "determined.keras": UPSTREAM_REV,
    "determined.keras.callbacks": UPSTREAM_REV,
    "determined.transformers": UPSTREAM_REV,
    "determined.lightning.experimental": UPSTREAM_REV,
    "determined.launch": UPSTREAM_REV,
    "determined.estimator": ESTIMATOR_REV,
}

# Protocol methods recorded by name only (their parameter names are conventional, not API).
PROTOCOL_METHODS = ("__call__", "__enter__", "__exit__", "__iter__", "__len__", "__getitem__")


class SourceTree:
    """The ``determined`` package of one upstream revision, parsed on demand."""

    def __init__(self, harness: pathlib.Path) -> None:
        self.harness = harness
        self._parsed: dict[str, ast.Module | None] = {}

    def module_path(self, module: str) -> pathlib.Path | None:
        """The file of ``module`` (a package's ``__init__.py``), or None if there is none."""
        base = self.harness.joinpath(*module.split("."))
        if (base / "__init__.py").is_file():
            return base / "__init__.py"
        if base.with_suffix(".py").is_file():
            return base.with_suffix(".py")
        return None

    def is_module(self, module: str) -> bool:
        return self.module_path(module) is not None

    def parse(self, module: str) -> ast.Module | None:
        if module not in self._parsed:
            path = self.module_path(module)
            self._parsed[module] = ast.parse(path.read_text()) if path else None
        return self._parsed[module]


def _top_level_statements(body: list[ast.stmt]) -> list[ast.stmt]:
    """Statements at module level, descending into ``if``/``try``/``with`` blocks."""
    out: list[ast.stmt] = []
    for stmt in body:
        if isinstance(stmt, ast.If):
            out += _top_level_statements(stmt.body) + _top_level_statements(stmt.orelse)
        elif isinstance(stmt, ast.Try):
            out += _top_level_statements(stmt.body)
            for handler in stmt.handlers:
                out += _top_level_statements(handler.body)
            out += _top_level_statements(stmt.orelse) + _top_level_statements(stmt.finalbody)
        elif isinstance(stmt, ast.With):
            out += _top_level_statements(stmt.body)
        else:
            out.append(stmt)
    return out


def _absolute(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    parts = module.split(".")
    if not is_package:
        parts = parts[:-1]
    parts = parts[: len(parts) - (node.level - 1)]
    return ".".join(parts + ([node.module] if node.module else []))


def _is_ignored_value(value: ast.expr | None) -> bool:
    """Loggers and TypeVars are module plumbing, not API."""
    if not isinstance(value, ast.Call):
        return False
    func = value.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    return name in ("getLogger", "TypeVar")


def _decorator_names(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> list[str]:
    names = []
    for deco in node.decorator_list:
        target = deco.func if isinstance(deco, ast.Call) else deco
        if isinstance(target, ast.Attribute):
            names.append(target.attr)
        elif isinstance(target, ast.Name):
            names.append(target.id)
    return names


def parameter_tokens(args: ast.arguments, drop_first: bool) -> list[str]:
    """The parameter list of a ``def`` in signature notation (see the module docstring)."""
    positional = list(args.posonlyargs) + list(args.args)
    n_defaults = len(args.defaults)
    first_default = len(positional) - n_defaults
    tokens: list[str] = []
    for index, arg in enumerate(positional):
        if drop_first and index == 0:
            continue
        tokens.append(arg.arg + ("=" if index >= first_default else ""))
        if args.posonlyargs and index == len(args.posonlyargs) - 1:
            tokens.append("/")
    if args.vararg:
        tokens.append("*" + args.vararg.arg)
    elif args.kwonlyargs:
        tokens.append("*")
    for arg, default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        tokens.append(arg.arg + ("=" if default is not None else ""))
    if args.kwarg:
        tokens.append("**" + args.kwarg.arg)
    if tokens and tokens[0] == "/":
        tokens.pop(0)
    return tokens


def _self_attributes(init: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    """The public attributes a constructor sets (``self.name = ...``)."""
    if not init.args.args:
        return []
    self_name = init.args.args[0].arg
    names: list[str] = []
    for node in ast.walk(init):
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            targets = [node.target]
        else:
            continue
        for target in targets:
            elements = target.elts if isinstance(target, ast.Tuple) else [target]
            for element in elements:
                if (
                    isinstance(element, ast.Attribute)
                    and isinstance(element.value, ast.Name)
                    and element.value.id == self_name
                    and not element.attr.startswith("_")
                    and element.attr not in names
                ):
                    names.append(element.attr)
    return names


class Extractor:
    """Resolves one revision's public names, following re-exports inside ``determined``."""

    def __init__(self, tree: SourceTree) -> None:
        self.tree = tree

    def bindings(self, module: str) -> dict[str, tuple[str, Any]]:
        """Every top-level binding of ``module``: name -> (how, what)."""
        parsed = self.tree.parse(module)
        if parsed is None:
            raise LookupError(f"no source for {module}")
        path = self.tree.module_path(module)
        is_package = path is not None and path.name == "__init__.py"
        out: dict[str, tuple[str, Any]] = {}
        for stmt in _top_level_statements(parsed.body):
            if isinstance(stmt, ast.ImportFrom):
                source = _absolute(module, is_package, stmt)
                for alias in stmt.names:
                    name = alias.asname or alias.name
                    if source == "determined" or source.startswith("determined."):
                        out[name] = ("import", (source, alias.name))
                    else:
                        out.pop(name, None)
            elif isinstance(stmt, ast.Import):
                for alias in stmt.names:
                    if alias.asname and alias.name.startswith("determined."):
                        out[alias.asname] = ("module", alias.name)
            elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if "overload" not in _decorator_names(stmt):
                    out[stmt.name] = ("function", stmt)
            elif isinstance(stmt, ast.ClassDef):
                out[stmt.name] = ("class", (module, stmt))
            elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                for target in targets:
                    if isinstance(target, ast.Name):
                        if _is_ignored_value(stmt.value):
                            out.pop(target.id, None)
                        elif isinstance(stmt.value, ast.Name) and stmt.value.id in out:
                            out[target.id] = out[stmt.value.id]  # an alias of another name
                        else:
                            out[target.id] = ("value", None)
        return out

    def resolve(self, module: str, name: str, depth: int = 0) -> tuple[str, Any]:
        """What ``module.name`` is, following ``from determined.x import y`` chains."""
        if depth > 20:
            raise RecursionError(f"import cycle at {module}.{name}")
        if self.tree.is_module(f"{module}.{name}"):
            return ("module", f"{module}.{name}")
        binding = self.bindings(module).get(name)
        if binding is None:
            raise LookupError(f"{module}.{name} is not defined upstream")
        how, what = binding
        if how == "import":
            source, original = what
            return self.resolve(source, original, depth + 1)
        return binding

    def describe(self, module: str, name: str) -> dict[str, Any]:
        how, what = self.resolve(module, name)
        if how == "module":
            return {"kind": "module"}
        if how == "value":
            return {"kind": "value"}
        if how == "function":
            return {"kind": "function", "params": parameter_tokens(what.args, drop_first=False)}
        return self._prune(self.describe_class(*what))

    def _base_classes(self, module: str, node: ast.ClassDef) -> list[tuple[str, ast.ClassDef]]:
        """The bases of a class that are defined inside ``determined`` (others are not read)."""
        bases = []
        for base in node.bases:
            if isinstance(base, ast.Name):
                try:
                    how, what = self.resolve(module, base.id)
                except LookupError:
                    continue
                if how == "class":
                    bases.append(what)
            elif isinstance(base, ast.Attribute) and isinstance(base.value, ast.Name):
                binding = self.bindings(module).get(base.value.id)
                if binding and binding[0] in ("import", "module"):
                    target = binding[1] if binding[0] == "module" else ".".join(binding[1])
                    if self.tree.is_module(target):
                        try:
                            how, what = self.resolve(target, base.attr)
                        except LookupError:
                            continue
                        if how == "class":
                            bases.append(what)
        return bases

    def _base_names(self, node: ast.ClassDef) -> set[str]:
        return {ast.unparse(base).split(".")[-1] for base in node.bases}

    def describe_class(self, module: str, node: ast.ClassDef) -> dict[str, Any]:
        """A class's constructor, public methods, properties and enum members (bases first)."""
        info: dict[str, Any] = {
            "kind": "class",
            "init": None,
            "methods": {},
            "attributes": [],
            "members": [],
        }
        for base_module, base_node in reversed(self._base_classes(module, node)):
            base = self.describe_class(base_module, base_node)
            info["init"] = base["init"] if base["init"] is not None else info["init"]
            info["methods"].update(base["methods"])
            info["attributes"] += [a for a in base["attributes"] if a not in info["attributes"]]
        base_names = self._base_names(node)
        is_enum = bool(base_names & {"Enum", "IntEnum", "StrEnum", "Flag", "IntFlag"})
        is_record = "dataclass" in _decorator_names(node) or "NamedTuple" in base_names
        fields: list[str] = []
        for stmt in node.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                decorators = _decorator_names(stmt)
                if "overload" in decorators:
                    continue
                if "property" in decorators or "setter" in decorators:
                    if not stmt.name.startswith("_") and stmt.name not in info["attributes"]:
                        info["attributes"].append(stmt.name)
                    continue
                if "staticmethod" in decorators:
                    kind = "staticmethod"
                elif "classmethod" in decorators:
                    kind = "classmethod"
                else:
                    kind = "method"
                params = parameter_tokens(stmt.args, drop_first=kind != "staticmethod")
                if stmt.name == "__init__":
                    info["init"] = params
                    for name in _self_attributes(stmt):
                        if name not in info["attributes"]:
                            info["attributes"].append(name)
                elif stmt.name in PROTOCOL_METHODS:
                    info["methods"][stmt.name] = {"kind": "protocol"}
                elif not stmt.name.startswith("_"):
                    info["methods"][stmt.name] = {"kind": kind, "params": params}
            elif isinstance(stmt, (ast.Assign, ast.AnnAssign)) and (is_enum or is_record):
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                for target in targets:
                    if not isinstance(target, ast.Name) or target.id.startswith("_"):
                        continue
                    if is_enum:
                        info["members"].append(target.id)
                    elif isinstance(stmt, ast.AnnAssign):
                        fields.append(target.id + ("=" if stmt.value is not None else ""))
                        if target.id not in info["attributes"]:
                            info["attributes"].append(target.id)
        if is_record and info["init"] is None:
            info["init"] = fields
        return info

    @staticmethod
    def _prune(info: dict[str, Any]) -> dict[str, Any]:
        """Leave out what a class does not have (no own/inherited ``__init__``, no methods...)."""
        return {key: value for key, value in info.items() if value not in (None, [], {})}

    def public_names(self, module: str) -> list[str]:
        if module == "determined.launch":
            directory = self.tree.harness / "determined" / "launch"
            return sorted(p.stem for p in directory.glob("*.py") if not p.stem.startswith("_"))
        path = self.tree.module_path(module)
        is_package = path is not None and path.name == "__init__.py"
        names = []
        for name in self.bindings(module):
            if name.startswith("_"):
                continue
            # A plain module's imported modules are its plumbing; a package re-exports them.
            if not is_package and self.resolve(module, name)[0] == "module":
                continue
            names.append(name)
        return sorted(names)

    def module_api(self, module: str) -> dict[str, Any]:
        return {name: self.describe(module, name) for name in self.public_names(module)}


def _export(repo: pathlib.Path, rev: str, into: pathlib.Path) -> tuple[pathlib.Path, str]:
    """Unpack ``harness/determined`` of ``rev`` into a directory; returns (harness dir, commit)."""
    commit = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", f"{rev}^{{commit}}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    archive = into / f"{commit}.tar"
    subprocess.run(
        ["git", "-C", str(repo), "archive", "-o", str(archive), commit, "harness/determined"],
        check=True,
    )
    target = into / commit
    with tarfile.open(archive) as tar:
        tar.extractall(target, filter="data")
    return target / "harness", commit


def extract(repo: pathlib.Path) -> dict[str, Any]:
    """The whole data file for a clone of upstream at ``repo``."""
    with tempfile.TemporaryDirectory() as scratch:
        trees: dict[str, tuple[Extractor, str]] = {}
        for rev in sorted(set(MODULES.values())):
            harness, commit = _export(repo, rev, pathlib.Path(scratch))
            trees[rev] = (Extractor(SourceTree(harness)), commit)
        modules = {}
        for module, rev in MODULES.items():
            extractor, commit = trees[rev]
            modules[module] = {
                "revision": rev,
                "commit": commit,
                "names": extractor.module_api(module),
            }
    return {
        "upstream": "https://github.com/determined-ai/determined",
        "generated_by": "tests/compat/extract_upstream_api.py",
        "notation": (
            "params: Python signature notation without annotations; 'x=' has a default, "
            "'/' ends positional-only, '*' starts keyword-only; methods omit self/cls"
        ),
        "modules": modules,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=pathlib.Path, required=True, help="a clone of upstream")
    args = parser.parse_args(argv)
    json.dump(extract(args.repo), sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
