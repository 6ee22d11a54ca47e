"""Privacy accounting: composition of guarantees, and RDP / PLD accounting of `DpEvent`s.

Three layers:

* closed-form composition of `PrivacyGuarantee`s: `sequential`, `parallel`,
  `advanced_composition` (Dwork-Rothblum-Vadhan 2010) and `optimal_homogeneous_composition`
  (Kairouz-Oh-Viswanath 2015, exact for k-fold (eps, delta)-DP);
* Google's `dp_accounting` event algebra (`GaussianDpEvent`, `PoissonSampledDpEvent`,
  `SelfComposedDpEvent`, `ComposedDpEvent`, `LaplaceDpEvent`, ...) re-exported here, with
  `epsilon_for` / `delta_for` that run the RDP or PLD accountant on an event;
* DP-SGD helpers: `dpsgd_event`, `dpsgd_epsilon`, `calibrate_noise_multiplier`,
  `guarantee_for_dpsgd`.

Why the PLD resolution is chosen here and not left at dp-accounting's default (1e-4): the
pessimistic PLD is an upper bound at every resolution, so a coarse grid is always *valid*,
only looser. We refine the grid (halving it) until two consecutive estimates agree to
`rel_accuracy`; calibration brackets sigma on coarse grids first and solves on the fine one
last. For Poisson-subsampled Gaussians the PLD comes from `pld_adapter` (a vectorised build,
the only code that reads dp-accounting's private names, with a public fallback); everything
else uses dp-accounting's public API. docs/accounting.md has the measured trade-off.

One module per accountant, this package re-exporting their public names (the import path
`privlab.core.accounting` is unchanged): `composition` (sequential, parallel),
`homogeneous` (advanced and optimal k-fold composition), `pld` and `rdp` (the two event
accountants), `events` (`epsilon_for` / `delta_for` over either), `dpsgd` (DP-SGD's event,
epsilon, calibration and guarantee); `base` holds the argument checks they share.
"""

from dp_accounting import (
    ComposedDpEvent,
    DpEvent,
    GaussianDpEvent,
    LaplaceDpEvent,
    NonPrivateDpEvent,
    PoissonSampledDpEvent,
    SelfComposedDpEvent,
)

from privlab.core.accounting.base import DEFAULT_REL_ACCURACY, DEFAULT_SIGMA_TOL
from privlab.core.accounting.composition import parallel, sequential
from privlab.core.accounting.dpsgd import (
    NoiseCalibration,
    calibrate_dpsgd,
    calibrate_noise_multiplier,
    dpsgd_epsilon,
    dpsgd_event,
    guarantee_for_dpsgd,
)
from privlab.core.accounting.events import delta_for, epsilon_for
from privlab.core.accounting.homogeneous import (
    advanced_composition,
    optimal_homogeneous_composition,
)
from privlab.core.accounting.pld import pld_label

__all__ = [
    "ComposedDpEvent", "DpEvent", "GaussianDpEvent", "LaplaceDpEvent", "NonPrivateDpEvent",
    "PoissonSampledDpEvent", "SelfComposedDpEvent",
    "sequential", "parallel", "advanced_composition", "optimal_homogeneous_composition",
    "epsilon_for", "delta_for", "dpsgd_event", "dpsgd_epsilon", "calibrate_noise_multiplier",
    "calibrate_dpsgd", "NoiseCalibration", "guarantee_for_dpsgd", "pld_label",
    "DEFAULT_REL_ACCURACY", "DEFAULT_SIGMA_TOL",
]
