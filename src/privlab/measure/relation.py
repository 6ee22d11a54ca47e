"""Neighbouring relations as types, each a stability step onto add/remove-one-row.

A measurement's mechanism is calibrated for one added or removed row. A relation says how
many such steps one of its neighbours is (`steps`): replacing a row is a removal then an
addition (2 steps); a person with at most M rows is M additions or removals. Group privacy
then turns the row-level (epsilon, delta) into the relation's claim: k steps of an
(e, d)-DP mechanism give (k e, k e^((k-1) e) d)-DP (Dwork and Roth 2014, Lemma 2.2 for d = 0;
Vadhan 2017, Lemma 2.2 with delta). `row_budget` inverts it, so a measurement is built for
the relation's budget before any row is read, rather than patched afterwards.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from privlab.errors import InvalidInputError


def _group(epsilon: float, delta: float, k: int) -> tuple[float, float]:
    """(epsilon, delta) over k add/remove steps of an (epsilon, delta)-DP mechanism."""
    return k * epsilon, (k * math.exp((k - 1) * epsilon) * delta if delta else 0.0)


@dataclass(frozen=True)
class Relation:
    """Base of the relations: `steps` add/remove-one-row steps per neighbour."""

    name: ClassVar[str] = "add_remove_record"

    @property
    def steps(self) -> int:
        return 1

    @property
    def unit(self) -> str | None:
        """The person column rows are grouped by (None: each row is its own person)."""
        return None

    def privacy_map(self, epsilon: float, delta: float, d_in: int = 1) -> tuple[float, float]:
        """The claim over `d_in` neighbours of this relation of a row-level (epsilon, delta)
        mechanism (group privacy over `d_in * steps` add/remove steps)."""
        if isinstance(d_in, bool) or not isinstance(d_in, int) or d_in < 1:
            raise InvalidInputError(f"d_in must be a whole number >= 1, got {d_in!r}")
        return _group(epsilon, delta, d_in * self.steps)

    def row_budget(self, epsilon: float, delta: float) -> tuple[float, float]:
        """The row-level (epsilon, delta) whose privacy map over one neighbour is at most the
        given budget (rounded down when the float product would exceed it)."""
        k = self.steps
        eps = epsilon / k
        while k * eps > epsilon:
            eps = math.nextafter(eps, 0.0)
        dlt = delta / (k * math.exp((k - 1) * eps)) if delta else 0.0
        while dlt and _group(eps, dlt, k)[1] > delta:
            dlt = math.nextafter(dlt, 0.0)
        return eps, dlt

    def accountant(self, inner: str) -> str:
        return inner

    def notes(self, epsilon: float) -> tuple[str, ...]:
        return ()


@dataclass(frozen=True)
class AddRemove(Relation):
    """Datasets differ by adding or removing one row (each row is one person)."""

    name: ClassVar[str] = "add_remove_record"


@dataclass(frozen=True)
class Replace(Relation):
    """Datasets differ by replacing one row: a removal then an addition (2 steps)."""

    name: ClassVar[str] = "replace_record"

    @property
    def steps(self) -> int:
        return 2

    def accountant(self, inner: str) -> str:
        return f"group privacy over 2 add/remove steps ({inner})"

    def notes(self, epsilon: float) -> tuple[str, ...]:
        return ("replace one row = remove it and add another: the mechanism runs at "
                f"epsilon/2 = {epsilon / 2:.4g} per step",)


@dataclass(frozen=True)
class Person(Relation):
    """Datasets differ by all rows of one person (column `unit`), each person's rows bounded
    to their first `bound` (the contribution bound M): M add/remove steps."""

    name: ClassVar[str] = "user"
    column: str = ""
    bound: int = 1

    def __post_init__(self) -> None:
        if not self.column:
            raise InvalidInputError("a person relation needs the privacy-unit column")
        if isinstance(self.bound, bool) or not isinstance(self.bound, int) or self.bound < 1:
            raise InvalidInputError(f"max_rows_per_unit must be a whole number >= 1, "
                                    f"got {self.bound!r}")

    @property
    def steps(self) -> int:
        return self.bound

    @property
    def unit(self) -> str | None:
        return self.column

    def accountant(self, inner: str) -> str:
        return f"group privacy over {self.bound} rows ({inner})"

    def notes(self, epsilon: float) -> tuple[str, ...]:
        from privlab.schema.units import missing_unit_note

        return (f"privacy unit {self.column!r}: each person's rows are bounded to their first "
                f"{self.bound}; the mechanism runs at epsilon/{self.bound} = "
                f"{epsilon / self.bound:.4g} per row, so {epsilon:g} per person",
                missing_unit_note(self.column))


def relation_of(schema: object, max_rows_per_unit: int | None = None,
                replace: bool = False) -> Relation:
    """The relation a declared schema states: its privacy unit through `PublicFacts`
    (a person column needs a contribution bound), else add/remove (or replace) one row."""
    from privlab.schema.facts import PublicFacts

    unit, bound = PublicFacts.from_schema(schema).with_argument(  # type: ignore[arg-type]
        "max_rows_per_unit", max_rows_per_unit, "max_rows_per_unit").person_bound(
        "max_rows_per_unit")
    if unit is None:
        return Replace() if replace else AddRemove()
    if replace:
        raise InvalidInputError(f"privacy unit {unit!r}: replace-one-row does not apply to a "
                                "person-level schema; drop replace")
    return Person(column=unit, bound=bound)


__all__ = ["AddRemove", "Person", "Relation", "Replace", "relation_of"]
