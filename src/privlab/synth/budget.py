"""zCDP bookkeeping for synthesizers: every measurement is a line with its rho (and delta).

Why zCDP: the marginal measurements are Gaussian (rho = 1/(2 sigma^2) per sensitivity-1
count vector), the exponential mechanism at epsilon is eps^2/8-zCDP (bounded range; Cesar &
Rogers 2021, Lemma 3.2 / Rogers & Steinke 2021), and zCDP composes by adding rho
(Bun & Steinke 2016, Lemma 2.3). The total converts to (epsilon, delta) with the tight
conversion of Canonne, Kamath & Steinke 2020 (`zcdp_to_approx_dp`).

Thresholded category selection is "delta'-approximate zCDP" (Bun & Steinke 2016, Def. 8.1):
conditioned on a label held by one record not clearing the threshold (probability >=
1 - delta'), the rest is rho-zCDP. Approximate zCDP composes by adding rho and delta'
(ibid., Lemma 8.3), so the final guarantee is (eps(rho_total, delta_z), delta_z + delta').
A pure epsilon-DP step could be added as rho = eps^2/2 (Bun & Steinke 2016, Prop. 1.4).

The discrete-Gaussian sampler's float64 acceptance step puts its output within total
variation GAUSSIAN_SAMPLER_TV of the exact one per draw, which adds
`sampler_delta(epsilon, draws)` to delta (docs/guarantees.md). Every step records how many
draws it made; `sampler_reserve` is the share of the requested delta set aside for that
before rho was calibrated, and the guarantee charges max(reserve, slack): the requested
delta whenever the draws fit the reserve, the larger, true figure when they do not. A draw
count read from the rows (one draw per distinct value of an estimated categorical column,
`private_draws`) then shows through that delta, so the guarantee names it in `not_covered`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from privlab.core.calibration import zcdp_to_approx_dp
from privlab.core.guarantee import PrivacyGuarantee
from privlab.core.samplers import sampler_delta

#: Share of a synthesizer's zCDP delta reserved for the sampler's float64 step (1%: at
#: delta 1e-6 and epsilon 1 that covers about 2.7e5 discrete-Gaussian draws).
SAMPLER_DELTA_SHARE = 0.01

ZCDP_ACCOUNTANT = ("zCDP (Bun & Steinke 2016): rho summed over measurements, converted to "
                   "(epsilon, delta) by Canonne, Kamath & Steinke 2020, Prop. 12")


@dataclass(frozen=True)
class Step:
    """One measurement: what it measured, its rho, its approximate-zCDP delta."""

    name: str
    rho: float
    delta: float = 0.0
    detail: str = ""
    #: discrete-Gaussian draws made (never printed)
    draws: int = 0
    #: the draw count was read from the rows (distinct values), not from public facts
    private_draws: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"step": self.name, "rho": self.rho, "delta": self.delta, "detail": self.detail}


@dataclass
class ZCDPAccount:
    """The running list of measurements of one synthesizer fit."""

    steps: list[Step] = field(default_factory=list)
    #: rows one person may contribute (1: each row is a person). A measurement that is
    #: rho-zCDP for one row is (group^2 rho)-zCDP for `group` rows (Bun & Steinke 2016,
    #: Prop. 1.9), so `spend` records the per-person rho: group^2 x the per-row rho.
    group: int = 1
    unit: str | None = None
    #: delta set aside for the sampler's float64 step (see the module docstring)
    sampler_reserve: float = 0.0

    def spend(self, name: str, rho: float, delta: float = 0.0, detail: str = "", *,
              draws: int, private_draws: bool = False) -> None:
        """Record one measurement that is `rho`-zCDP per row (per person: group^2 rho) and
        made `draws` discrete-Gaussian draws (0 for other mechanisms)."""
        if not (rho >= 0 and math.isfinite(rho)) or not (0 <= delta < 1):
            raise ValueError(f"bad budget step {name}: rho={rho}, delta={delta}")
        if isinstance(draws, bool) or not isinstance(draws, int) or draws < 0:
            raise ValueError(f"bad budget step {name}: draws={draws!r}")
        if self.group != 1 and delta != 0:
            raise ValueError(f"budget step {name}: an approximate-zCDP step has no group "
                             "bound here")
        self.steps.append(Step(name, float(rho) * self.group ** 2, float(delta), detail,
                               draws, private_draws))

    @property
    def rho(self) -> float:
        return math.fsum(s.rho for s in self.steps)

    @property
    def delta(self) -> float:
        return math.fsum(s.delta for s in self.steps)

    @property
    def draws(self) -> int:
        return sum(s.draws for s in self.steps)

    def sampler_slack(self, epsilon: float) -> float:
        """delta the sampler's float64 step adds to an (epsilon, .) claim over every draw."""
        return sampler_delta(epsilon, self.draws) if self.draws else 0.0

    def epsilon(self, delta_z: float) -> float:
        return zcdp_to_approx_dp(self.rho, delta_z)

    def guarantee(self, delta_z: float, mechanism: str, notes: tuple[str, ...] = ()
                  ) -> PrivacyGuarantee:
        """(epsilon, delta) of everything spent, add/remove-one-record neighbours."""
        eps = self.epsilon(delta_z)
        slack = self.sampler_slack(eps)
        charged = max(slack, self.sampler_reserve)
        if slack <= self.sampler_reserve:
            # the slack itself is not printed: it follows the number of draws, which may
            # depend on the data (distinct values of an estimated categorical column)
            sampler = (f"delta includes {charged:.3g} reserved for the discrete-Gaussian "
                       "sampler's float64 acceptance step, enough for every draw made "
                       "(docs/guarantees.md)")
        else:
            sampler = (f"delta includes {charged:.3g} for the discrete-Gaussian sampler's "
                       f"float64 acceptance step ({self.sampler_reserve:.3g} was reserved; the "
                       "figure grows with the number of draws made, docs/guarantees.md)")
        leaked = () if slack <= self.sampler_reserve or not any(
            s.private_draws for s in self.steps) else (
            "delta's sampler share (beyond the reserve it counts the draws, one per distinct "
            "value of an estimated categorical column: declare its categories)",)
        lines = tuple(f"{s.name}: rho={s.rho:.4g}" + (f", delta={s.delta:.3g}" if s.delta else "")
                      for s in self.steps)
        if self.unit is not None:
            notes = (f"privacy unit {self.unit!r}: each person's rows are bounded to their "
                     f"first {self.group}; every measurement is rho/{self.group}^2-zCDP per "
                     f"row, so rho-zCDP per person (group privacy); the rho above are per "
                     "person",) + notes
        return PrivacyGuarantee(
            epsilon=eps, delta=delta_z + self.delta + charged,
            neighbouring="user" if self.unit is not None else "add_remove_record",
            model="central", mechanism=mechanism,
            accountant=(ZCDP_ACCOUNTANT if self.unit is None else
                        f"group privacy over {self.group} rows per person ({ZCDP_ACCOUNTANT})"),
            notes=(f"total rho={self.rho:.6g}; zCDP part converted at delta={delta_z:.3g}",)
            + lines + (sampler,) + notes, not_covered=leaked)

    def to_list(self) -> list[dict[str, Any]]:
        return [s.to_dict() for s in self.steps]
