"""The declaration a synthesizer works from, read from the schema (`declaration_from_schema`,
never from the data), and the plan of each column: which kind, declared or to be estimated
under DP (`plan_columns`, `estimate_columns`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from privlab.errors import InvalidInputError
from privlab.schema.model import ColumnSchema, Schema
from privlab.synth.domain.spec import (
    Kind,
)


@dataclass
class ColumnDeclaration:
    """What the schema states about a column, as the synthesizer uses it (built only by
    `declaration_from_schema`); unset categories / bounds (the `estimate` columns) are
    estimated privately. A numeric column is integer only when `integer` is true."""

    kind: Kind | None = None
    categories: list[str] | None = None
    other: bool | None = None
    bounds: tuple[float, float] | None = None
    bins: int | None = None
    edges: list[float] | None = None
    integer: bool | None = None
    scale: Literal["linear", "log"] = "linear"
    missing: bool = True
    points: tuple[float, ...] = ()


@dataclass
class DomainDeclaration:
    """The synthesizer's internal view of a schema (not a declaration format of its own)."""

    columns: dict[str, ColumnDeclaration] = field(default_factory=dict)
    drop: list[str] = field(default_factory=list)
    name: str = "declared"


# --------------------------------------------------------------------------------------------
# Planning: which columns, which kind, what must be estimated
# --------------------------------------------------------------------------------------------


@dataclass
class ColumnPlan:
    name: str
    kind: Kind
    decl: ColumnDeclaration
    integer: bool

    @property
    def needs_bounds(self) -> bool:
        return self.kind == "numeric" and self.decl.bounds is None and self.decl.edges is None

    @property
    def needs_categories(self) -> bool:
        return self.kind == "categorical" and self.decl.categories is None


NO_SCHEMA = ("privlab synth reads column types from a declaration, never from the data: pass "
             "--schema NAME|FILE (draft one with `privlab schema draft DATA > schema.yaml` "
             "and review it)")


def plan_columns(columns: Sequence[str], decl: DomainDeclaration,
                 drop: Sequence[str] = ()) -> list[ColumnPlan]:
    """Columns to synthesize (in `columns` order), each with the kind its declaration states.

    `columns` are the input's column names. The kind of a column is never read from its
    values or dtype: a column the declaration does not type is refused, naming `privlab
    schema draft` (a type guessed from the dtype would let one row, e.g. an age of 40.5 or
    the text "unknown", change the published table's shape)."""
    names = [str(c) for c in columns]
    if len(set(names)) != len(names):
        raise InvalidInputError("the input has duplicate column names; rename them")
    dropping = list(dict.fromkeys(list(drop) + decl.drop))
    missing = [c for c in drop if c not in names]
    if missing:
        raise InvalidInputError(f"--exclude names columns that are not in the data: {missing}")
    absent = [c for c in decl.columns if c not in names and c not in dropping]
    if absent:
        raise InvalidInputError(f"the schema declares columns that are not in the data: "
                                f"{absent}")
    plans = []
    for name in names:
        if name in dropping:
            continue
        d = decl.columns.get(name)
        if d is None or d.kind is None:
            if decl.name == "none":
                raise InvalidInputError(NO_SCHEMA)
            raise InvalidInputError(f"column {name!r} is not declared in {decl.name}: "
                                    "declare it there or --exclude it")
        plans.append(ColumnPlan(name, d.kind, d, bool(d.integer) and d.kind == "numeric"))
    if not plans:
        raise InvalidInputError("no columns left to synthesize; drop fewer columns")
    return plans


ALL = "all"


