"""The one way to get a public fact: `PublicFacts`.

Why it exists: a mechanism that reads the row count n, the class list or the privacy unit
from the private rows (`len(frame)`, `np.unique(y)`) changes its sampling rate, its steps, its
noise or its output shape when one person is added, removed or replaced: outside any noise,
while the guarantee says DP. So every such fact comes from this frozen object, and the object
can be built from three sources only, never from a table:

- "schema": a declared `Schema` (`public_size`, the target's `categories`, `privacy_unit`,
  `max_rows_per_unit`, column bounds and categories);
- "argument": an explicit public value the caller passes (`sample_rate=`, `public_size=`,
  `classes=`, `--max-rows-per-unit`);
- "dp_measurement": a value measured under DP and charged to the same budget
  (`with_measurement`, e.g. a geometric-noise count); its epsilon and mechanism travel with it
  so the guarantee can name it.

Every read goes through `PublicFacts.get` (or the helpers built on it), which reports it to
the active `watch_facts()` recorders, so a test can assert which facts a command read and
from where. The API, for other commands:

    facts = PublicFacts.from_schema(schema, target="salary")       # or PublicFacts()
    facts = facts.with_arguments(sample_rate=0.01, classes=[0, 1])  # explicit public values
    facts = facts.with_measurement("size", noisy_n, epsilon=0.05, mechanism="geometric count")
    n = facts.value("size", missing="pass public_size")    # InvalidInputError if absent
    q, source = facts.sample_rate(batch_size=256, missing="pass --sample-rate")
    with watch_facts() as reads: ...                        # [FactRead(name, origin, detail)]
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from privlab.errors import InvalidInputError
from privlab.schema.model import OTHER, Schema

Origin = Literal["schema", "argument", "dp_measurement"]
ORIGINS: tuple[str, ...] = ("schema", "argument", "dp_measurement")
#: Names a fact may have (per-column facts are "bounds:COL" and "categories:COL").
NAMES = ("size", "sample_rate", "classes", "privacy_unit", "max_rows_per_unit")


@dataclass(frozen=True)
class Fact:
    """One public value and where it came from (`detail` is printable: it holds no data)."""

    name: str
    value: Any
    origin: Origin
    detail: str
    epsilon: float = 0.0   # charged budget, for a dp_measurement


@dataclass(frozen=True)
class FactRead:
    """What a watcher records for each read: the fact's name, origin and detail."""

    name: str
    origin: Origin
    detail: str


_WATCHERS: list[list[FactRead]] = []


@contextlib.contextmanager
def watch_facts() -> Iterator[list[FactRead]]:
    """Record every fact read inside the block (the neighbour harness asserts on it)."""
    reads: list[FactRead] = []
    _WATCHERS.append(reads)
    try:
        yield reads
    finally:
        _WATCHERS.remove(reads)


def _check_name(name: str) -> None:
    head = name.split(":", 1)[0]
    if name not in NAMES and head not in ("bounds", "categories"):
        raise ValueError(f"unknown public fact {name!r}")


