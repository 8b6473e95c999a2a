"""det-plugin-estimator with TensorFlow >= 2.16 (the main venv has 2.21): importing it fails with one
clear message, and det itself keeps working. The main venv does not install the plugin, so these
tests put its source directory on the path of a fresh interpreter."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

from estimator_helpers import PLUGIN_SRC, legacy_env


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=legacy_env(PYTHONPATH=str(PLUGIN_SRC)),
        timeout=60,
    )


def test_import_fails_with_one_clear_message() -> None:
    result = _python("import determined.estimator")
    assert result.returncode == 1
    lines = [
        line for line in result.stderr.splitlines() if re.match(r"\w+(Error|Exception):", line)
    ]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("ImportError: det-plugin-estimator needs TensorFlow < 2.16")
    assert "(found tensorflow 2.21" in lines[0] and "pip install 'tensorflow<2.16'" in lines[0]
    assert "During handling" not in result.stderr


def test_det_estimator_attribute_gives_the_same_message_and_loads_no_tensorflow() -> None:
    code = (
        "import sys, determined as det\n"
        "try:\n"
        "    det.estimator\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
        "print('tensorflow' in sys.modules)\n"
    )
    result = _python(code)
    assert result.returncode == 0, result.stderr
    message, loaded = result.stdout.strip().splitlines()
    assert message.startswith("det-plugin-estimator needs TensorFlow < 2.16")
    assert loaded == "False"


def test_the_plugin_declares_the_pins_and_its_entry_point() -> None:
    text = (pathlib.Path(PLUGIN_SRC).parent / "pyproject.toml").read_text()
    assert '"tensorflow<2.16"' in text and '"tensorflow-estimator<2.16"' in text
    assert 'estimator = "determined.estimator._plugin"' in text
