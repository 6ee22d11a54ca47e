"""Suite-wide: where every test must run (CI sets PRIVLAB_TEST_NO_SKIP=1), a skip is a failure.

Tests skip, with their reason, when an optional extra (torch, flwr), PostgreSQL or Chromium is
absent, so the suite works on a light install. In CI all of them are installed; a skip there
would mean a missing install step hiding behind a green run, so it fails instead.

A test (or test module) that fails only because a module of an optional extra is not installed
(`privlab.errors.EXTRA_OF_MODULE`: a ModuleNotFoundError for sqlglot, fastapi, torch, ...) is
reported as skipped with the extra's install command; with the module installed, or under
PRIVLAB_TEST_NO_SKIP=1, it stays a failure.
"""

from __future__ import annotations

import os
import re
from importlib.machinery import PathFinder

import pytest

from privlab.errors import EXTRA_OF_MODULE

NO_SKIP = os.environ.get("PRIVLAB_TEST_NO_SKIP") == "1"


def _as_failure(report: pytest.BaseReport) -> None:
    reason = report.longrepr[-1] if isinstance(report.longrepr, tuple) else report.longrepr
    report.outcome = "failed"
    report.longrepr = (f"skipped where every test must run (PRIVLAB_TEST_NO_SKIP=1): {reason}; "
                       "install what the reason names")


def _extra_reason(module: str) -> str | None:
    """The skip reason when `module` belongs to an optional extra and is not installed.

    Looks on sys.path, not in sys.modules: a test that hides an installed module
    (`sys.modules[name] = None`) to check the missing-extra path must still fail normally.
    """
    top = module.split(".")[0]
    if top not in EXTRA_OF_MODULE or PathFinder.find_spec(top) is not None:
        return None
    extra = EXTRA_OF_MODULE[top]
    return f"needs the {extra} extra ({top} missing): pip install -e '.[{extra}]'"


def _reason_from(exc: BaseException | None) -> str | None:
    """`_extra_reason` of the ModuleNotFoundError behind an exception (or its causes)."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, ModuleNotFoundError) and exc.name:
            reason = _extra_reason(exc.name)
            if reason is not None:
                return reason
        exc = exc.__cause__ or exc.__context__
    return None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> object:
    outcome = yield
    report = outcome.get_result()
    if report.failed and call.excinfo is not None:
        reason = _reason_from(call.excinfo.value)
        if reason is not None:
            report.outcome = "skipped"
            report.longrepr = (str(item.path), item.location[1] or 0, f"Skipped: {reason}")
    if NO_SKIP and report.skipped and not hasattr(report, "wasxfail"):
        _as_failure(report)


def _missing_extra(report: pytest.CollectReport) -> str | None:
    """The skip reason when a test module failed to import only for want of an extra."""
    found = re.findall(r"ModuleNotFoundError: No module named '([\w.]+)'", str(report.longrepr))
    reasons = {_extra_reason(name) for name in found}
    return reasons.pop() if len(reasons) == 1 else None


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
