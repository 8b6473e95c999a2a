"""The comparison rules of ``api_compare``: each kind of regression is caught, compatible changes pass."""

from __future__ import annotations

import enum
import inspect
from typing import Any

from compat.api_compare import compare_name, parse_params, signature_problems


def _problems(tokens: list[str], fn: Any) -> list[str]:
    return signature_problems(tokens, inspect.signature(fn))


def test_parse_params_reads_signature_notation() -> None:
    params = parse_params(["a", "/", "b=", "*args", "c", "d=", "**kw"])
    assert [(p.name, p.kind.name, p.has_default) for p in params] == [
        ("a", "POSITIONAL_ONLY", False),
        ("b", "POSITIONAL_OR_KEYWORD", True),
        ("args", "VAR_POSITIONAL", True),
        ("c", "KEYWORD_ONLY", False),
        ("d", "KEYWORD_ONLY", True),
        ("kw", "VAR_KEYWORD", True),
    ]


def test_same_signature_and_added_optional_parameters_pass() -> None:
    def same(stuff: Any, dst: int = 0, *, timeout: float = 1.0) -> None: ...

    def more(
        stuff: Any, dst: int = 0, extra: int = 1, *, timeout: float = 1.0, x: int = 2
    ) -> None: ...

    assert _problems(["stuff", "dst=", "*", "timeout="], same) == []
    assert _problems(["stuff", "dst=", "*", "timeout="], more) == []


def test_a_renamed_parameter_fails() -> None:
    def gather(x: Any) -> None: ...

    assert "parameter 1 is 'x', upstream 'stuff'" in _problems(["stuff"], gather)


def test_a_lost_default_an_added_required_parameter_and_a_missing_keyword_fail() -> None:
    def fn(a: int, b: int, c: int) -> None: ...

    problems = _problems(["a", "b=", "*", "timeout="], fn)
    assert "'b' has no default, upstream has one" in problems
    assert "det requires 'c', which upstream does not have" in problems
    assert "keyword parameter 'timeout' is missing" in problems


def test_keyword_only_upstream_parameter_may_be_positional_or_keyword_in_det() -> None:
    def fn(a: int, timeout: float = 1.0) -> None: ...

    assert _problems(["a", "*", "timeout="], fn) == []


def test_dropping_kwargs_fails_and_forwarding_wrappers_pass() -> None:
    def no_kwargs(a: int) -> None: ...

    def forwards(*args: Any, **kwargs: Any) -> None: ...

    def explicit(monitor: str = "val_loss", patience: int = 0) -> None: ...

    assert _problems(["a", "**kwargs"], no_kwargs) == ["does not take **kwargs like upstream"]
    assert _problems(["a", "b=", "*", "c="], forwards) == []
    assert _problems(["*arg", "**kwarg"], explicit) == []  # upstream only forwarded to Keras


def test_a_factory_where_upstream_has_a_class_fails() -> None:
    class Upstreamish:
        def close(self) -> None: ...

    def factory() -> Upstreamish:
        return Upstreamish()

    spec = {"kind": "class", "init": [], "methods": {"close": {"kind": "method", "params": []}}}
    assert compare_name("m.Dummy", spec, Upstreamish) == []
    (problem,) = compare_name("m.Dummy", spec, factory)
    assert problem.message == "is a function in det, a class upstream"


def test_class_members_methods_and_attributes_are_checked() -> None:
    class Mode(enum.Enum):
        A = "a"

    class Context:
        def __init__(self) -> None:
            self.distributed = None

        @classmethod
        def build(cls, chief_ip: str | None = None) -> Context:
            return cls()

        def upload(self, ckpt_dir: str) -> None: ...

    enum_spec = {"kind": "class", "members": ["A", "B"]}
    assert [p.target for p in compare_name("m.Mode", enum_spec, Mode)] == ["m.Mode.B"]
    spec = {
        "kind": "class",
        "init": [],
        "methods": {
            "build": {"kind": "classmethod", "params": ["chief_ip="]},
            "upload": {"kind": "method", "params": ["ckpt_dir", "metadata="]},
            "download": {"kind": "method", "params": []},
        },
        "attributes": ["distributed", "preempt"],
    }
    problems = {(p.target, p.message) for p in compare_name("m.Context", spec, Context)}
    assert problems == {
        ("m.Context.upload", "positional parameter 'metadata' is missing"),
        ("m.Context.download", "missing"),
        ("m.Context.preempt", "attribute missing"),
    }
