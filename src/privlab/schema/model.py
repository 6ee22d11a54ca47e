"""The declared public schema: what a data publisher states about a table before any release.

Why it exists: a column's kind, its categories and its bounds decide the shape of everything
privlab publishes (a synthetic table's columns and dtypes, a model's feature count, a SQL
plan). If they were read from the private rows, one person's row could change the published
shape (an age of 40.5 turning an integer column into a float one, a single Holand-Netherlands
row adding a one-hot feature) outside any noise. So they come from a `Schema` that the
publisher declares (YAML or JSON) and treats as public. `privlab schema draft` can suggest one
from data, but a draft is marked `draft: true` and is refused until a person reviews it.

Column types:
- categorical: `categories` (strings); `other: true` adds an explicit `<other>` bucket for
  values outside the list; otherwise such values are invalid.
- integer / numeric: `bounds: [LO, HI]` (inclusive); values outside are clamped. Optional
  `scale: log` and `bins` are public binning hints for synthesizers, and `point_masses:
  [V, ...]` declares values that carry a mass of their own (e.g. 0 hours of overtime, 0
  affairs): synthesizers give each its own code so the share of exact zeros survives instead
  of being smeared uniformly over the bin that holds it.
- datetime: `bounds: [ISO, ISO]`, and the `format` its values are written in: "ISO8601" (the
  default: any ISO 8601 date or date-time, `T` or a space between them) or a strptime
  pattern such as "%d/%m/%Y %H:%M". A value with an offset (`+02:00`) or `Z` is converted
  to UTC; one without is taken as written (naive times are UTC). A value that does not fit
  the format is invalid (`on_invalid`), whatever the other rows hold.
- identifier: a privacy-unit key or record id; its values are never public and never released.
- text: free text that no command releases.
Every column says whether `missing` values are allowed (default true), and may declare a
public `default`: the value `--on-invalid coerce` puts in a row that has no place (a missing
value where none is allowed) when the row count must stay fixed (replace-one neighbouring).
Without it: the first declared category, or the lower bound.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from privlab.errors import InvalidInputError

ColumnType = Literal["categorical", "integer", "numeric", "datetime", "identifier", "text"]
COLUMN_TYPES: tuple[str, ...] = ("categorical", "integer", "numeric", "datetime", "identifier",
                                 "text")
#: The explicit bucket for categories outside a declared list (when `other: true`).
OTHER = "<other>"
MAX_CATEGORIES = 5000
_COLUMN_KEYS = {"type", "categories", "other", "bounds", "missing", "scale", "bins",
                "point_masses", "description", "default", "format"}
#: A datetime column's default `format`: ISO 8601, each value parsed on its own.
ISO8601 = "ISO8601"
#: The fill of an identifier / text column without a declared default.
MISSING_TEXT = "<missing>"
#: The most point masses one column may declare (each is a code of its own).
MAX_POINT_MASSES = 64
_SCHEMA_KEYS = {"name", "description", "privacy_unit", "max_rows_per_unit", "public_size",
                "columns", "draft", "source"}


@dataclass(frozen=True)
class ColumnSchema:
    """One declared column. Everything here is public by declaration."""

    name: str
    type: ColumnType
    categories: tuple[str, ...] = ()
    other: bool = False
    bounds: tuple[Any, Any] | None = None
    missing: bool = True
    scale: Literal["linear", "log"] = "linear"
    bins: int | None = None
    description: str = ""
    default: Any = None

    @property
    def fill_value(self) -> Any:
        """What coerce puts in a row with no place when n must stay fixed (public: the
        declared `default`, else the first category, else the lower bound)."""
        if self.default is not None:
            return self.default
        if self.type == "categorical":
            return self.categories[0]
        if self.bounds is not None:
            return self.bounds[0]
        return MISSING_TEXT
    point_masses: tuple[float, ...] = ()
    format: str = ISO8601

    @property
    def is_numeric(self) -> bool:
        return self.type in ("integer", "numeric")

    @property
    def is_released(self) -> bool:
        """Identifier and text columns never appear in any output."""
        return self.type not in ("identifier", "text")

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type}
        if self.type == "categorical":
            out["categories"] = list(self.categories)
            if self.other:
                out["other"] = True
        if self.bounds is not None:
            lo, hi = self.bounds
            if self.type == "datetime":
                out["bounds"] = [pd.Timestamp(lo).isoformat(), pd.Timestamp(hi).isoformat()]
            elif self.type == "integer":
                out["bounds"] = [int(lo), int(hi)]
            else:
                out["bounds"] = [float(lo), float(hi)]
        if self.scale != "linear":
            out["scale"] = self.scale
        if self.bins is not None:
            out["bins"] = self.bins
        if self.point_masses:
            out["point_masses"] = [int(v) if self.type == "integer" else float(v)
                                   for v in self.point_masses]
        if self.type == "datetime" and self.format != ISO8601:
            out["format"] = self.format
        out["missing"] = self.missing
        if self.default is not None:
            out["default"] = (pd.Timestamp(self.default).isoformat() if self.type == "datetime"
                              else self.default)
        if self.description:
            out["description"] = self.description
        return out


@dataclass(frozen=True)
class Schema:
    """A declared public schema: ordered columns plus the privacy unit.

    `privacy_unit` is "row" (each row is a different person) or the name of an identifier
    column (all rows with the same value are one person). `public_size` is an optional
    publicly known row count (e.g. a census total); it is never taken from the data.
    """

    columns: tuple[ColumnSchema, ...]
    name: str = "declared"
    description: str = ""
    privacy_unit: str = "row"
    max_rows_per_unit: int | None = None
    public_size: int | None = None
    draft: bool = False
    source: str = ""

    def __post_init__(self) -> None:
        names = [c.name for c in self.columns]
        if len(set(names)) != len(names):
            raise InvalidInputError(f"schema {self.name!r} declares a column twice")
        if not names:
            raise InvalidInputError(f"schema {self.name!r} declares no columns")
        if self.privacy_unit != "row":
            col = self.get(self.privacy_unit)
            if col is None or col.type != "identifier":
                raise InvalidInputError(
                    f"schema {self.name!r}: privacy_unit {self.privacy_unit!r} must be \"row\" "
                    "or the name of a column of type identifier")

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    def get(self, name: str) -> ColumnSchema | None:
        for c in self.columns:
            if c.name == name:
                return c
        return None

    def column(self, name: str) -> ColumnSchema:
        found = self.get(name)
        if found is None:
            raise InvalidInputError(f"column {name!r} is not in schema {self.name!r}; declare it "
                                    f"(columns: {', '.join(self.names)})")
        return found

    def released_columns(self) -> list[ColumnSchema]:
        return [c for c in self.columns if c.is_released]

    def select(self, names: list[str]) -> Schema:
        """The same schema restricted to `names` (in that order), with the same privacy unit:
        a person column not among `names` is kept (last) with its declaration, because
        dropping it would silently turn a per-person guarantee into a per-row one."""
        keep = list(names)
        if self.privacy_unit != "row" and self.privacy_unit not in keep:
            keep.append(self.privacy_unit)
        cols = tuple(self.column(n) for n in keep)
        return Schema(cols, name=self.name, description=self.description,
                      privacy_unit=self.privacy_unit,
                      max_rows_per_unit=self.max_rows_per_unit, public_size=self.public_size,
                      draft=self.draft, source=self.source)

    def allowing_missing(self) -> Schema:
        """The same schema with every column allowed to be missing: a weaker declaration
        (one more code per column in a synthesizer), the one the retired `privlab synth
        --domain adult` made; figures measured with it are reproduced with this schema."""
        from dataclasses import replace

        return replace(self, columns=tuple(replace(c, missing=True) for c in self.columns))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name}
        if self.draft:
            out["draft"] = True
        if self.description:
            out["description"] = self.description
        out["privacy_unit"] = self.privacy_unit
        if self.max_rows_per_unit is not None:
            out["max_rows_per_unit"] = self.max_rows_per_unit
        if self.public_size is not None:
            out["public_size"] = self.public_size
        out["columns"] = {c.name: c.to_dict() for c in self.columns}
        return out

    def to_yaml(self) -> str:
        import yaml

        return yaml.safe_dump(self.to_dict(), sort_keys=False, allow_unicode=True, width=100)

    def fingerprint(self) -> str:
        """A short hash of the declaration, printed with releases (public: it hashes only
        the declaration)."""
        import hashlib

        text = json.dumps(self.to_dict(), sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


# --------------------------------------------------------------------------------------------
# Parsing
# --------------------------------------------------------------------------------------------


def _where(schema_name: str, col: str) -> str:
    return f"schema {schema_name!r}, column {col!r}"


def _parse_bounds(raw: Any, kind: str, where: str) -> tuple[Any, Any]:
    if not isinstance(raw, (list, tuple)) or len(raw) != 2:
        raise InvalidInputError(f"{where}: bounds must be two values [LO, HI], got {raw!r}")
    if kind == "datetime":
        try:
            lo, hi = (pd.Timestamp(v) for v in raw)
        except (TypeError, ValueError):
            raise InvalidInputError(f"{where}: datetime bounds must be two ISO dates, got "
                                    f"{raw!r}") from None
        if pd.isna(lo) or pd.isna(hi) or not lo < hi:
            raise InvalidInputError(f"{where}: datetime bounds need LO < HI, got {raw!r}")
        return lo.tz_localize(None) if lo.tzinfo else lo, hi.tz_localize(None) if hi.tzinfo \
            else hi
    if any(isinstance(v, bool) for v in raw):
        raise InvalidInputError(f"{where}: bounds must be numbers, got {raw!r}")
    try:
        lo, hi = float(raw[0]), float(raw[1])
    except (TypeError, ValueError):
        raise InvalidInputError(f"{where}: bounds must be two numbers [LO, HI], got "
                                f"{raw!r}") from None
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise InvalidInputError(f"{where}: bounds must be finite with LO < HI, got {raw!r}")
    if kind == "integer":
        if lo != math.floor(lo) or hi != math.floor(hi):
            raise InvalidInputError(f"{where}: an integer column needs whole-number bounds, "
                                    f"got {raw!r}")
        return int(lo), int(hi)
    return lo, hi


def parse_column(name: str, raw: Any, schema_name: str = "declared") -> ColumnSchema:
    where = _where(schema_name, name)
    if not isinstance(raw, Mapping):
        raise InvalidInputError(f"{where}: must be a mapping with a \"type\"")
    bad = set(raw) - _COLUMN_KEYS
    if bad:
        raise InvalidInputError(f"{where}: unknown keys {sorted(bad)}; allowed: "
                                f"{sorted(_COLUMN_KEYS)}")
    kind = raw.get("type")
    if kind not in COLUMN_TYPES:
        raise InvalidInputError(f"{where}: type must be one of {', '.join(COLUMN_TYPES)}, got "
                                f"{kind!r}")
    missing = raw.get("missing", True)
    if not isinstance(missing, bool):
        raise InvalidInputError(f"{where}: missing must be true or false, got {missing!r}")
    other = raw.get("other", False)
    if not isinstance(other, bool):
        raise InvalidInputError(f"{where}: other must be true or false, got {other!r}")
    categories: tuple[str, ...] = ()
    bounds = None
    if kind == "categorical":
        cats = raw.get("categories")
        if not isinstance(cats, list) or not cats:
            raise InvalidInputError(f"{where}: a categorical column needs a non-empty "
                                    "\"categories\" list")
        categories = tuple(str(c) for c in cats)
        if len(set(categories)) != len(categories):
            raise InvalidInputError(f"{where}: categories must be distinct")
        if OTHER in categories:
            raise InvalidInputError(f"{where}: {OTHER!r} is reserved; use \"other\": true")
        if len(categories) > MAX_CATEGORIES:
            raise InvalidInputError(f"{where}: more than {MAX_CATEGORIES} categories; coarsen "
                                    "it or declare it identifier")
        if "bounds" in raw:
            raise InvalidInputError(f"{where}: a categorical column takes categories, not "
                                    "bounds")
    else:
        if "categories" in raw or other:
            raise InvalidInputError(f"{where}: only categorical columns take categories/other")
        if kind in ("integer", "numeric", "datetime"):
            if "bounds" not in raw:
                raise InvalidInputError(f"{where}: a {kind} column needs public \"bounds\": "
                                        "[LO, HI]")
            bounds = _parse_bounds(raw["bounds"], kind, where)
        elif "bounds" in raw:
            raise InvalidInputError(f"{where}: a {kind} column takes no bounds")
    scale = raw.get("scale", "linear")
    if scale not in ("linear", "log"):
        raise InvalidInputError(f"{where}: scale must be \"linear\" or \"log\", got {scale!r}")
    if scale == "log" and (bounds is None or kind == "datetime" or bounds[0] < 0):
        raise InvalidInputError(f"{where}: scale \"log\" needs numeric bounds with LO >= 0")
    bins = raw.get("bins")
    if bins is not None and (isinstance(bins, bool) or not isinstance(bins, int)
                             or not 1 <= bins <= 1024):
        raise InvalidInputError(f"{where}: bins must be an integer in [1, 1024], got {bins!r}")
    points = _parse_point_masses(raw.get("point_masses"), kind, bounds, where)
    fmt = _parse_format(raw.get("format"), kind, where)
    default = _parse_default(raw.get("default"), kind, categories, other, bounds, where)
    return ColumnSchema(name=str(name), type=kind, categories=categories, other=other,
                        bounds=bounds, missing=missing, scale=scale, bins=bins,
                        description=str(raw.get("description", "")), default=default,
                        point_masses=points, format=fmt)


def _parse_format(raw: Any, kind: str, where: str) -> str:
    """A datetime column's `format`: "ISO8601" or a strptime pattern (with a % directive)."""
    if raw is None:
        return ISO8601
    if kind != "datetime":
        raise InvalidInputError(f"{where}: only datetime columns take a format")
    if not isinstance(raw, str) or not (raw == ISO8601 or "%" in raw):
        raise InvalidInputError(f"{where}: format must be \"ISO8601\" or a strptime pattern "
                                f"such as \"%d/%m/%Y\", got {raw!r}")
    return raw


