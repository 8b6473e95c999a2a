"""Compare det's importable modules with upstream Determined's public names and parameter lists.

``upstream_api_0_38_1.json`` (written by ``extract_upstream_api.py``) says, per module, every public
name upstream had and, for callables and classes, their parameter lists. :func:`compare_module`
imports det's module and reports each difference as a :class:`Problem` whose ``target`` is the
dotted upstream name it concerns (``determined.core.CheckpointContext.upload``), so a list of
deliberate differences can be matched against it by prefix.

What "compatible" means for a parameter list: every call that upstream's signature accepts is
accepted by det's. So each upstream positional parameter is at the same position under the same
name, each keyword-only one is accepted by name, a parameter with a default has one in det too, and
``*args``/``**kwargs`` stay; det may add parameters only with defaults.

Also runnable as a script (the legacy venv's interpreter runs it for ``determined.estimator``)::

    python tests/compat/api_compare.py determined.estimator

prints the module's :class:`ModuleReport` as JSON. Only the standard library is used.
"""

from __future__ import annotations

import ast
import dataclasses
import enum
import functools
import importlib
import importlib.metadata
import importlib.util
import inspect
import json
import pathlib
import sys
import textwrap
import types
from typing import Any

DATA_FILE = pathlib.Path(__file__).resolve().parent / "upstream_api_0_38_1.json"

# Modules that a plugin distribution ships: a venv without it skips them instead of failing.
DISTRIBUTIONS = {
    "determined.estimator": "det-plugin-estimator",
    "determined.transformers": "det-plugin-transformers",
    "determined.pytorch.deepspeed": "det-plugin-deepspeed",
    "determined.pytorch": "det-plugin-pytorch",
    "determined.keras": "det-plugin-keras",
    "determined.lightning": "det-plugin-pytorch",
}

P = inspect.Parameter
POSITIONAL = (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD)
VARIADIC = (P.VAR_POSITIONAL, P.VAR_KEYWORD)


@dataclasses.dataclass(frozen=True)
class Problem:
    """One difference: ``target`` is the upstream dotted name, ``message`` says what differs."""

    target: str
    message: str


@dataclasses.dataclass
class ModuleReport:
    """The comparison of one module: its upstream names and the problems found (or why skipped)."""

    module: str
    names: list[str]
    problems: list[Problem] = dataclasses.field(default_factory=list)
    skipped: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "module": self.module,
            "names": self.names,
            "problems": [dataclasses.asdict(p) for p in self.problems],
            "skipped": self.skipped,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ModuleReport:
        return cls(
            module=data["module"],
            names=data["names"],
            problems=[Problem(**p) for p in data["problems"]],
            skipped=data["skipped"],
        )


@dataclasses.dataclass(frozen=True)
class UpstreamParam:
    name: str
    kind: inspect._ParameterKind
    has_default: bool


def load_upstream(path: pathlib.Path = DATA_FILE) -> dict[str, Any]:
    """The checked-in upstream list: module -> {"names": {name: description}, ...}."""
    modules: dict[str, Any] = json.loads(path.read_text())["modules"]
    return modules


def parse_params(tokens: list[str]) -> list[UpstreamParam]:
    """Upstream's parameter tokens (``x``, ``x=``, ``/``, ``*``, ``*args``, ``**kw``) as parameters."""
    kinds_before_slash = "/" in tokens
    kind = P.POSITIONAL_ONLY if kinds_before_slash else P.POSITIONAL_OR_KEYWORD
    params: list[UpstreamParam] = []
    for token in tokens:
        if token == "/":
            kind = P.POSITIONAL_OR_KEYWORD
        elif token == "*":
            kind = P.KEYWORD_ONLY
        elif token.startswith("**"):
            params.append(UpstreamParam(token[2:], P.VAR_KEYWORD, True))
        elif token.startswith("*"):
            params.append(UpstreamParam(token[1:], P.VAR_POSITIONAL, True))
            kind = P.KEYWORD_ONLY
        else:
            params.append(UpstreamParam(token.rstrip("="), kind, token.endswith("=")))
    return params


