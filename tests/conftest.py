"""Suite-wide: where every test must run (CI sets PRIVLAB_TEST_NO_SKIP=1), a skip is a failure.

Tests skip, with their reason, when an optional extra (torch, flwr), PostgreSQL or Chromium is
absent, so the suite works on a light install. In CI all of them are installed; a skip there
would mean a missing install step hiding behind a green run, so it fails instead.
"""

from __future__ import annotations

import os

import pytest

NO_SKIP = os.environ.get("PRIVLAB_TEST_NO_SKIP") == "1"


def _as_failure(report: pytest.BaseReport) -> None:
    reason = report.longrepr[-1] if isinstance(report.longrepr, tuple) else report.longrepr
    report.outcome = "failed"
    report.longrepr = (f"skipped where every test must run (PRIVLAB_TEST_NO_SKIP=1): {reason}; "
                       "install what the reason names")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> object:
    outcome = yield
    report = outcome.get_result()
    if NO_SKIP and report.skipped and not hasattr(report, "wasxfail"):
        _as_failure(report)


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> object:
    outcome = yield
    report = outcome.get_result()
    if NO_SKIP and report.skipped:
        _as_failure(report)
