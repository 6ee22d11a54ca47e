"""The retired `--domain` JSON declaration, read only to convert it into the one declaration
format, the schema (`privlab schema from-domain FILE.json`), and to point `--domain` users
there. Nothing here feeds a synthesizer directly: synthesizers take a `Schema`.

The old format: {"name": ..., "columns": {col: {"type", "categories", "other", "bounds",
"bins", "edges", "integer", "scale", "missing", "point_masses"}}, "drop": [...]}; a column
whose categories / bounds were left unset had them estimated under DP. A schema column must
declare them (they are public facts), so such a column is refused by the conversion, naming
it: declare public values for it, and pass `--estimate-domain COL` to synth to keep estimating
it under DP as before (its declared values are then not used).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from privlab.errors import InvalidInputError
from privlab.schema.model import Schema, parse_schema
from privlab.synth.domain import (
    MAX_BINS,
    MAX_CATEGORIES,
    ColumnDeclaration,
    DomainDeclaration,
)

#: The retired built-in declarations and what replaces each.
RETIRED_BUILTINS = {"adult": "--schema adult",
                    "adult-types": "--schema adult --estimate-domain all"}

_COLUMN_KEYS = {"type", "categories", "other", "bounds", "bins", "edges", "integer", "scale",
                "missing", "point_masses"}


def parse_domain_json(spec: Any, name: str = "declared") -> DomainDeclaration:
    """Validate a retired domain mapping {"columns": {col: {...}}, "drop": [...]} (the checks
    the old `--domain` parser made), read only to convert it."""
    if not isinstance(spec, Mapping):
        raise InvalidInputError("domain must be a JSON object with a \"columns\" object")
    unknown = set(spec) - {"columns", "drop", "name", "source"}
    if unknown:
        raise InvalidInputError(f"domain has unknown keys {sorted(unknown)}; use \"columns\" "
                                "and \"drop\"")
    cols = spec.get("columns", {})
    if not isinstance(cols, Mapping):
        raise InvalidInputError("domain \"columns\" must map column names to objects")
    out = DomainDeclaration(name=str(spec.get("name", name)))
    drop = spec.get("drop", [])
    if not isinstance(drop, list) or not all(isinstance(d, str) for d in drop):
        raise InvalidInputError("domain \"drop\" must be a list of column names")
    out.drop = list(drop)
    for col, raw in cols.items():
        out.columns[str(col)] = _column_declaration(col, raw)
    return out


def _column_declaration(col: Any, raw: Any) -> ColumnDeclaration:
    """One column of a retired declaration, checked key by key as the old parser did."""
    if not isinstance(raw, Mapping):
        raise InvalidInputError(f"domain column {col!r} must be an object")
    bad = set(raw) - _COLUMN_KEYS
    if bad:
        raise InvalidInputError(f"domain column {col!r} has unknown keys {sorted(bad)}; "
                                f"allowed: {sorted(_COLUMN_KEYS)}")
    kind = raw.get("type")
    if kind not in (None, "categorical", "numeric"):
        raise InvalidInputError(f"domain column {col!r}: type must be \"categorical\" or "
                                f"\"numeric\", got {kind!r}")
    decl = ColumnDeclaration(kind=kind, missing=bool(raw.get("missing", True)))
    if "categories" in raw:
        cats = raw["categories"]
        if (not isinstance(cats, list) or not cats
                or len({str(c) for c in cats}) != len(cats)):
            raise InvalidInputError(f"domain column {col!r}: categories must be a non-empty "
                                    "list of distinct values")
        if len(cats) > MAX_CATEGORIES:
            raise InvalidInputError(f"domain column {col!r}: more than {MAX_CATEGORIES} "
                                    "categories; coarsen it or drop it")
        decl.categories = [str(c) for c in cats]
        decl.kind = decl.kind or "categorical"
    if "other" in raw:
        decl.other = bool(raw["other"])
    if "bounds" in raw:
        decl.bounds = _check_bounds(raw["bounds"], col)
        decl.kind = decl.kind or "numeric"
    if "edges" in raw:
        e = raw["edges"]
        try:
            arr = np.asarray(e, dtype=np.float64)
        except (TypeError, ValueError):
            arr = np.array([])
        if arr.ndim != 1 or arr.size < 2 or not np.all(np.isfinite(arr)) \
                or not np.all(np.diff(arr) > 0):
            raise InvalidInputError(f"domain column {col!r}: edges must be >= 2 increasing "
                                    "finite numbers")
        decl.edges = arr.tolist()
        decl.kind = decl.kind or "numeric"
    if "bins" in raw:
        b = raw["bins"]
        if isinstance(b, bool) or not isinstance(b, int) or not 1 <= b <= MAX_BINS:
            raise InvalidInputError(f"domain column {col!r}: bins must be an integer in "
                                    f"[1, {MAX_BINS}], got {b!r}")
        decl.bins = b
    if "integer" in raw:
        decl.integer = bool(raw["integer"])
    if "scale" in raw:
        if raw["scale"] not in ("linear", "log"):
            raise InvalidInputError(f"domain column {col!r}: scale must be \"linear\" or "
                                    "\"log\"")
        decl.scale = raw["scale"]
    if "point_masses" in raw:
        pts = raw["point_masses"]
        if not isinstance(pts, list) or not pts or any(
                isinstance(v, bool) or not isinstance(v, (int, float))
                or not math.isfinite(v) for v in pts) or len(set(pts)) != len(pts):
            raise InvalidInputError(f"domain column {col!r}: point_masses must be a "
                                    "non-empty list of distinct finite numbers, e.g. [0]")
        decl.points = tuple(sorted(float(v) for v in pts))
        decl.kind = decl.kind or "numeric"
    if decl.kind == "categorical" and (decl.bounds or decl.edges or decl.points):
        raise InvalidInputError(f"domain column {col!r}: a categorical column takes "
                                "categories, not bounds or edges")
    if decl.kind == "numeric" and decl.categories:
        raise InvalidInputError(f"domain column {col!r}: a numeric column takes bounds or "
                                "edges, not categories")
    return decl


def _check_bounds(value: Any, col: str) -> tuple[float, float]:
    from privlab.core.sensitivity import check_bounds

    return check_bounds(value, f"domain column {col!r}: bounds")


def read_domain_json(path: str | Path) -> tuple[dict[str, Any], DomainDeclaration]:
    """(raw mapping, validated declaration) of a retired `--domain` JSON file."""
    p = Path(path)
    if not p.is_file():
        raise InvalidInputError(f"{path}: no such file (a retired --domain JSON declaration)")
    try:
        spec = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidInputError(f"{path}: not readable JSON ({exc})") from None
    return spec, parse_domain_json(spec, name=p.stem)


def open_columns(decl: DomainDeclaration) -> list[str]:
    """Columns whose categories / bounds the declaration leaves to DP estimation."""
    return [name for name, d in decl.columns.items()
            if d.kind is not None and d.categories is None and d.bounds is None
            and d.edges is None]


def schema_from_domain(decl: DomainDeclaration, name: str) -> tuple[Schema, list[str]]:
    """The schema that declares what `decl` declares, and notes on what did not carry over
    (the old "drop" list: pass it as --exclude; "edges": become bounds and a bin count).

    Refused, naming the columns, when a column has no type or leaves its categories /
    bounds unset: a schema states them as public facts, and no value is invented here."""
    untyped = [c for c, d in decl.columns.items() if d.kind is None]
    if untyped:
        raise InvalidInputError(f"columns {untyped} have no \"type\" in {name}: declare it "
                                "before converting")
    open_ = open_columns(decl)
    if open_:
        raise InvalidInputError(
            f"{name} leaves the categories / bounds of {', '.join(open_)} unset, and a schema "
            "declares them: write public ones into the JSON and convert again (with "
            f"--estimate-domain {','.join(open_)} synth estimates them under DP as before and "
            "does not use the declared ones)")
    notes: list[str] = []
    cols: dict[str, Any] = {}
    for col, d in decl.columns.items():
        if d.kind == "categorical":
            entry: dict[str, Any] = {"type": "categorical", "categories": list(d.categories or [])}
            if d.other:
                entry["other"] = True
        else:
            integer = bool(d.integer)
            if d.edges is not None:
                lo, hi = d.edges[0], d.edges[-1] - (1 if integer else 0)
                bins = len(d.edges) - 1
                notes.append(f"column {col!r}: edges {d.edges} become bounds [{lo:g}, {hi:g}] "
                             f"with {bins} bins (a schema declares bins by count and scale)")
                entry = {"bounds": [lo, hi], "bins": d.bins or bins}
            else:
                lo, hi = d.bounds  # type: ignore[misc]
                entry = {"bounds": [lo, hi]}
                if d.bins is not None:
                    entry["bins"] = d.bins
            if integer:
                entry["bounds"] = [_whole(v, col) for v in entry["bounds"]]
            entry = {"type": "integer" if integer else "numeric", **entry}
            if d.scale != "linear":
                entry["scale"] = d.scale
            if d.points:
                entry["point_masses"] = [int(v) if integer else v for v in d.points]
        entry["missing"] = d.missing
        cols[col] = entry
    if decl.drop:
        notes.append(f"\"drop\" {decl.drop} is not part of a schema: pass --exclude "
                     f"{','.join(decl.drop)} to privlab synth")
    spec = {"name": name, "columns": cols}
    return parse_schema(spec, name=name, source=f"converted from {name}"), notes


def _whole(value: float, col: str) -> int:
    if value != math.floor(value):
        raise InvalidInputError(f"column {col!r} is integer but its bounds are not whole "
                                f"numbers ({value!r}); fix the JSON and convert again")
    return int(value)


def retired_domain_message(value: str) -> str:
    """The one-line refusal of `--domain VALUE`, pointing at what replaces it."""
    if value in RETIRED_BUILTINS:
        return (f"--domain {value} is retired: use {RETIRED_BUILTINS[value]} (the schema is the "
                "one declaration format)")
    hint = ""
    try:
        _, decl = read_domain_json(value)
        open_ = open_columns(decl)
        if open_:
            hint = (f" --estimate-domain {','.join(open_)} (from-domain first asks for public "
                    "categories / bounds of those columns; this option estimates them under DP "
                    "as before instead of using them)")
    except InvalidInputError:
        pass
    return (f"--domain is retired: convert {value} once: privlab schema from-domain {value} "
            f"-o schema.yaml, then --schema schema.yaml{hint}")
