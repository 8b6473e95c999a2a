"""The `determined` namespace contract across the distributions of this repository."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

import pytest
import tomllib

import determined

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = sorted(p for p in (ROOT / "packages").iterdir() if (p / "pyproject.toml").exists())


def _pyproject(package: pathlib.Path) -> dict:
    return tomllib.loads((package / "pyproject.toml").read_text())


def test_only_core_ships_the_namespace_init() -> None:
    owners = [p.name for p in PACKAGES if (p / "src" / "determined" / "__init__.py").exists()]
    assert owners == ["core"]


def test_versions_are_lockstep_and_first_party_pins_exact() -> None:
    versions = {p.name: _pyproject(p)["project"]["version"] for p in PACKAGES}
    assert len(set(versions.values())) == 1, versions
    version = next(iter(versions.values()))
    assert determined.__version__ == version
    for package in PACKAGES:
        for requirement in _pyproject(package)["project"].get("dependencies", []):
            name = re.split(r"[<>=!~ \[]", requirement, maxsplit=1)[0]
            if name.startswith("det-"):
                assert requirement == f"{name}=={version}", (package.name, requirement)


def test_every_plugin_wheel_only_includes_its_own_subpackage() -> None:
    table = determined._SUBPACKAGES
    for package in PACKAGES:
        project = _pyproject(package)
        dist = project["project"]["name"]
        if dist == "det-core":
            continue
        included = project["tool"]["hatch"]["build"]["targets"]["wheel"]["only-include"]
        # det-cli also ships Hydra's own plugin namespace (hydra_plugins/), outside `determined`.
        included = [path for path in included if path != "src/hydra_plugins"]
        assert len(included) == 1 and included[0].startswith("src/determined/"), dist
        subpackage = included[0].removeprefix("src/determined/").split("/")[0]
        if dist != "det-plugin-deepspeed":  # ships determined.pytorch.deepspeed inside det.pytorch
            assert table[subpackage] == dist


def _run(code: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    return result.stdout.strip()


def test_import_determined_and_core_load_no_framework_or_server() -> None:
    heavy = [
        "torch",
        "tensorflow",
        "keras",
        "requests",
        "fastapi",
        "uvicorn",
        "starlette",
        "sqlalchemy",
        "deepspeed",
        "ray",
        "s3fs",
        "boto3",
    ]
    out = _run(
        "import sys, determined, determined.core, determined.storage, determined.searcher\n"
        f"print(','.join(m for m in {heavy!r} if m in sys.modules))"
    )
    assert out == ""


def test_import_determined_is_lazy() -> None:
    out = _run("import sys, determined; print('determined.core' in sys.modules)")
    assert out == "False"


def test_missing_distribution_gives_pip_hint() -> None:
    # det-plugin-estimator lives in the legacy venv (TensorFlow < 2.16), never in the main one.
    with pytest.raises(AttributeError, match=r"pip install det-plugin-estimator"):
        _ = determined.estimator  # type: ignore[attr-defined]


def test_unknown_attribute_is_a_plain_attribute_error() -> None:
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        _ = determined.nope  # type: ignore[attr-defined]