@dataclass(frozen=True)
class PublicFacts:
    """Public facts keyed by name; built only from a schema, arguments or DP measurements."""

    facts: tuple[Fact, ...] = ()

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_schema(cls, schema: Schema, target: str | None = None) -> PublicFacts:
        """The facts a declared schema states (`target`: its categories are the classes)."""
        where = f"schema {schema.name!r}"
        out: list[Fact] = [Fact("privacy_unit", schema.privacy_unit, "schema", where)]
        if schema.public_size is not None:
            out.append(Fact("size", int(schema.public_size), "schema", f"{where} public_size"))
        if schema.max_rows_per_unit is not None:
            out.append(Fact("max_rows_per_unit", int(schema.max_rows_per_unit), "schema",
                            f"{where} max_rows_per_unit"))
        for col in schema.columns:
            if col.bounds is not None:
                out.append(Fact(f"bounds:{col.name}", tuple(col.bounds), "schema", where))
            if col.type == "categorical":
                cats = tuple(col.categories) + ((OTHER,) if col.other else ())
                out.append(Fact(f"categories:{col.name}", cats, "schema", where))
        if target is not None:
            col = schema.column(target)
            if col.type != "categorical":
                raise InvalidInputError(f"target column {target!r} is declared {col.type} in "
                                        f"{where}; a classifier needs a categorical target with "
                                        "declared categories (the classes)")
            classes = tuple(col.categories) + ((OTHER,) if col.other else ())
            out.append(Fact("classes", classes, "schema", f"{where} categories of {target!r}"))
        return cls(tuple(out))

    def _with(self, fact: Fact) -> PublicFacts:
        _check_name(fact.name)
        kept = tuple(f for f in self.facts if f.name != fact.name)
        return replace(self, facts=kept + (fact,))

    def with_arguments(self, **values: Any) -> PublicFacts:
        """Explicit public values from the caller; None values are skipped. An argument
        overrides a schema fact of the same name (the caller's option wins)."""
        out = self
        for name, value in values.items():
            out = out.with_argument(name, value, name)
        return out

    def with_argument(self, name: str, value: Any, option: str) -> PublicFacts:
        """One explicit public value, named after the caller's `option` (e.g. "public_size"
        for the fact "size"); None is skipped."""
        if value is None:
            return self
        if name == "classes":
            value = tuple(value)
        return self._with(Fact(name, value, "argument", f"argument {option}"))

    def with_measurement(self, name: str, value: Any, *, epsilon: float,
                         mechanism: str) -> PublicFacts:
        """A value measured under DP, charged `epsilon` of the same budget."""
        if not (epsilon > 0 and math.isfinite(epsilon)):
            raise ValueError("a DP measurement needs a charged epsilon > 0")
        return self._with(Fact(name, value, "dp_measurement",
                               f"{mechanism} (epsilon {epsilon:.4g} of the budget)", epsilon))

    # ------------------------------------------------------------------ reading
    def get(self, name: str) -> Fact | None:
        """The fact (None if not known); every read is reported to the active watchers."""
        _check_name(name)
        for f in self.facts:
            if f.name == name:
                for reads in _WATCHERS:
                    reads.append(FactRead(f.name, f.origin, f.detail))
                return f
        return None

    def value(self, name: str, *, missing: str) -> Any:
        """The fact's value, or a one-line `InvalidInputError(missing)` when not known."""
        found = self.get(name)
        if found is None:
            raise InvalidInputError(missing)
        return found.value

    def optional(self, name: str, default: Any = None) -> Any:
        found = self.get(name)
        return default if found is None else found.value

    def sample_rate(self, batch_size: int, *, scale: float = 1.0,
                    missing: str) -> tuple[float, str]:
        """A public Poisson rate and where it came from: the `sample_rate` fact, else
        batch_size / (size x `scale`) (e.g. scale = 1 - test share), else `missing`."""
        rate = self.get("sample_rate")
        if rate is not None:
            return float(rate.value), f"{rate.detail} (public)"
        size = self.get("size")
        if size is None:
            raise InvalidInputError(missing)
        ref = float(size.value) * scale
        if ref < 1:
            raise InvalidInputError(f"the public size {size.value} is too small for a batch")
        where = size.detail if size.origin != "dp_measurement" else f"a {size.detail}"
        what = f"batch size / ({where}" + (f" x {scale:.4g})" if scale != 1 else ")")
        return min(1.0, batch_size / ref), what + (" (public)" if size.origin != "dp_measurement"
                                                  else "")

    @property
    def charged_epsilon(self) -> float:
        """Budget spent on DP measurements held here."""
        return float(sum(f.epsilon for f in self.facts))

    def classes(self, missing: str) -> list[Any]:
        return list(self.value("classes", missing=missing))

    def person_bound(self, option: str = "--max-rows-per-unit") -> tuple[str | None, int]:
        """(unit column or None for "row", rows kept per person). A person unit without a
        bound is refused with the option to pass, as `privlab release` does."""
        found = self.get("privacy_unit")
        unit = "row" if found is None else found.value
        where = "the schema" if found is None else found.detail
        bound = self.optional("max_rows_per_unit")
        if unit == "row":
            if bound is not None and self.get("max_rows_per_unit").origin == "argument":  # type: ignore[union-attr]
                raise InvalidInputError(f"{option}: the privacy unit is 'row' (each row is one "
                                        "person); drop the option")
            return None, 1
        if bound is None:
            raise InvalidInputError(
                f"{where} has privacy unit {unit!r} (one person, many rows): pass "
                f"{option} M to keep each person's first M rows, or declare "
                "max_rows_per_unit in the schema")
        if isinstance(bound, bool) or not isinstance(bound, int) or bound < 1:
            raise InvalidInputError(f"{option} must be a whole number >= 1, got {bound!r}")
        return unit, int(bound)

    def describe(self, names: Sequence[str] | None = None) -> list[str]:
        """'name: origin (detail)' lines, for guarantee notes (values are not printed)."""
        return [f"{f.name}: {f.origin} ({f.detail})" for f in self.facts
                if names is None or f.name in names]


__all__ = ["NAMES", "ORIGINS", "Fact", "FactRead", "PublicFacts", "watch_facts"]
