"""``determined.common.util``: the helpers upstream's training code imports (the generic-metrics
fixture of upstream's e2e tests reports under ``det_util._LEGACY_TRAINING``)."""

from __future__ import annotations

import io

import pytest

from determined.common import util


def test_legacy_group_names() -> None:
    assert (util._LEGACY_TRAINING, util._LEGACY_VALIDATION, util._INFERENCE) == (
        "training",
        "validation",
        "inference",
    )


def test_helpers() -> None:
    assert list(util.chunks("ABCDEFG", 3)) == ["ABC", "DEF", "G"]
    assert list(util.chunks([1, 2, 3], 2)) == [[1, 2], [3]]
    assert util.sizeof_fmt(1536) == "1.5KB" and util.sizeof_fmt(10) == "10.0B"
    assert util.strtobool("Yes") is True and util.strtobool("off") is False
    with pytest.raises(ValueError, match="maybe"):
        util.strtobool("maybe")


def test_yaml_round_trip_keeps_key_order() -> None:
    text = util.yaml_safe_dump({"name": "x", "a": {"z": 1, "b": 2}}, default_flow_style=False)
    assert text.index("name") < text.index("a:") and text.index("z:") < text.index("b:")
    assert util.yaml_safe_load(text) == {"name": "x", "a": {"z": 1, "b": 2}}
    stream = io.StringIO()
    assert util.yaml_safe_dump([1, 2], stream) is None
    assert util.yaml_safe_load(io.StringIO(stream.getvalue())) == [1, 2]


def test_debug_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DET_DEBUG", "true")
    assert util.debug_mode()
    monkeypatch.setenv("DET_DEBUG", "0")
    assert not util.debug_mode()
