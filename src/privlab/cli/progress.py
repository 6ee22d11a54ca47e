"""Progress of long CLI steps (training epochs, federated rounds, models fitted, assessment
stages) on stderr, so a command that runs for minutes visibly moves.

The library layers report through a plain callback `progress(stage, done, total)` (no Rich in
library code); `reporter(name, as_json)` turns it into:

- a live Rich bar (stage, done/total, elapsed time) when stderr is a terminal and --json is
  not set; it is transient, so nothing is left behind;
- plain one-line updates `progress: NAME: STAGE DONE/TOTAL` when `PRIVLAB_PROGRESS=1` (tests,
  logs, CI), with or without --json: no ANSI codes and no timings, rate-limited by a rule that
  depends only on the numbers (a line when the stage changes, when done crosses a tenth of
  total, and at total), so the text is a deterministic function of what the callers report;
- nothing when `PRIVLAB_PROGRESS=0`, with --json, or when stderr is not a terminal.

stdout is never touched: --json output stays byte-identical. What callers report must not
depend on the private rows beyond what the command prints anyway: epochs, rounds, models and
stages whose totals the options fix, never a row or batch count (docs/cli.md, "Progress").
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any, Literal

#: The environment variable that forces plain progress lines on (1) or all progress off (0).
ENV = "PRIVLAB_PROGRESS"

#: The callback every library layer takes: (stage, done, total).
ProgressFn = Callable[[str, int, int], None]

Mode = Literal["off", "bar", "plain"]

_ON = {"1", "on", "yes", "true", "plain"}
_OFF = {"0", "off", "no", "false"}


def progress_mode(as_json: bool) -> Mode:
    """off | bar | plain, from PRIVLAB_PROGRESS, --json and whether stderr is a terminal."""
    from privlab.cli.common import err_console

    value = os.environ.get(ENV, "").strip().lower()
    if value in _OFF:
        return "off"
    if value in _ON:
        return "plain"
    if as_json or not err_console.is_terminal:
        return "off"
    return "bar"


def _quiet(stage: str, done: int, total: int) -> None:
    """The callback when progress is off."""


class _PlainLines:
    """One stderr line per visible change; deterministic (no clock) so two runs that report
    the same steps print the same text."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.last: tuple[str, int] | None = None

    def __call__(self, stage: str, done: int, total: int) -> None:
        step = (10 * done) // total if total > 0 else 0  # 10 only at done == total
        key = (stage, step)
        if key == self.last:
            return
        self.last = key
        counts = f" {done}/{total}" if total > 0 else ""
        sys.stderr.write(f"progress: {self.name}: {stage}{counts}\n")
        sys.stderr.flush()


@contextlib.contextmanager
def reporter(name: str, as_json: bool) -> Iterator[ProgressFn]:
    """A `progress(stage, done, total)` callback for the duration of a command's long step."""
    mode = progress_mode(as_json)
    if mode == "off":
        yield _quiet
        return
    if mode == "plain":
        yield _PlainLines(name)
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    from privlab.cli.common import err_console

    columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
               MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=err_console, transient=True) as bar:
        task = bar.add_task(f"{name}: starting", total=None)

        def update(stage: str, done: int, total: int) -> None:
            bar.update(task, description=f"{name}: {stage}", completed=done,
                       total=total if total > 0 else None)

        yield update


def per_epoch(report: ProgressFn, stage: str) -> Callable[[int, int, Any], None]:
    """Adapt the learners' `progress(epoch, epochs, metrics)` to `report(stage, epoch, epochs)`
    (the metrics row is not shown: it is computed from the private rows)."""

    def epoch(done: int, total: int, row: Any = None) -> None:
        report(stage, done, total)

    return epoch
