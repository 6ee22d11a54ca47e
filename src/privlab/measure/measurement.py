"""`Measurement`: a release's privacy cost, noise and accuracy, known before any row is read.

OpenDP's idea in privlab's terms. `measurement(schema, statistic, column, epsilon=...)`
builds one from the declared schema (through the `PublicFacts` gate), a neighbouring relation
(a type, privlab.measure.relation) and a budget. It states its input domain, its privacy map,
its noise (mechanism, scale, grid), its 95% half-width and its guarantee; calling it on rows
reads them as the schema declares, bounds each person's rows, and releases with the existing
exact samplers (core/queries.py) at the row-level budget the relation's privacy map allows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import pandas as pd

from privlab.core import queries
from privlab.core.guarantee import PrivacyGuarantee, check_delta, check_epsilon
from privlab.core.release import Release
from privlab.core.rng import RngLike
from privlab.errors import InvalidInputError
from privlab.measure import noise as nz
from privlab.measure import stats
from privlab.measure.relation import Relation, relation_of


@dataclass(frozen=True)
class Domain:
    """The released column's public domain, from the schema (never from the rows)."""

    column: str
    type: str
    bounds: tuple[float, float] | None = None
    categories: tuple[str, ...] | None = None
    bins: int | None = None
    labels: tuple[str, ...] | None = None  # the histogram's public bin labels

    @property
    def integer(self) -> bool:
        return self.type == "integer"


@dataclass(frozen=True)
class Measurement:
    """One statistic of one column, with everything stated before the data."""

    statistic: str
    domain: Domain
    relation: Relation
    epsilon: float
    delta: float
    mechanism: str
    row_epsilon: float
    row_delta: float
    noise: tuple[nz.Noise, ...]
    schema: Any = field(repr=False, compare=False)
    q: float = 0.5
    public_size: int | None = None

    # ------------------------------------------------------------------ stated before data
    def privacy_map(self, d_in: int = 1) -> tuple[float, float]:
        """(epsilon, delta) over `d_in` neighbours of the relation (group privacy)."""
        return self.relation.privacy_map(self.row_epsilon, self.row_delta, d_in)

    @property
    def definition(self) -> stats.Statistic:
        """The statistic's one definition (privlab.measure.stats)."""
        return stats.get(self.statistic)

    @property
    def inputs(self) -> stats.Inputs:
        """The public inputs the statistic is planned from, at the row-level budget."""
        d = self.domain
        return stats.Inputs(d.bounds, d.categories, d.labels, d.bins, d.integer,
                            self.mechanism, self.row_epsilon, self.row_delta, self.q,
                            self.public_size)

    def half_width(self, level: float = 0.95) -> float | None:
        """The noise's `level` half-width in the value's units, before any row is read. A
        ratio's (mean, variance) is approximate, stated at the schema's public size (None
        without one); a quantile (the exponential mechanism) has none."""
        return self.definition.half_width(self.inputs, self.noise, level)

    @property
    def guarantee(self) -> PrivacyGuarantee:
        """The claim the release will carry: the privacy map at one neighbour."""
        eps, delta = self.privacy_map(1)
        inner = self.definition.accountant
        return PrivacyGuarantee(
            epsilon=eps, delta=delta, neighbouring=self.relation.name,
            mechanism=self._mechanism_text(), accountant=self.relation.accountant(inner),
            notes=self.relation.notes(self.epsilon),
            covers=(f"{self.statistic} of column {self.domain.column!r} "
                    "(the noisy value and its details)",))

    def _mechanism_text(self) -> str:
        return self.definition.mechanism_text(self.inputs, self.noise)

    def describe(self) -> str:
        """Plain words for a preview: what, noise, accuracy, claim."""
        hw = self.half_width()
        acc = (f"95% of the time within \u00b1{hw:.4g}" if hw is not None else
               "no closed-form 95% half-width")
        return (f"{self.statistic} of {self.domain.column}: {self._mechanism_text()}; {acc}; "
                f"{self.guarantee.claim} per {self.relation.name.replace('_', ' ')}")

    def to_dict(self) -> dict[str, Any]:
        return {"statistic": self.statistic, "column": self.domain.column,
                "domain": {"type": self.domain.type, "bounds": self.domain.bounds,
                           "categories": self.domain.categories, "bins": self.domain.bins},
                "neighbouring": self.relation.name, "unit": self.relation.unit,
                "contribution_bound": self.relation.steps if self.relation.unit else 1,
                "epsilon": self.epsilon, "delta": self.delta,
                "row_epsilon": self.row_epsilon, "row_delta": self.row_delta,
                "noise": [n.to_dict() for n in self.noise],
                "half_width_95": self.half_width(), "guarantee": self.guarantee.to_dict()}

    # ------------------------------------------------------------------ on data
    def __call__(self, data: Any, *, rng: RngLike = None, on_invalid: str = "refuse"
                 ) -> Release:
        """Release on `data` (a path or a DataFrame), read as the schema declares."""
        from privlab.schema.read import read_declared
        from privlab.schema.units import bound_per_unit

        col = self.domain.column
        unit = self.relation.unit
        wanted = [col] + ([unit] if unit and unit != col else [])
        frame = read_declared(data, self.schema, on_invalid, columns=wanted, allow_empty=True)
        if unit is not None:
            frame = bound_per_unit(frame, unit, self.relation.steps)
        release = self._release(frame[col], rng)
        self._check_noise(release)
        planned = self.guarantee
        extra = tuple(n for n in release.guarantee.notes if n not in planned.notes)
        return replace(release, guarantee=planned.with_notes(*extra))

    def _release(self, values: pd.Series, rng: RngLike) -> Release:
        """The values the statistic reads (numbers without missing cells for a numeric one,
        a histogram's non-missing cells), released by its definition."""
        d, stat = self.domain, self.definition
        if stat.numeric or (self.statistic == "histogram" and d.categories is None):
            values = queries.as_numeric(values.dropna().to_numpy(), f"column {d.column!r}")
        elif self.statistic == "histogram":
            values = values.dropna()
        return stat.release(values, self.inputs, rng)

    def _check_noise(self, release: Release) -> None:
        """The drawn noise is the planned noise (an internal invariant, not user input)."""
        if not self.noise:
            return
        if "scale" in release.noise:
            drawn = [release.noise["scale"]]
        else:
            drawn = [v for k, v in release.noise.items() if k.endswith("_scale")]
        if sorted(n.scale for n in self.noise) != sorted(float(v) for v in drawn):
            raise RuntimeError(f"{self.statistic}: drawn noise {drawn} is not the planned "
                               f"{[n.scale for n in self.noise]}")


