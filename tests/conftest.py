"""Suite-wide: where every test must run (CI sets PRIVLAB_TEST_NO_SKIP=1), a skip is a failure.

Tests skip, with their reason, when an optional extra (torch, flwr), PostgreSQL or Chromium is
absent, so the suite works on a light install. In CI all of them are installed; a skip there
would mean a missing install step hiding behind a green run, so it fails instead.

A test module whose import fails only because a module of an optional extra is not installed
(`privlab.errors.EXTRA_OF_MODULE`, e.g. `from fastapi.testclient import TestClient`) is
skipped with the extra's install command, not reported as a collection error.
"""

from __future__ import annotations

import importlib.util
import os
import re

import pytest

from privlab.errors import EXTRA_OF_MODULE

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


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _missing_extra(report: pytest.CollectReport) -> str | None:
    """The skip reason when a module failed to import only for want of an optional extra."""
    found = re.findall(r"ModuleNotFoundError: No module named '([\w.]+)'", str(report.longrepr))
    tops = {name.split(".")[0] for name in found}
    if len(tops) != 1:
        return None
    top = tops.pop()
    if top not in EXTRA_OF_MODULE or _installed(top):
        return None
    extra = EXTRA_OF_MODULE[top]
    return f"needs the {extra} extra ({top} missing): pip install -e '.[{extra}]'"


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> object:
    outcome = yield
    report = outcome.get_result()
    if report.failed and isinstance(collector, pytest.Module):
        reason = _missing_extra(report)
        if reason is not None:
            report.outcome = "skipped"
            report.longrepr = (str(collector.path), 0, f"Skipped: {reason}")
    if NO_SKIP and report.skipped:
        _as_failure(report)