def _parse_default(raw: Any, kind: str, categories: tuple[str, ...], other: bool,
                   bounds: tuple[Any, Any] | None, where: str) -> Any:
    """A declared default must itself fit the column (a category, or inside the bounds)."""
    if raw is None:
        return None
    if kind == "categorical":
        value = str(raw)
        if value not in categories and not (other and value == OTHER):
            raise InvalidInputError(f"{where}: default {raw!r} is not one of its categories")
        return value
    if kind == "datetime":
        try:
            value = pd.Timestamp(raw)
        except (TypeError, ValueError):
            value = pd.NaT
        if pd.isna(value) or not bounds[0] <= value <= bounds[1]:  # type: ignore[index]
            raise InvalidInputError(f"{where}: default {raw!r} must be a date inside its bounds")
        return value
    if kind in ("integer", "numeric"):
        if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not (
                bounds[0] <= raw <= bounds[1]) or (kind == "integer" and raw != int(raw)):  # type: ignore[index]
            raise InvalidInputError(f"{where}: default {raw!r} must be a number inside its "
                                    f"bounds{' (a whole number)' if kind == 'integer' else ''}")
        return int(raw) if kind == "integer" else float(raw)
    return str(raw)


def _parse_point_masses(raw: Any, kind: str, bounds: tuple[Any, Any] | None, where: str
                        ) -> tuple[float, ...]:
    """`point_masses: [V, ...]`: distinct numbers inside the bounds of a numeric column."""
    if raw is None:
        return ()
    if kind not in ("integer", "numeric"):
        raise InvalidInputError(f"{where}: point_masses apply to integer and numeric columns "
                                f"only, not to a {kind} column")
    if not isinstance(raw, list) or not raw or any(
            isinstance(v, bool) or not isinstance(v, (int, float)) for v in raw):
        raise InvalidInputError(f"{where}: point_masses must be a non-empty list of numbers, "
                                f"e.g. [0], got {raw!r}")
    vals = [float(v) for v in raw]
    if len(set(vals)) != len(vals) or len(vals) > MAX_POINT_MASSES:
        raise InvalidInputError(f"{where}: point_masses must be distinct (at most "
                                f"{MAX_POINT_MASSES}), got {raw!r}")
    lo, hi = bounds  # type: ignore[misc]
    bad = [v for v in vals if not (math.isfinite(v) and lo <= v <= hi)]
    if bad:
        raise InvalidInputError(f"{where}: point_masses {bad} lie outside the bounds "
                                f"[{lo:g}, {hi:g}]")
    if kind == "integer" and any(v != math.floor(v) for v in vals):
        raise InvalidInputError(f"{where}: an integer column's point_masses must be whole "
                                f"numbers, got {raw!r}")
    return tuple(sorted(vals))