def _domain(schema: Any, statistic: str, column: str, bins: int | None) -> Domain:
    """The column's public domain through `PublicFacts`, refused when the statistic needs
    what the schema does not declare."""
    from privlab.core.queries import histogram_edges
    from privlab.schema.facts import PublicFacts

    col = schema.column(column)
    if not col.is_released:
        raise InvalidInputError(f"column {column!r} is declared {col.type} in schema "
                                f"{schema.name!r}: it is never released; choose another column")
    facts = PublicFacts.from_schema(schema)
    numeric = col.type in ("integer", "numeric")
    if stats.get(statistic).numeric and not numeric:
        raise InvalidInputError(f"column {column!r} is declared {col.type} in schema "
                                f"{schema.name!r}; {statistic} needs an integer or numeric column")
    raw = facts.optional(f"bounds:{column}") if numeric else None
    bounds = None if raw is None else queries.check_bounds(
        (float(raw[0]), float(raw[1])), f"bounds of {column!r}")
    cats = facts.optional(f"categories:{column}")
    if statistic != "histogram":
        return Domain(column, col.type, bounds)
    if cats is not None:
        return Domain(column, col.type, None, tuple(cats), None, tuple(cats))
    if bounds is None:
        raise InvalidInputError(f"histogram of {column!r} needs declared categories or "
                                f"bounds in schema {schema.name!r}")
    n = bins if bins is not None else (col.bins if col.bins is not None else 10)
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise InvalidInputError(f"bins must be a positive integer, got {n!r}")
    _, labels = histogram_edges(bounds, n, col.type == "integer")
    return Domain(column, col.type, bounds, None, n, tuple(labels))


def _check_mechanism(statistic: str, mechanism: str | None, delta: float) -> str:
    """The mechanism name (the statistic's default), refused where it cannot run."""
    if mechanism not in (None, "laplace", "geometric", "gaussian"):
        raise InvalidInputError(f"mechanism must be laplace, geometric or gaussian, "
                                f"got {mechanism!r}")
    if mechanism == "gaussian" and delta == 0:
        raise InvalidInputError("the gaussian mechanism needs delta > 0 (e.g. 1e-6)")
    if mechanism != "gaussian" and delta > 0:
        raise InvalidInputError(f"delta is only used by the gaussian mechanism, not "
                                f"{mechanism or 'the default'}; pass mechanism='gaussian'")
    stat = stats.get(statistic)
    if mechanism is not None and mechanism not in stat.mechanisms:
        raise InvalidInputError(f"{statistic} uses the {stat.default_mechanism} mechanism; "
                                "omit mechanism")
    if mechanism is None or statistic == "quantile":
        return stat.default_mechanism
    return mechanism


def measurement(schema: Any, statistic: str, column: str, *, epsilon: float,
                delta: float = 0.0, mechanism: str | None = None,
                relation: Relation | None = None, max_rows_per_unit: int | None = None,
                bins: int | None = None, q: float = 0.5) -> Measurement:
    """Build the measurement of `statistic` over `column` of the declared `schema` (a bundled
    name, a file or a `Schema`) at (epsilon, delta) per neighbour of `relation` (default:
    the schema's, a person column with its contribution bound M, else add/remove a row)."""
    from privlab.schema import load_schema

    stat = stats.get(statistic)
    epsilon, delta = check_epsilon(epsilon), check_delta(delta)
    sch = load_schema(schema)
    rel = relation if relation is not None else relation_of(sch, max_rows_per_unit)
    if rel.unit is not None and rel.unit not in sch.names:
        raise InvalidInputError(f"privacy unit {rel.unit!r} is not a column of schema "
                                f"{sch.name!r}")
    mech = _check_mechanism(statistic, mechanism, delta)
    dom = _domain(sch, statistic, column, bins)
    if not 0.0 <= float(q) <= 1.0:
        raise InvalidInputError(f"q must be in [0, 1], got {q}")
    if stat.numeric and dom.bounds is None:
        raise InvalidInputError(f"{statistic} of {column!r} needs declared bounds in schema "
                                f"{sch.name!r} (bounds from the data are not private)")
    row_eps, row_delta = rel.row_budget(epsilon, delta)
    size = _public_size(sch)
    noise = stat.plan(stats.Inputs(dom.bounds, dom.categories, dom.labels, dom.bins,
                                   dom.integer, mech, row_eps, row_delta, float(q), size))
    return Measurement(statistic, dom, rel, epsilon, delta, mech, row_eps, row_delta, noise,
                       sch, float(q), size)


def _public_size(sch: Any) -> int | None:
    from privlab.schema.facts import PublicFacts

    size = PublicFacts.from_schema(sch).optional("size")
    return None if size is None or not math.isfinite(size) else int(size)


__all__ = ["Domain", "Measurement", "measurement"]
