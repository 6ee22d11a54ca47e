"""The synthesizer interface shared by every method: `fit(df, epsilon, delta)`, `sample(n)`,
`guarantee`; plus input checks and the domain step both methods share."""

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
from privlab.synth.budget import ZCDPAccount
from privlab.synth.domain import (
    DEFAULT_BINS,
    ColumnPlan,
    Domain,
    DomainBudget,
    DomainDeclaration,
    build_domain,
    check_identifiers,
    load_declaration,
    plan_columns,
)

#: Default delta: well below 1/n for tables up to ~10^5 rows; pass a smaller one for more.
DEFAULT_DELTA = 1e-6
#: Share of delta given to the category thresholds when categories are estimated.
THRESHOLD_DELTA_SHARE = 0.1
MAX_SAMPLE_ROWS = 10_000_000

Progress = Callable[[str, int, int], None]

NON_PRIVATE_REASON = ("epsilon=inf: the model is fitted on exact marginals / without gradient "
                      "noise; a baseline for comparison, never for release")


def _no_progress(stage: str, done: int, total: int) -> None:
    return None


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

    def __init__(self, *, domain: str | Path | Mapping[str, Any] | DomainDeclaration | None
                 = None, drop: Sequence[str] = (), bins: int = DEFAULT_BINS,
                 missing: str = "value", bounds_share: float = 0.1,
                 categories_share: float = 0.1, rng: RngLike = None,
                 progress: Progress | None = None) -> None:
        if missing not in ("value", "drop"):
            raise InvalidInputError(f"missing must be \"value\" (a code of its own) or \"drop\" "
                                    f"(drop rows with a missing value), got {missing!r}")
        for name, share in (("bounds_share", bounds_share),
                            ("categories_share", categories_share)):
            if not (isinstance(share, (int, float)) and 0 < share < 0.5):
                raise InvalidInputError(f"{name} must be in (0, 0.5), got {share!r}")
        self.declaration = (domain if isinstance(domain, DomainDeclaration)
                            else load_declaration(domain))
        self.drop = list(drop)
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
        self.fit_seconds = 0.0
        self.rows_in = 0
        self._gen: np.random.Generator | None = None

    # ---------------------------------------------------------------- public interface
    def fit(self, data: pd.DataFrame, epsilon: float | None, delta: float = DEFAULT_DELTA
            ) -> Synthesizer:
        """Fit privately at (epsilon, delta); epsilon=None or inf fits a NON-private baseline."""
        started = time.perf_counter()
        self.account = ZCDPAccount()
        self.warnings = []
        prep = self._prepare(data, epsilon, delta)
        self._gen = prep.gen
        self._fit(prep)
        if not prep.private:
            self._guarantee = PrivacyGuarantee.not_private(self.mechanism, NON_PRIVATE_REASON)
            self.warnings.append("NOT differentially private: " + NON_PRIVATE_REASON)
        elif is_seeded(self.rng):
            self._guarantee = self._guarantee.with_notes(SEEDED_NOTE)  # type: ignore[union-attr]
        self.fit_seconds = time.perf_counter() - started
        return self

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
            "warnings": list(self.warnings),
            "fit_seconds": self.fit_seconds,
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
        private = not (epsilon is None or (isinstance(epsilon, (int, float))
                                           and math.isinf(epsilon) and epsilon > 0))
        if private:
            epsilon = check_epsilon(epsilon)
            delta = check_delta(delta)
            if delta == 0:
                raise InvalidInputError("delta must be > 0: the synthesizers add Gaussian "
                                        "noise (zCDP), which is never (epsilon, 0)-DP")
        else:
            epsilon, delta = math.inf, 0.0
        plans = plan_columns(data, self.declaration, self.drop)
        frame = data[[p.name for p in plans]]
        if self.missing == "drop":
            frame = frame.dropna()
        frame = frame.reset_index(drop=True)
        self.rows_in = len(data)
        if len(frame) == 0:
            raise InvalidInputError("the input has no rows" + (
                " left after dropping rows with missing values" if self.missing == "drop"
                else ""))
        check_identifiers(frame, plans)
        return Prepared(frame, plans, private, float(epsilon), float(delta), make_rng(self.rng))

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