def parse_schema(spec: Any, name: str = "declared", *, allow_draft: bool = False,
                 source: str = "") -> Schema:
    """Validate a schema mapping. A draft (`draft: true`) is refused unless `allow_draft`."""
    if not isinstance(spec, Mapping):
        raise InvalidInputError(f"schema {name!r} must be a mapping with \"columns\"")
    bad = set(spec) - _SCHEMA_KEYS
    if bad:
        raise InvalidInputError(f"schema {name!r}: unknown keys {sorted(bad)}; allowed: "
                                f"{sorted(_SCHEMA_KEYS)}")
    name = str(spec.get("name", name))
    draft = spec.get("draft", False)
    if draft is not False and not allow_draft:
        raise InvalidInputError(
            f"schema {name!r} is a draft drawn from the data (draft: true): review every "
            "category and bound, treat them as public, then delete the line 'draft: true'")
    cols = spec.get("columns")
    if not isinstance(cols, Mapping) or not cols:
        raise InvalidInputError(f"schema {name!r}: \"columns\" must map column names to "
                                "declarations")
    columns = tuple(parse_column(str(k), v, name) for k, v in cols.items())
    unit = spec.get("privacy_unit", "row")
    if not isinstance(unit, str):
        raise InvalidInputError(f"schema {name!r}: privacy_unit must be \"row\" or a column "
                                "name")
    out: dict[str, int | None] = {}
    for key in ("max_rows_per_unit", "public_size"):
        v = spec.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            raise InvalidInputError(f"schema {name!r}: {key} must be a positive integer, got "
                                    f"{v!r}")
        out[key] = v
    return Schema(columns, name=name, description=str(spec.get("description", "")),
                  privacy_unit=unit, max_rows_per_unit=out["max_rows_per_unit"],
                  public_size=out["public_size"], draft=bool(draft),
                  source=source or str(spec.get("source", "")))


