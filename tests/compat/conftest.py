"""Repeat each module's upstream-API coverage line in pytest's summary (also under xdist).

The tests of ``test_upstream_api.py`` attach the line as a user property, which xdist sends back
with each report; this conftest collects them and prints them at the end of the run.
"""

from __future__ import annotations

import re

import pytest

_COVERAGE: list[str] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when != "teardown":
        _COVERAGE.extend(
            str(value) for key, value in report.user_properties if key == "upstream_api_coverage"
        )


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    lines = sorted(set(_COVERAGE))
    if lines:
        terminalreporter.section("upstream API coverage (Determined 0.38.1)")
        for line in lines:
            terminalreporter.write_line(line)
        counts = [re.search(r": (\d+)/(\d+) names", line) for line in lines]
        matched = sum(int(m.group(1)) for m in counts if m)
        total = sum(int(m.group(2)) for m in counts if m)
        if total:
            terminalreporter.write_line(
                f"all compared modules: {matched}/{total} names match upstream"
            )
