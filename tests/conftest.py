"""Suite-wide: where every test must run (CI sets PRIVLAB_TEST_NO_SKIP=1), a skip is a failure.

Tests skip, with their reason, when an optional extra (torch, flwr), PostgreSQL or Chromium is
absent, so the suite works on a light install. In CI all of them are installed; a skip there
would mean a missing install step hiding behind a green run, so it fails instead.

A test (or test module) that fails only because a module of an optional extra is not installed
(`privlab.errors.EXTRA_OF_MODULE`: a ModuleNotFoundError for sqlglot, fastapi, torch, ...) is
reported as skipped with the extra's install command; with the module installed, or under
PRIVLAB_TEST_NO_SKIP=1, it stays a failure.

Databases are closed deterministically, never by the garbage collector
(`privlab.utils.closing`). So the suite runs with the collector off (PRIVLAB_TEST_GC=1 turns
it back on): a connection left open stays open, as it would in a long-lived process, and a
second open of its file fails in the test that made the leak visible. At the end of each
module the collector runs once; an object that holds a database and was dropped without
`close()` warns then, and that warning fails the module's last test (as the warning fails
the test that dropped it, through pyproject's `filterwarnings`, when it is dropped at once).
What privlab code opens must be closed by privlab code. What a test's own code builds
(`Gateway(cfg)` in a test body or fixture) is the test's: closed, without a warning, when
the test drops it (a young reference cycle is collected after the test that made it);
fixtures `yield` and close what they open.
"""

from __future__ import annotations

import gc
import os
import re
import sys
import warnings
import weakref
from collections.abc import Callable, Generator
from importlib.machinery import PathFinder
from pathlib import Path
from typing import Any

import pytest

import privlab
from privlab.errors import EXTRA_OF_MODULE
from privlab.utils.closing import Closing

NO_SKIP = os.environ.get("PRIVLAB_TEST_NO_SKIP") == "1"
GC_ON = os.environ.get("PRIVLAB_TEST_GC") == "1"


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


# -- databases closed deterministically ---------------------------------------------------

_opened_in_body: list[weakref.ref[Closing]] = []
_in_body = False
_hold = Closing._hold
_TESTS = str(Path(__file__).resolve().parent)
_PRIVLAB = str(Path(privlab.__file__).resolve().parent)


def _made_by_a_test(frame: Any) -> bool:
    """Whether the test's own code built this holder (`Gateway(cfg)` in a test or fixture:
    the first caller outside privlab is a test), rather than privlab code reached through
    another library (`main(["budget", ...])` through Typer, a route through Starlette),
    which must close it itself."""
    while frame is not None and (frame.f_code.co_filename.startswith(_PRIVLAB)
                                 or frame.f_code.co_filename == __file__):
        frame = frame.f_back
    return frame is not None and frame.f_code.co_filename.startswith(_TESTS)


def _quietly(release: Callable[[], None], what: str) -> None:
    release()  # `Closing.close` reads `release` from these arguments, as from `_dropped_open`


def _tracked_hold(self: Closing, release: Callable[[], None], what: str) -> None:
    _hold(self, release, what)
    if _made_by_a_test(sys._getframe(1)):
        # the test's own: closed (quietly) when the test drops it, or after its teardown
        self._finalizer.detach()  # type: ignore[union-attr]
        self._finalizer = weakref.finalize(self, _quietly, release, what)
        self._finalizer.atexit = False
        if _in_body:
            _opened_in_body.append(weakref.ref(self))


_tracked_hold.__wrapped__ = _hold  # type: ignore[attr-defined]  # tests of the warning itself
Closing._hold = _tracked_hold  # type: ignore[method-assign]


def pytest_configure(config: pytest.Config) -> None:
    if not GC_ON:
        gc.disable()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, Any, Any]:
    global _in_body
    _in_body = True
    try:
        return (yield)
    finally:
        _in_body = False


def _dropped_open() -> list[str]:
    """Run the collector; the "dropped without close()" warnings it sets off."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gc.collect()
    return sorted({str(w.message) for w in caught if issubclass(w.category, ResourceWarning)
                   and str(w.message).startswith("privlab:")})


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item,
                            nextitem: pytest.Item | None) -> Generator[None, Any, Any]:
    result = yield
    # what the test built and dropped in a reference cycle (a traceback that holds its frame)
    # is collected now, so its file is not still open in the next test; what a fixture or a
    # module's cache still holds stays open (their owners close it)
    if any((obj := ref()) is not None and not obj.closed for ref in _opened_in_body):
        del obj
        gc.collect(1)  # with the collector off, everything this module made is young
    _opened_in_body.clear()
    if nextitem is None or nextitem.path != item.path:
        leaks = _dropped_open()
        if leaks:
            pytest.fail(f"{item.path.name}: {len(leaks)} object(s) holding a database were "
                        f"dropped without close(): {'; '.join(leaks)}", pytrace=False)
    return result
