"""Shared CLI helpers: JSON/human output, option parsing, progress bars."""

from __future__ import annotations

import json
import math
import sys
from typing import Any

import numpy as np
from rich.console import Console

from privlab.errors import InvalidInputError

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


def parse_pair(text: str | None, field: str) -> tuple[float, float] | None:
    """Parse 'LO,HI' into two floats, or None."""
    if text is None:
        return None
    parts = [p.strip() for p in text.split(",")]
    if len(parts) != 2:
        raise InvalidInputError(f"{field} must be two numbers LO,HI, got {text!r}")
    try:
        return float(parts[0]), float(parts[1])
    except ValueError:
        raise InvalidInputError(f"{field} must be two numbers LO,HI, got {text!r}") from None


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