def read_schema_file(path: str | Path, *, allow_draft: bool = False) -> Schema:
    """A schema from a YAML or JSON file (named after the file's stem); bundled names and the
    other forms a user may give are resolved by `privlab.schema.load.load_schema`."""
    text = str(path)  # as the user wrote it, in every message
    path = Path(text)
    try:
        raw = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInputError(f"--schema {text}: cannot read it ({exc})") from None
    if path.suffix.lower() == ".json":
        try:
            spec = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise InvalidInputError(f"--schema {text}: not valid JSON ({exc})") from None
    else:
        import yaml

        try:
            spec = yaml.safe_load(raw)
        except yaml.YAMLError as exc:
            line = str(exc).splitlines()[0] if str(exc) else "parse error"
            raise InvalidInputError(f"--schema {text}: not valid YAML ({line})") from None
    return parse_schema(spec, name=path.stem, allow_draft=allow_draft, source=path.name)


def schema_from_columns(name: str, columns: Mapping[str, Mapping[str, Any]],
                        **kwargs: Any) -> Schema:
    """Convenience for code and tests: `schema_from_columns("t", {"age": {...}})`."""
    spec = {"name": name, "columns": dict(columns)}
    spec.update(kwargs)
    return parse_schema(spec, name=name)


__all__ = ["COLUMN_TYPES", "ISO8601", "OTHER", "ColumnSchema", "Schema", "parse_column",
           "parse_schema", "read_schema_file", "schema_from_columns"]
