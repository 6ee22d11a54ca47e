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

The discrete-Gaussian sampler's float64 acceptance step puts each draw within total
variation GAUSSIAN_SAMPLER_TV (tau) of the exact one. Only the draws whose mean one person's
rows can move matter (docs/guarantees.md, "the sampler reserve"): on two neighbouring tables
every other draw adds noise to the same count, so it has the same distribution on both. A
record is one cell of each count vector (a marginal, one column's category or bound
histogram), so a step shifts at most one draw per vector per row; with M rows per person,
M. Before any row is read, each method bounds that number for its whole fit from public
facts (`sampler_bound`: columns, rounds, rows per person), and `reserve_for` sets aside
(1 + e^eps) tau N of the requested delta, calibrating at a smaller epsilon where that would
take more than half of it (as `gaussian_mechanism` does) and refusing (exit 4) where no
epsilon fits. The reported (epsilon, delta) is then the same on every seed and every
neighbour, and never above the request.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from privlab.core.calibration import rho_for_target, zcdp_to_approx_dp
from privlab.core.guarantee import PrivacyGuarantee
from privlab.core.samplers import GAUSSIAN_SAMPLER_TV, sampler_delta
from privlab.errors import UnsafeConfigurationError

#: Most of the delta (after the thresholds' share) the sampler's float64 step may take;
#: beyond it epsilon is calibrated lower, as `gaussian_mechanism` does.
SAMPLER_DELTA_CAP = 0.5


def rho_within(epsilon: float, delta: float) -> float:
    """`rho_for_target`, stepped down until its conversion is at most epsilon: brentq's
    absolute tolerance can leave it a few 1e-9 above at tiny epsilon, and the guarantee
    states this conversion (it must not exceed the epsilon the reserve was sized for)."""
    rho = rho_for_target(epsilon, delta)
    while zcdp_to_approx_dp(rho, delta) > epsilon:
        rho *= 1 - 1e-7
    return rho


@dataclass(frozen=True)
class SamplerReserve:
    """What a fit sets aside for the sampler's float64 step, from public facts only."""

    #: the most discrete-Gaussian draws one person's rows can shift in the whole fit
    bound: int
    #: the epsilon the fit is calibrated at (the requested one unless the step needs more)
    epsilon: float
    #: delta set aside: sampler_delta(epsilon, bound)
    delta: float


def reserve_for(epsilon: float, delta: float, bound: int) -> SamplerReserve:
    """The reserve for `bound` shifted draws out of `delta` (the delta left after the
    thresholds): (1 + e^eps) tau bound at the requested epsilon, or at the eps0 < epsilon
    where it is half of `delta` ((eps0, delta)-DP implies (epsilon, delta)-DP); refused when
    even eps0 near 0 does not fit (exit 4)."""
    if bound <= 0:
        return SamplerReserve(0, epsilon, 0.0)
    room = SAMPLER_DELTA_CAP * delta / (bound * GAUSSIAN_SAMPLER_TV) - 1
    if room <= 1:
        raise UnsafeConfigurationError(
            f"--delta {delta:g} is too small for this synthesizer: the discrete-Gaussian "
            f"sampler's float64 step over its {bound} shifted draws alone may add "
            f"{sampler_delta(0.0, bound):.2g} (docs/guarantees.md); use a larger --delta")
    eps = min(epsilon, math.log(room))
    return SamplerReserve(bound, eps, sampler_delta(eps, bound))

ZCDP_ACCOUNTANT = ("zCDP (Bun & Steinke 2016): rho summed over measurements, converted to "
                   "(epsilon, delta) by Canonne, Kamath & Steinke 2020, Prop. 12")