def signature_problems(upstream_tokens: list[str], det_sig: inspect.Signature) -> list[str]:
    """Why a call that upstream's parameter list accepts would fail against ``det_sig``."""
    upstream = parse_params(upstream_tokens)
    det_params = list(det_sig.parameters.values())
    det_by_name = {p.name: p for p in det_params if p.kind not in VARIADIC}
    det_positional = [p for p in det_params if p.kind in POSITIONAL]
    det_kinds = {p.kind for p in det_params}
    forwards_all = P.VAR_POSITIONAL in det_kinds and P.VAR_KEYWORD in det_kinds
    upstream_kinds = {p.kind for p in upstream}
    if upstream and all(p.kind in VARIADIC for p in upstream) and len(upstream) == 2:
        return []  # upstream only forwards (*args, **kwargs) to a framework class: nothing to compare
    problems: list[str] = []
    upstream_positional = [p for p in upstream if p.kind in POSITIONAL]
    for index, param in enumerate(upstream_positional):
        if index < len(det_positional):
            det = det_positional[index]
            if param.kind == P.POSITIONAL_OR_KEYWORD and det.name != param.name:
                problems.append(f"parameter {index + 1} is {det.name!r}, upstream {param.name!r}")
                continue
            if param.kind == P.POSITIONAL_OR_KEYWORD and det.kind == P.POSITIONAL_ONLY:
                problems.append(f"{param.name!r} is positional-only, upstream also by keyword")
            if param.has_default and det.default is P.empty:
                problems.append(f"{param.name!r} has no default, upstream has one")
        elif P.VAR_POSITIONAL in det_kinds and (
            param.kind == P.POSITIONAL_ONLY
            or param.name in det_by_name
            or P.VAR_KEYWORD in det_kinds
        ):
            continue  # det's *args takes it by position, and its name is accepted by keyword
        else:
            problems.append(f"positional parameter {param.name!r} is missing")
    for param in upstream:
        if param.kind != P.KEYWORD_ONLY:
            continue
        det = det_by_name.get(param.name)
        if det is None or det.kind == P.POSITIONAL_ONLY:
            if forwards_all:
                continue  # det forwards *args/**kwargs (to a framework class, like upstream)
            problems.append(f"keyword parameter {param.name!r} is missing")
        elif param.has_default and det.default is P.empty:
            problems.append(f"{param.name!r} has no default, upstream has one")
    for kind, label in ((P.VAR_POSITIONAL, "*args"), (P.VAR_KEYWORD, "**kwargs")):
        if kind in upstream_kinds and kind not in det_kinds:
            problems.append(f"does not take {label} like upstream")
    upstream_names = {p.name for p in upstream if p.kind not in VARIADIC}
    if P.VAR_KEYWORD in upstream_kinds:
        return problems  # det's required keywords may be what upstream's **kwargs carried
    for det in det_params:
        if det.kind in VARIADIC or det.name in upstream_names or det.default is not P.empty:
            continue
        problems.append(f"det requires {det.name!r}, which upstream does not have")
    return problems


# What a built-in exception's ``__init__`` accepts: inspect cannot read it; it takes positionals.
_EXCEPTION_SIGNATURE = inspect.Signature([P("args", P.VAR_POSITIONAL)])


def _det_signature(obj: Any, drop_first: bool = False) -> inspect.Signature | None:
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        if inspect.isclass(obj) and issubclass(obj, BaseException):
            return _EXCEPTION_SIGNATURE  # only a built-in exception's __init__ is unreadable
        return None
    if drop_first:
        params = list(sig.parameters.values())
        if params and params[0].kind in POSITIONAL:
            sig = sig.replace(parameters=params[1:])
    return sig


def _static_lookup(cls: type, name: str) -> Any:
    for klass in inspect.getmro(cls):
        if name in vars(klass):
            return vars(klass)[name]
    return None