def estimate_columns(schema: Schema, estimate: str | Sequence[str] | None,
                     drop: Sequence[str] = ()) -> tuple[str, ...]:
    """The columns whose categories / bounds are estimated under DP (`--estimate-domain`):
    None -> none, "all" -> every synthesized column, "A,B" or a list -> those, each a
    categorical, integer or numeric column of the schema that is not excluded."""
    if estimate is None:
        return ()
    synthesized = [c.name for c in schema.columns
                   if c.type in ("categorical", "integer", "numeric") and c.name not in drop]
    if isinstance(estimate, str):
        if estimate.strip() == ALL:
            return tuple(synthesized)
        names = [n.strip() for n in estimate.split(",") if n.strip()]
    else:
        names = [str(n) for n in estimate]
    if not names:
        raise InvalidInputError("--estimate-domain needs 'all' or column names A,B")
    bad = [n for n in names if n not in synthesized]
    if bad:
        raise InvalidInputError(
            f"--estimate-domain names {bad}: not categorical / integer / numeric columns of "
            f"schema {schema.name!r} that are synthesized (columns: {', '.join(synthesized)})")
    return tuple(dict.fromkeys(names))


def declaration_from_schema(schema: Schema, drop: Sequence[str] = (), *,
                            allow_unit: bool = False, estimate: Sequence[str] = ()
                            ) -> DomainDeclaration:
    """The synthesizer's declaration of a public `Schema`: categorical -> categories (+
    `<other>` if declared), integer -> integer numeric over its bounds, numeric -> bounds;
    scale and bins hints kept. Identifier and text columns are dropped by declaration (no
    synthesizer releases them); datetime columns are refused (not synthesized) unless
    dropped. A person privacy unit needs `allow_unit` (the caller bounds each person's rows
    and accounts per person, `Synthesizer.person_bound`); else it is refused naming the
    option.

    A column in `estimate` keeps only its type (categorical, or numeric and whether integer):
    its categories or bounds are estimated under DP, it may be missing, and it takes no
    scale, bins or point-mass hint (the declaration the retired `--domain adult-types` made,
    so the budget split and the estimate are the same)."""
    if schema.privacy_unit != "row" and not allow_unit:
        raise InvalidInputError(
            f"schema {schema.name!r} has privacy unit {schema.privacy_unit!r} (several rows per "
            "person): pass --max-rows-per-unit M (aim or mst) to keep each person's first M "
            "rows and account per person")
    out = DomainDeclaration(name=f"schema {schema.name}")
    for c in schema.columns:
        if not c.is_released or c.name in drop:
            out.drop.append(c.name)
        elif c.name in estimate and c.type in ("categorical", "integer", "numeric"):
            kind: Kind = "categorical" if c.type == "categorical" else "numeric"
            out.columns[c.name] = ColumnDeclaration(
                kind=kind, integer=True if c.type == "integer" else None)
        elif c.type == "categorical":
            out.columns[c.name] = ColumnDeclaration(
                kind="categorical", categories=list(c.categories), other=c.other,
                missing=c.missing)
        elif c.type in ("integer", "numeric"):
            lo, hi = c.bounds  # type: ignore[misc]
            out.columns[c.name] = ColumnDeclaration(
                kind="numeric", bounds=(float(lo), float(hi)), bins=c.bins,
                integer=c.type == "integer", scale=c.scale, missing=c.missing,
                points=tuple(c.point_masses))
        else:
            raise InvalidInputError(f"column {c.name!r} is a {c.type} column in schema "
                                    f"{schema.name!r}: privlab synth does not synthesize it; "
                                    f"--exclude {c.name}")
    return out


def conform_schema(schema: Schema, decl: DomainDeclaration) -> Schema:
    """The schema the rows are conformed to: `schema` itself, except that a column whose
    domain is estimated is conformed by its type alone (categorical as text, numeric over
    (-inf, inf), missing allowed), so that its declared categories / bounds, which are not
    used, cannot change the rows the estimate reads."""
    open_ = {name for name, d in decl.columns.items()
             if d.categories is None and d.bounds is None and d.edges is None}
    if not open_:
        return schema
    cols = []
    for c in schema.columns:
        if c.name not in open_:
            cols.append(c)
        elif c.type == "categorical":
            cols.append(ColumnSchema(c.name, "text", missing=True))
        else:
            cols.append(ColumnSchema(c.name, c.type, bounds=(-math.inf, math.inf), missing=True))
    return replace(schema, columns=tuple(cols))