@dataclass(frozen=True)
class Step:
    """One measurement: what it measured, its rho, its approximate-zCDP delta."""

    name: str
    rho: float
    delta: float = 0.0
    detail: str = ""
    #: discrete-Gaussian draws one person's rows can shift (one per count vector per row)
    shifted: int = 0

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
    #: delta set aside for the sampler's float64 step, sized before any row was read
    sampler: SamplerReserve = SamplerReserve(0, math.inf, 0.0)
    #: the rho (per person) the fit was calibrated for: the guarantee states its epsilon,
    #: the same on every run (the steps must not sum above it)
    rho_cap: float = math.inf

    def spend(self, name: str, rho: float, delta: float = 0.0, detail: str = "", *,
              vectors: int) -> None:
        """Record one measurement that is `rho`-zCDP per row (per person: group^2 rho) and
        added discrete-Gaussian noise to `vectors` count vectors (0 for other mechanisms):
        one row shifts one draw of each, so a person shifts group x vectors draws."""
        if not (rho >= 0 and math.isfinite(rho)) or not (0 <= delta < 1):
            raise ValueError(f"bad budget step {name}: rho={rho}, delta={delta}")
        if isinstance(vectors, bool) or not isinstance(vectors, int) or vectors < 0:
            raise ValueError(f"bad budget step {name}: vectors={vectors!r}")
        if self.group != 1 and delta != 0:
            raise ValueError(f"budget step {name}: an approximate-zCDP step has no group "
                             "bound here")
        self.steps.append(Step(name, float(rho) * self.group ** 2, float(delta), detail,
                               vectors * self.group))

    @property
    def rho(self) -> float:
        return math.fsum(s.rho for s in self.steps)

    @property
    def delta(self) -> float:
        return math.fsum(s.delta for s in self.steps)

    @property
    def shifted(self) -> int:
        return sum(s.shifted for s in self.steps)

    def epsilon(self, delta_z: float) -> float:
        """The epsilon of the zCDP part: at the calibrated rho when the fit planned one
        (the same on every run), else at the rho spent."""
        return zcdp_to_approx_dp(self.rho if math.isinf(self.rho_cap) else self.rho_cap,
                                 delta_z)

    def guarantee(self, delta_z: float, mechanism: str, notes: tuple[str, ...] = ()
                  ) -> PrivacyGuarantee:
        """(epsilon, delta) of everything spent, add/remove-one-record neighbours."""
        if self.rho > self.rho_cap or self.shifted > self.sampler.bound:
            # a bug, never a property of the rows: every bound is set from public facts
            raise RuntimeError(f"the fit spent rho={self.rho!r} over {self.shifted} shifted "
                               f"draws, above its plan ({self.rho_cap!r}, "
                               f"{self.sampler.bound})")
        eps = self.epsilon(delta_z)
        if self.shifted and sampler_delta(eps, self.sampler.bound) > self.sampler.delta:
            raise RuntimeError(f"the sampler reserve {self.sampler.delta!r} does not cover "
                               f"{self.sampler.bound} draws at epsilon {eps!r}")
        sampler = () if not self.sampler.bound else (
            f"delta includes {self.sampler.delta:.3g} for the discrete-Gaussian sampler's "
            f"float64 acceptance step: (1 + e^eps) x {GAUSSIAN_SAMPLER_TV:g} x "
            f"{self.sampler.bound}, the most draws one person can shift in this fit (public: "
            "columns, rounds, rows per person; docs/guarantees.md)",)
        lines = tuple(f"{s.name}: rho={s.rho:.4g}" + (f", delta={s.delta:.3g}" if s.delta else "")
                      for s in self.steps)
        if self.unit is not None:
            notes = (f"privacy unit {self.unit!r}: each person's rows are bounded to their "
                     f"first {self.group}; every measurement is rho/{self.group}^2-zCDP per "
                     f"row, so rho-zCDP per person (group privacy); the rho above are per "
                     "person",) + notes
        return PrivacyGuarantee(
            epsilon=eps, delta=math.fsum([delta_z, self.delta, self.sampler.delta]),
            neighbouring="user" if self.unit is not None else "add_remove_record",
            model="central", mechanism=mechanism,
            accountant=(ZCDP_ACCOUNTANT if self.unit is None else
                        f"group privacy over {self.group} rows per person ({ZCDP_ACCOUNTANT})"),
            notes=(f"total rho={self.rho:.6g}; zCDP part converted at delta={delta_z:.3g}",)
            + lines + sampler + notes)

    def to_list(self) -> list[dict[str, Any]]:
        return [s.to_dict() for s in self.steps]