@functools.cache
def _assigned_attributes(klass: type) -> frozenset[str]:
    """The attributes a class's own methods assign on ``self`` (read from its source)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
    except (OSError, TypeError, SyntaxError):
        return frozenset()
    return frozenset(
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.ctx, ast.Store)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
    )


def _instance_attribute_names(cls: type) -> set[str] | None:
    """Attributes an instance has without the class defining them: fields, slots, annotations,
    what methods assign on ``self``. None if any attribute may exist (a ``__getattr__``)."""
    names: set[str] = set()
    for klass in inspect.getmro(cls):
        if klass is not object and "__getattr__" in vars(klass):
            return None
        names |= _assigned_attributes(klass)
        names |= set(getattr(klass, "__annotations__", {}) or {})
        slots = vars(klass).get("__slots__", ())
        names |= {slots} if isinstance(slots, str) else set(slots)
    if dataclasses.is_dataclass(cls):
        names |= {f.name for f in dataclasses.fields(cls)}
    sig = _det_signature(cls)
    if sig is not None:
        names |= set(sig.parameters)
    return names


def _compare_callable(
    target: str, tokens: list[str], det_obj: Any, drop_first: bool = False
) -> list[Problem]:
    sig = _det_signature(det_obj, drop_first=drop_first)
    if sig is None:
        return [Problem(target, "det's signature cannot be read")]
    return [Problem(target, message) for message in signature_problems(tokens, sig)]


def _compare_method(target: str, spec: dict[str, Any], det_cls: type, name: str) -> list[Problem]:
    raw = _static_lookup(det_cls, name)
    if raw is None:
        return [Problem(target, "missing")]
    if spec["kind"] == "protocol":
        return []
    if isinstance(raw, (property, functools.cached_property)):
        return [Problem(target, "is a property in det, a method upstream")]
    if isinstance(raw, staticmethod):
        return _compare_callable(target, spec["params"], raw.__func__)
    if isinstance(raw, classmethod):
        return _compare_callable(target, spec["params"], raw.__func__, drop_first=True)
    if spec["kind"] in ("classmethod", "staticmethod"):
        return [Problem(target, f"is an instance method in det, a {spec['kind']} upstream")]
    if not callable(raw):
        return [Problem(target, "is not callable in det")]
    return _compare_callable(target, spec["params"], raw, drop_first=inspect.isfunction(raw))


def compare_class(target: str, spec: dict[str, Any], det_obj: Any) -> list[Problem]:
    """A class: det's must be a class too (subclassing, ``isinstance``), with upstream's members."""
    if not inspect.isclass(det_obj):
        return [Problem(target, f"is a {type(det_obj).__name__} in det, a class upstream")]
    problems: list[Problem] = []
    if "init" in spec and not issubclass(det_obj, enum.Enum):
        problems += _compare_callable(f"{target}.__init__", spec["init"], det_obj)
    for name, method in sorted(spec.get("methods", {}).items()):
        problems += _compare_method(f"{target}.{name}", method, det_obj, name)
    instance_names = _instance_attribute_names(det_obj)
    for name in spec.get("attributes", []) if instance_names is not None else []:
        if _static_lookup(det_obj, name) is None and name not in instance_names:
            problems.append(Problem(f"{target}.{name}", "attribute missing"))
    for name in spec.get("members", []):
        if not hasattr(det_obj, name):
            problems.append(Problem(f"{target}.{name}", "member missing"))
    return problems


def compare_name(target: str, spec: dict[str, Any], det_obj: Any) -> list[Problem]:
    """One upstream name against det's object of the same name."""
    kind = spec["kind"]
    if kind == "module":
        if not isinstance(det_obj, types.ModuleType):
            return [Problem(target, f"is a {type(det_obj).__name__} in det, a module upstream")]
        return []
    if kind == "class":
        return compare_class(target, spec, det_obj)
    if kind == "function":
        if not callable(det_obj):
            return [Problem(target, "is not callable in det")]
        return _compare_callable(target, spec["params"], det_obj)
    return []


def _distribution_of(module: str) -> str:
    for prefix in sorted(DISTRIBUTIONS, key=len, reverse=True):
        if module == prefix or module.startswith(prefix + "."):
            return DISTRIBUTIONS[prefix]
    return "det-core"


def _import(module: str) -> tuple[types.ModuleType | None, str | None, str | None]:
    """(the module, why it is skipped, why it is missing)."""
    distribution = _distribution_of(module)
    try:
        importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None, f"{distribution} is not installed in this venv", None
    try:
        return importlib.import_module(module), None, None
    except ModuleNotFoundError as exc:
        if exc.name and (exc.name == module or module.startswith(exc.name + ".")):
            return None, None, f"module {module} does not exist in det"
        if exc.name and not exc.name.startswith("determined"):
            return None, f"{module} needs {exc.name!r}, not installed in this venv", None
        return None, None, f"import fails: {exc!r}"
    except Exception as exc:  # an import that fails for another reason is a problem, not a skip
        return None, None, f"import fails: {exc!r}"


def compare_module(module: str, upstream: dict[str, Any]) -> ModuleReport:
    """Import det's ``module`` and compare each of upstream's names with it."""
    names = sorted(upstream["names"])
    report = ModuleReport(module=module, names=names)
    if module == "determined.launch":
        for name in names:
            if importlib.util.find_spec(f"{module}.{name}") is None:
                report.problems.append(Problem(f"{module}.{name}", "launcher module missing"))
        return report
    det_module, skipped, missing = _import(module)
    if skipped:
        report.skipped = skipped
        return report
    if det_module is None:
        report.problems += [Problem(f"{module}.{name}", str(missing)) for name in names]
        return report
    for name in names:
        target = f"{module}.{name}"
        try:
            det_obj = getattr(det_module, name)
        except AttributeError:
            report.problems.append(Problem(target, "missing"))
            continue
        except Exception as exc:  # a lazy attribute whose import fails
            report.problems.append(Problem(target, f"access fails: {exc!r}"))
            continue
        report.problems += compare_name(target, upstream["names"][name], det_obj)
    return report


def main(argv: list[str]) -> int:
    modules = load_upstream()
    out = sys.stdout
    sys.stdout = sys.stderr  # what imported modules print must not mix with the JSON
    try:
        reports = [compare_module(module, modules[module]).to_json() for module in argv]
    finally:
        sys.stdout = out
    json.dump(reports, out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
