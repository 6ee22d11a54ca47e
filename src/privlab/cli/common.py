"""Shared CLI helpers: JSON/human output, option parsing, progress bars."""

from __future__ import annotations

import contextlib
import json
import math
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np
from rich.console import Console

from privlab.core import delta_policy
from privlab.core.delta_policy import MAX_DELTA  # noqa: F401  (re-exported for commands)
from privlab.errors import InvalidInputError, MissingExtraError

console = Console()
err_console = Console(stderr=True)


def _default(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    if hasattr(obj, "to_dict"):
        return obj.to_dict()
    if hasattr(obj, "isoformat"):
        return obj.isoformat()
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def _finite(obj: Any) -> Any:
    """Replace NaN/inf by None so the output is strict JSON."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def to_json(payload: Any) -> str:
    return json.dumps(_finite(json.loads(json.dumps(payload, default=_default))), indent=2)


def emit_json(payload: Any) -> None:
    """Print one JSON document on stdout (nothing else goes to stdout in --json mode)."""
    sys.stdout.write(to_json(payload) + "\n")
    sys.stdout.flush()


def parse_range(text: str | None, field: str) -> tuple[float, float] | None:
    """Parse a numeric range `LO:HI` (the one spelling, docs/cli.md) into two floats, or None.

    A colon, not a comma, so a range never clashes with a comma list (`COL=LO:HI,COL=LO:HI`)
    and a negative bound reads plainly (`-5:5`). The old `LO,HI` is still accepted with one
    `warning:` line naming the new spelling, so existing scripts keep working."""
    if text is None:
        return None
    raw = text.strip()
    if ":" not in raw and raw.count(",") == 1:
        lo, hi = _two_numbers(raw.split(","), text, field)
        warn(f"{field} LO,HI is deprecated: use {field} LO:HI (here {field} {lo:g}:{hi:g})")
        return lo, hi
    return _two_numbers(raw.split(":"), text, field)


def _two_numbers(parts: list[str], text: str, field: str) -> tuple[float, float]:
    if len(parts) == 2:
        try:
            return float(parts[0].strip()), float(parts[1].strip())
        except ValueError:
            pass
    raise InvalidInputError(f"{field} must be a range LO:HI of two numbers (e.g. 0:100), got "
                            f"{text!r}")


def parse_column_ranges(text: str | None, field: str) -> dict[str, tuple[float, float]]:
    """Per-column ranges `COL=LO:HI[,COL=LO:HI]` (each range in the one `LO:HI` spelling)."""
    if not text:
        return {}
    out: dict[str, tuple[float, float]] = {}
    for part in text.split(","):
        name, sep, rng = part.partition("=")
        name = name.strip()
        if not (sep and name and ":" in rng):
            raise InvalidInputError(f"{field} must look like COL=LO:HI[,COL=LO:HI], got "
                                    f"{part!r}")
        if name in out:
            raise InvalidInputError(f"{field} names column {name!r} twice")
        out[name] = _two_numbers(rng.split(":"), part, field)
    return out


def parse_list(text: str | None, field: str) -> list[str] | None:
    """Parse 'A,B,C' into a list of stripped names, or None."""
    if text is None:
        return None
    items = [p.strip() for p in text.split(",") if p.strip()]
    if not items:
        raise InvalidInputError(f"{field} must be a comma-separated list, got {text!r}")
    return items


def parse_floats(text: str | None, field: str) -> list[float] | None:
    items = parse_list(text, field)
    if items is None:
        return None
    try:
        return [float(x) for x in items]
    except ValueError:
        raise InvalidInputError(f"{field} must be comma-separated numbers, got {text!r}") from None


#: Above this epsilon a guarantee protects little: e^8 ~ 3000, so an attacker's odds about any
#: one person may grow 3000-fold. Commands still run, with a one-line warning.
WEAK_EPSILON = 8.0


def warn(message: str) -> None:
    """One warning line on stderr (stdout stays clean for --json)."""
    err_console.print(f"warning: {message}", markup=False, highlight=False, soft_wrap=True)


@contextlib.contextmanager
def one_line_warnings() -> Iterator[None]:
    """Python warnings raised while a command runs (ours or a library's) print as one clean
    `warning: ...` line on stderr instead of Python's `file:line: UserWarning:` plus source."""
    import warnings

    previous = warnings.showwarning

    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int,
             file: Any = None, line: str | None = None) -> None:
        warn(" ".join(str(message).split()))

    warnings.showwarning = show
    try:
        yield
    finally:
        warnings.showwarning = previous


def exclude_columns(exclude: str | None, drop: str | None) -> list[str]:
    """`--exclude A,B`, the one spelling of "columns to leave out" (docs/cli.md); `--drop` is
    its hidden deprecated alias, still accepted with one warning line."""
    if exclude is not None and drop is not None:
        raise InvalidInputError("--drop is the old spelling of --exclude: pass only --exclude")
    if drop is not None:
        warn("--drop is deprecated: use --exclude (same meaning)")
        return parse_list(drop, "--drop") or []
    return parse_list(exclude, "--exclude") or []


def check_column_options(frame: Any, source: str,
                         options: dict[str, str | list[str] | None]) -> None:
    """Every option that names columns names columns of DATA: one line naming the option and
    the column (exit 2), before any privacy-relevant work. It says only that the name is not
    a column of `source` (the header is the curator's own), nothing about the rows."""
    have = set(map(str, frame.columns))
    for option, names in options.items():
        for name in [names] if isinstance(names, str) else names or []:
            if str(name) not in have:
                raise InvalidInputError(f"{option} {name!r} is not a column of {source}")


def print_baseline(base: dict[str, Any] | None, *, subject: str, advice: str,
                   digits: int = 3, noisy: bool = False) -> None:
    """A model's majority-class baseline (`privlab.learn.baseline`: train and test accuracy of
    always predicting the majority class) on the console, and the verdict when `subject` did
    not beat it. `noisy`: the baseline comes from noisy counts, and says so."""
    if not base:
        return
    from rich.markup import escape

    console.print(f"  {'noisy ' if noisy else ''}majority-class baseline: test accuracy "
                  f"{base['test_accuracy']:.{digits}f} (train "
                  f"{base['train_accuracy']:.{digits}f}) by always predicting "
                  f"{escape(repr(base['majority_class']))}", highlight=False)
    if not base["better_than_baseline"]:
        console.print(f"  [bold yellow]{subject} is {escape(base['verdict'])}[/bold yellow]: "
                      f"{advice}")
    elif base.get("difference_interval_95") is not None:
        # a DP comparison: "better" is said with the noise interval that supports it
        console.print(f"  {subject} is {escape(base['verdict'])}", highlight=False)


def warn_weak_epsilon(epsilon: float, field: str = "--epsilon") -> bool:
    """Warn (once, one line) when epsilon is above WEAK_EPSILON; True when it warned."""
    if epsilon > WEAK_EPSILON:
        warn(f"{field} {epsilon:g} is weak (above {WEAK_EPSILON:g}): the guarantee lets an "
             f"attacker's odds about a person grow up to e^{epsilon:g}-fold; prefer "
             f"{WEAK_EPSILON:g} or less")
        return True
    return False


def check_delta_strength(delta: float, allow_weak: bool, *, public_size: int | None,
                         size_hint: str = "--public-size N", field: str = "--delta",
                         require_size: bool = True) -> None:
    """`privlab.core.delta_policy.check_delta_strength`, warning on stderr."""
    delta_policy.check_delta_strength(delta, allow_weak, public_size=public_size,
                                      size_hint=size_hint, field=field,
                                      require_size=require_size, warn=warn)


def check_delta_policy(delta: float | None, allow_weak: bool, schema: Any = None, *,
                       public_size: int | None = None, field: str = "--delta") -> None:
    """`privlab.core.delta_policy.check_delta_policy`, warning on stderr: before any row is
    read, against a public size only (`public_size`, else the declared schema's)."""
    if public_size is None and schema is not None:
        from privlab.schema.release import public_size_of

        public_size = public_size_of(schema, None)
    delta_policy.check_delta_policy(delta, allow_weak, public_size=public_size, field=field,
                                    warn=warn)


#: The one help text of --allow-weak (every command that takes --delta offers it).
ALLOW_WEAK_HELP = ("Accept a delta above 1e-3 or not below 1/(public size) with a warning "
                   "(refused otherwise, exit 4).")


def require_extra(modules: tuple[str, ...], extra: str, what: str) -> None:
    """A one-line error with the install command when an optional extra is missing (exit 5)."""
    import importlib.util

    def absent(name: str) -> bool:
        try:
            return importlib.util.find_spec(name) is None
        except (ImportError, ValueError):  # e.g. sys.modules[name] is None
            return True

    missing = [m for m in modules if absent(m)]
    if missing:
        raise MissingExtraError(
            f"{what} needs the [{extra}] extra (missing: {', '.join(missing)}); install it "
            f"with: pip install 'privlab[{extra}]'")


