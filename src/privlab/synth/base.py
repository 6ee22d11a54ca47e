"""The synthesizer interface shared by every method: `fit(df, epsilon, delta)`, `sample(n)`,
`guarantee`; plus input checks and the domain step every method shares.

Column kinds and domains come from the public `privlab.schema.Schema` (`schema=`, the one
declaration format), never from the data; `estimate_domain=` names the columns whose
categories / bounds are estimated under DP instead (their declared ones are not used). The
rows are conformed to the schema first (`privlab.schema.conform`, policy `on_invalid`), so
nothing the synthesizer publishes (columns, dtypes, domain) depends on whether some row
holds an odd value."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from privlab.core.guarantee import PrivacyGuarantee, check_delta, check_epsilon
from privlab.core.rng import SEEDED_NOTE, RngLike, is_seeded, make_rng
from privlab.errors import InvalidInputError
from privlab.schema import Schema, check_policy, conform, load_schema
from privlab.schema.units import bound_per_unit, missing_unit_note
from privlab.synth.budget import SamplerReserve, ZCDPAccount, reserve_for, rho_within
from privlab.synth.domain import (
    DEFAULT_BINS,
    NO_SCHEMA,
    ColumnPlan,
    Domain,
    DomainBudget,
    DomainDeclaration,
    build_domain,
    conform_schema,
    declaration_from_schema,
    estimate_columns,
    plan_columns,
)

#: Default delta: well below 1/n for tables up to ~10^5 rows; pass a smaller one for more.
DEFAULT_DELTA = 1e-6
#: Share of delta given to the category thresholds when categories are estimated.
THRESHOLD_DELTA_SHARE = 0.1


def check_privacy(epsilon: float | None, delta: float) -> tuple[bool, float, float]:
    """(private, epsilon, delta) of a fit: epsilon None or +inf is the non-private baseline;
    otherwise both are checked and delta must be > 0 (Gaussian noise is never pure DP)."""
    private = not (epsilon is None or (isinstance(epsilon, (int, float))
                                       and math.isinf(epsilon) and epsilon > 0))
    if not private:
        return False, math.inf, 0.0
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    if delta == 0:
        raise InvalidInputError("delta must be > 0: the synthesizers add Gaussian "
                                "noise (zCDP), which is never (epsilon, 0)-DP")
    return True, epsilon, delta
MAX_SAMPLE_ROWS = 10_000_000

Progress = Callable[[str, int, int], None]

NON_PRIVATE_REASON = ("epsilon=inf: the model is fitted on exact marginals / without gradient "
                      "noise; a baseline for comparison, never for release")
#: What every synthesizer's (epsilon, delta) claim protects (methods add their model's parts).
COVERS = ("synthetic rows (sample(n): post-processing of the DP model)",
          "domain: categories and bounds estimated under DP (declared ones are public)",
          "warnings (computed from DP values and the declaration only)")

SchemaLike = str | Path | Mapping[str, Any] | Schema


def _no_progress(stage: str, done: int, total: int) -> None:
    return None


@dataclass(frozen=True)
class PrivacyPlan:
    """How a private fit splits (epsilon, delta), from public facts only (the schema, the
    options): the thresholds' delta, the sampler's reserve, the zCDP part."""

    delta_threshold: float
    sampler: SamplerReserve
    #: delta of the zCDP conversion: the rest, so that the three sum to at most the request
    delta_z: float
    #: rho (per person) that converts to (sampler.epsilon, delta_z)
    rho_total: float


def split_delta(delta: float, delta_threshold: float, reserve: float) -> float:
    """delta - delta_threshold - reserve, stepped down until the three sum (as the guarantee
    sums them, math.fsum) to at most `delta`: the reported delta never exceeds the request."""
    delta_z = delta - delta_threshold - reserve
    while math.fsum([delta_z, delta_threshold, reserve]) > delta:
        delta_z = math.nextafter(delta_z, 0.0)
    return delta_z


#: The model's rho is calibrated this far below what is left, so that the rounding of its
#: steps (each a few ulps) never sums above the rho the guarantee states.
RHO_MARGIN = 1e-10


@dataclass
class Prepared:
    frame: pd.DataFrame
    plans: list[ColumnPlan]
    private: bool
    epsilon: float
    delta: float
    gen: np.random.Generator


class Synthesizer:
    """Base class. Subclasses implement `_fit(prep)` and `_sample_codes(n, gen)`."""

    method = "base"
    mechanism = ""

    covers: tuple[str, ...] = ()

    def __init__(self, *, schema: SchemaLike | None = None,
                 estimate_domain: str | Sequence[str] | None = None, on_invalid: str = "coerce",
                 drop: Sequence[str] = (), bins: int = DEFAULT_BINS,
                 missing: str = "value", bounds_share: float = 0.1,
                 categories_share: float = 0.1, rng: RngLike = None,
                 progress: Progress | None = None,
                 max_rows_per_unit: int | None = None) -> None:
        """`schema`: the public schema (a bundled name, a YAML/JSON path, a mapping or a
        `Schema`), required before fit. `estimate_domain`: "all" or column names whose
        categories / bounds are estimated under DP with part of the budget (only their type
        is read from the schema). `on_invalid`: "coerce" (clamp, round, map to `<other>` /
        missing, drop rows with no place) or "refuse" (raise naming the column).
        `max_rows_per_unit`: with a schema whose privacy unit is a person column, each
        person's first M rows are kept and the guarantee is per person (group privacy; aim
        and mst only); else such a schema is refused naming the option."""
        if missing not in ("value", "drop"):
            raise InvalidInputError(f"missing must be \"value\" (a code of its own) or \"drop\" "
                                    f"(drop rows with a missing value), got {missing!r}")
        for name, share in (("bounds_share", bounds_share),
                            ("categories_share", categories_share)):
            if not (isinstance(share, (int, float)) and 0 < share < 0.5):
                raise InvalidInputError(f"{name} must be in (0, 0.5), got {share!r}")
        self.on_invalid = check_policy(on_invalid)
        self.drop = list(drop)
        self.max_rows_per_unit = max_rows_per_unit
        self.estimate_domain = estimate_domain
        self.schema: Schema | None = None
        #: without a schema every fit is refused naming --schema (plan_columns: NO_SCHEMA)
        self.declaration = DomainDeclaration(name="none")
        if schema is not None:
            self._set_schema(schema)
        self.bins = bins
        self.missing = missing
        self.bounds_share = float(bounds_share)
        self.categories_share = float(categories_share)
        self.rng = rng
        self.progress: Progress = progress or _no_progress
        self.account = ZCDPAccount()
        self._guarantee: PrivacyGuarantee | None = None
        self.domain: Domain | None = None
        self.warnings: list[str] = []
        #: wall-clock seconds of the last fit: depends on the number of rows, so it is NOT
        #: released (not in to_dict, the CLI output or the report); for benchmarks only
        self.fit_seconds = 0.0
        self._gen: np.random.Generator | None = None

    def _set_schema(self, schema: SchemaLike) -> None:
        self.schema = load_schema(schema)
        estimate = estimate_columns(self.schema, self.estimate_domain, self.drop)
        self.declaration = declaration_from_schema(self.schema, self.drop, allow_unit=True,
                                                   estimate=estimate)

    def person_bound(self) -> tuple[str | None, int]:
        """(privacy-unit column or None, rows kept per person) from the schema and
        `max_rows_per_unit` through `PublicFacts` (never from the rows): a person unit
        without a bound is refused naming --max-rows-per-unit, as `privlab release` does."""
        from privlab.schema.facts import PublicFacts

        if self.schema is None:
            if self.max_rows_per_unit is not None:
                raise InvalidInputError("--max-rows-per-unit needs --schema with a privacy "
                                        "unit column")
            return None, 1
        facts = PublicFacts.from_schema(self.schema).with_argument(
            "max_rows_per_unit", self.max_rows_per_unit, "--max-rows-per-unit")
        unit, per_unit = facts.person_bound("--max-rows-per-unit")
        if unit is not None and self.method not in ("aim", "mst"):
            raise InvalidInputError(
                f"schema {self.schema.name!r} has privacy unit {unit!r}: --method "
                f"{self.method} protects one row; use --method aim or mst with "
                "--max-rows-per-unit M (per-person accounting)")
        return unit, per_unit

    # ---------------------------------------------------------------- public interface
    def fit(self, data: pd.DataFrame, epsilon: float | None, delta: float = DEFAULT_DELTA,
            *, schema: SchemaLike | None = None, on_invalid: str | None = None
            ) -> Synthesizer:
        """Fit privately at (epsilon, delta); epsilon=None or inf fits a NON-private baseline.
        `schema` / `on_invalid` replace the constructor's."""
        started = time.perf_counter()
        if schema is not None:
            self._set_schema(schema)
        if on_invalid is not None:
            self.on_invalid = check_policy(on_invalid)
        self.warnings = []
        prep = self._prepare(data, epsilon, delta)
        self._gen = prep.gen
        self._fit(prep)
        if not prep.private:
            self._guarantee = PrivacyGuarantee.not_private(self.mechanism, NON_PRIVATE_REASON)
            self.warnings.append("NOT differentially private: " + NON_PRIVATE_REASON)
        else:
            g = self._guarantee.with_covers(*COVERS, *self.covers)  # type: ignore[union-attr]
            estimated = [p.name for p in prep.plans if p.needs_bounds or p.needs_categories]
            if estimated:
                g = g.with_notes("domain of " + ", ".join(estimated) + " estimated under DP "
                                 "(charged, see the budget); the rest is declared (public)")
            if self.account.unit is not None:
                g = g.with_notes(missing_unit_note(self.account.unit))
            if is_seeded(self.rng):
                g = g.with_notes(SEEDED_NOTE)
            self._guarantee = g
        self.fit_seconds = time.perf_counter() - started
        return self

    def conform(self, data: pd.DataFrame) -> pd.DataFrame:
        """The rows fitted: `data` in the declared columns and dtypes, invalid values refused
        or coerced (`on_invalid`). Reads no value to decide any column's kind. With a person
        privacy unit the unit column is kept too (fit bounds each person's rows with it)."""
        if not isinstance(data, pd.DataFrame):
            raise InvalidInputError("data must be a pandas DataFrame")
        return self._conform(data)[1]

    def _conform(self, data: pd.DataFrame) -> tuple[list[ColumnPlan], pd.DataFrame]:
        names = [str(c) for c in data.columns]
        if self.schema is not None:
            # --exclude may name undeclared columns of the data (conform refuses any left) and
            # declared ones (not synthesized); conforming twice (CLI, then fit) is a no-op
            kept = [c.name for c in self.schema.columns if c.name not in self.declaration.drop]
            plans = plan_columns(kept, self.declaration)
            # the privacy-unit column travels along (not synthesized) so that fit can bound
            # each person's rows; conforming twice stays a no-op
            unit, _ = self.person_bound()
            keep = kept + ([unit] if unit is not None and unit not in kept else [])
            frame = conform(data.drop(columns=[c for c in self.drop
                                               if c in names and c != unit]),
                            conform_schema(self.schema, self.declaration), self.on_invalid,
                            columns=keep)
        else:
            plans = plan_columns(names, self.declaration, self.drop)  # refused: NO_SCHEMA
            frame = data
        return plans, frame

    def sample(self, n: int) -> pd.DataFrame:
        """n synthetic rows: post-processing of the DP model, so no further privacy cost."""
        if self.domain is None or self._gen is None:
            raise InvalidInputError("call fit() before sample()")
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) \
                or not 1 <= n <= MAX_SAMPLE_ROWS:
            raise InvalidInputError(f"rows must be an integer in [1, {MAX_SAMPLE_ROWS}], "
                                    f"got {n!r}")
        codes = self._sample_codes(int(n), self._gen)
        return self.domain.decode(codes, self._gen)

    @property
    def guarantee(self) -> PrivacyGuarantee:
        if self._guarantee is None:
            raise InvalidInputError("the synthesizer is not fitted: no guarantee yet")
        return self._guarantee

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "guarantee": self.guarantee.to_dict(),
            "budget": self.budget_lines(),
            "domain": self.domain.to_dict() if self.domain else None,
            "domain_declaration": self.declaration.name,
            "schema": None if self.schema is None else {
                "name": self.schema.name, "fingerprint": self.schema.fingerprint()},
            "on_invalid": self.on_invalid,
            "warnings": list(self.warnings),
            "details": self.details(),
        }

    def details(self) -> dict[str, Any]:
        return {}

    # ---------------------------------------------------------------- for subclasses
    def _fit(self, prep: Prepared) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _sample_codes(self, n: int, gen: np.random.Generator) -> np.ndarray:
        raise NotImplementedError  # pragma: no cover - abstract

    def _prepare(self, data: pd.DataFrame, epsilon: float | None, delta: float) -> Prepared:
        if not isinstance(data, pd.DataFrame):
            raise InvalidInputError("data must be a pandas DataFrame")
        private, epsilon, delta = check_privacy(epsilon, delta)
        plans, frame = self._conform(data)
        unit, per_unit = self.person_bound()
        if unit is not None:
            if private and any(p.needs_bounds or p.needs_categories for p in plans):
                raise InvalidInputError("a privacy unit needs every column's domain declared "
                                        "in the schema (no estimated bounds or categories)")
            # each person's first M rows (the file's order): removing one person removes at
            # most M rows and changes no one else's (docs/synth.md); rows without an id are
            # dropped first (privlab.schema.units)
            frame = bound_per_unit(frame, unit, per_unit)
            frame = frame[[p.name for p in plans]]
        self.account = ZCDPAccount(group=per_unit if private else 1,
                                   unit=unit if private else None)
        if self.missing == "drop":
            frame = frame.dropna()
        frame = frame.reset_index(drop=True)
        if len(frame) == 0:
            raise InvalidInputError("the input has no rows" + (
                " left after dropping rows with missing values" if self.missing == "drop"
                else ""))
        return Prepared(frame, plans, private, float(epsilon), float(delta), make_rng(self.rng))

    def sampler_bound(self, plans: Sequence[ColumnPlan]) -> int:
        """The most discrete-Gaussian draws one row can shift in a fit over `plans`: one per
        count vector measured. Here the domain's (one histogram per estimated column);
        methods add their marginals. Public: the schema and the options only."""
        return sum(1 for p in plans if p.needs_bounds or p.needs_categories)

    def public_plans(self) -> list[ColumnPlan]:
        """The columns a fit will synthesize, from the schema alone (no row read)."""
        if self.schema is None:
            raise InvalidInputError(NO_SCHEMA)
        kept = [c.name for c in self.schema.columns if c.name not in self.declaration.drop]
        return plan_columns(kept, self.declaration)

    def privacy_plan(self, epsilon: float, delta: float,
                     plans: Sequence[ColumnPlan] | None = None) -> PrivacyPlan:
        """The split of a private fit at (epsilon, delta), before any row is read: refused
        (exit 4, one line) when the sampler's reserve cannot fit in delta."""
        plans = self.public_plans() if plans is None else plans
        _, group = self.person_bound()
        threshold = any(p.needs_categories for p in plans)
        delta_thr = delta * THRESHOLD_DELTA_SHARE if threshold else 0.0
        sampler = reserve_for(epsilon, delta - delta_thr, group * self.sampler_bound(plans))
        delta_z = split_delta(delta, delta_thr, sampler.delta)
        return PrivacyPlan(delta_thr, sampler, delta_z, rho_within(sampler.epsilon, delta_z))

    def check_budget(self, epsilon: float, delta: float) -> None:
        """Refuse (exit 4) a private (epsilon, delta) that cannot hold, before any row is
        read (the CLI calls this right after the delta policy). A non-private fit (epsilon
        inf) has nothing to check."""
        if math.isfinite(epsilon):
            self.privacy_plan(epsilon, delta)

    def _private_budget(self, prep: Prepared) -> tuple[float, float, float]:
        """Split a private fit's (epsilon, delta) (`privacy_plan`): the threshold share of
        delta and the bounds/categories shares of rho pay for the domain estimate (built
        here); returns (rho left for the model per row, rho in all per person, delta of the
        zCDP conversion). With M rows per person the model's rho per row is 1/M^2 of its
        share."""
        plan = self.privacy_plan(prep.epsilon, prep.delta, prep.plans)
        self.account.sampler = plan.sampler
        self.account.rho_cap = plan.rho_total
        self._note_calibration(prep.epsilon, plan.sampler)
        rho_total = plan.rho_total
        rho_b = self.bounds_share * rho_total if self.needs_bounds(prep) else 0.0
        rho_c = self.categories_share * rho_total if self.needs_threshold(prep) else 0.0
        self._build_domain(prep, rho_b, rho_c, plan.delta_threshold)
        # per row: a person's M rows make the per-person rho M^2 x the per-row rho
        rho = (rho_total - rho_b - rho_c) * (1 - RHO_MARGIN)
        return rho / self.account.group ** 2, rho_total, plan.delta_z

    def _note_calibration(self, epsilon: float, sampler: SamplerReserve) -> None:
        """Say so when the sampler's step made the fit calibrate below the requested epsilon
        (public: epsilon, delta and the bound)."""
        if sampler.epsilon < epsilon:
            self.warnings.append(
                f"calibrated at epsilon {sampler.epsilon:.4g}, below the requested "
                f"{epsilon:g}: beyond it the discrete-Gaussian sampler's float64 step over "
                f"{sampler.bound} shifted draws would take more than half of delta "
                "(docs/guarantees.md); the guarantee states the smaller epsilon")

    def _build_domain(self, prep: Prepared, rho_bounds: float, rho_categories: float,
                      delta_threshold: float) -> None:
        """Estimate what the declaration leaves open, charging the given budgets."""
        need_b = any(p.needs_bounds for p in prep.plans)
        need_c = any(p.needs_categories for p in prep.plans)
        budget = DomainBudget(
            rho_bounds=rho_bounds if need_b else 0.0,
            rho_categories=rho_categories if need_c else 0.0,
            delta_threshold=delta_threshold if need_c else 0.0,
        )
        self.progress("domain", 0, 1)
        self.domain, warnings = build_domain(
            prep.frame, prep.plans, private=prep.private, budget=budget, account=self.account,
            gen=prep.gen, bins=self.bins, missing=self.missing == "value")
        self.warnings.extend(warnings)
        self.progress("domain", 1, 1)

    def budget_lines(self) -> list[dict[str, Any]]:
        """Every privacy-consuming step of the fit, for reports."""
        return self.account.to_list()

    @staticmethod
    def needs_bounds(prep: Prepared) -> bool:
        return any(p.needs_bounds for p in prep.plans)

    @staticmethod
    def needs_threshold(prep: Prepared) -> bool:
        return any(p.needs_categories for p in prep.plans)
