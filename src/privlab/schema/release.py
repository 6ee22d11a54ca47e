"""What a one-column release (`privlab release`, the studio) takes from the declared schema.

The released column's public domain (bounds, categories, bins), the per-person contribution
bound, the public size the delta check compares against, and the release's guarantee text:
all from the schema and the options, never from the rows. Shared by `privlab.cli.release` and
`privlab.studio.protect`, so the two front ends cannot drift apart.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

from privlab.core.guarantee import PrivacyGuarantee
from privlab.errors import InvalidInputError


class ReleaseDomain(NamedTuple):
    """The public domain of the released column and the contribution bound per person."""

    bounds: tuple[float, float] | None
    categories: list[str] | None
    bins: int | None
    per_unit: int  # rows kept per person (1: each row is a person)
    unit: str | None  # the privacy-unit column, None for row-level


def public_size_of(sch: Any, option: int | None) -> int | None:
    """The public number of rows the delta check compares against: `--public-size`, else the
    schema's `public_size` (through `PublicFacts`), else None. Never len(rows): the exact row
    count is private and must not decide a refusal or appear in a message."""
    from privlab.schema.facts import PublicFacts

    facts = PublicFacts.from_schema(sch) if sch is not None else PublicFacts()
    return facts.with_argument("size", option, "--public-size").optional("size")


def conform_for_release(frame: Any, sch: Any, on_invalid: str, column: str, stat: str,
                  declared: ReleaseDomain, max_rows: int | None, mech: str | None,
                  reads_numbers: bool | None = None) -> tuple[Any, ReleaseDomain]:
    """Conform the rows to the schema and fill the column's domain from it (never the data).
    `reads_numbers`: whether the statistic needs a numeric column (the registry's
    `Statistic.numeric`, passed by the caller: the schema layer imports no front end);
    default: sum, mean and quantile."""
    from privlab.schema import OTHER, check_policy, conform
    from privlab.schema.facts import PublicFacts
    from privlab.schema.units import bound_per_unit

    col = sch.column(column)
    if not col.is_released:
        raise InvalidInputError(f"--column {column!r} is declared {col.type} in schema "
                                f"{sch.name!r}: it is never released; choose another column")
    unit = None if sch.privacy_unit == "row" else sch.privacy_unit
    wanted = [column] + ([unit] if unit and unit != column else [])
    frame = conform(frame, sch, check_policy(on_invalid), columns=wanted)
    bounds, cats, bins = declared.bounds, declared.categories, declared.bins
    numeric = col.type in ("integer", "numeric")
    if reads_numbers is None:
        reads_numbers = stat in ("sum", "mean", "quantile")
    if reads_numbers and not numeric:
        raise InvalidInputError(f"--column {column!r} is declared {col.type} in schema "
                                f"{sch.name!r}; {stat} needs an integer or numeric column")
    if bounds is None and numeric and (stat != "histogram" or cats is None):
        bounds = (float(col.bounds[0]), float(col.bounds[1]))  # type: ignore[index]
    if stat == "histogram" and cats is None and col.type == "categorical":
        cats = list(col.categories) + ([OTHER] if col.other else [])
        bounds = declared.bounds
    if bins is None and col.bins is not None:
        bins = col.bins
    # the bound per person, refused as every front end refuses it (PublicFacts.person_bound)
    unit, per_unit = PublicFacts.from_schema(sch).with_argument(
        "max_rows_per_unit", max_rows, "--max-rows-per-unit").person_bound()
    if unit is not None:
        if mech == "gaussian":
            raise InvalidInputError(f"privacy unit {unit!r}: the gaussian mechanism has no "
                                    "simple group-privacy bound here; use laplace or geometric")
        frame = bound_per_unit(frame, unit, per_unit)  # rows without an id: dropped first
    return frame, ReleaseDomain(bounds, cats, bins, per_unit, unit)


def release_guarantee(g: PrivacyGuarantee, stat: str, column: str, epsilon: float, per_unit: int,
               unit: str | None, schema: str | None, coerced: bool = False
               ) -> PrivacyGuarantee:
    """The release's guarantee: what it covers, and the person-level claim when bounded."""
    from privlab.schema.units import missing_unit_note

    g = g.with_covers(f"{stat} of column {column!r} (the noisy value and its details)")
    if unit is not None:
        g = dataclasses.replace(
            g, epsilon=epsilon, neighbouring="user",
            accountant=f"group privacy over {per_unit} rows ({g.accountant})",
            notes=g.notes + (f"privacy unit {unit!r}: each person's rows are bounded to their "
                             f"first {per_unit}; the mechanism runs at epsilon/{per_unit} = "
                             f"{epsilon / per_unit:.4g} per row, so {epsilon:g} per person",
                             missing_unit_note(unit)))
    elif schema is None:
        g = g.with_notes("no --schema: each row is taken to be a different person")
    if coerced:
        g = g.with_notes(f"no --schema: cells of {column!r} that are not numbers count as "
                         "missing and are left out (a missing cell is a removed record)")
    return g

