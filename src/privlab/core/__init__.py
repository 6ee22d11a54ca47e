"""The DP core: grid-valued samplers, mechanisms, queries, sensitivities, guarantees,
accountants, ledger."""

from privlab.core import sensitivity
from privlab.core.guarantee import PrivacyGuarantee
from privlab.core.mechanisms import (
    exponential_mechanism,
    gaussian_mechanism,
    geometric_mechanism,
    laplace_mechanism,
    randomized_response,
    report_noisy_max,
)
from privlab.core.queries import dp_count, dp_histogram, dp_mean, dp_quantile, dp_sum
from privlab.core.release import Release
from privlab.core.rng import make_rng, secure_generator
from privlab.core.sensitivity import Sensitivity

__all__ = [
    "PrivacyGuarantee", "Release", "make_rng", "secure_generator",
    "laplace_mechanism", "gaussian_mechanism", "geometric_mechanism", "exponential_mechanism",
    "report_noisy_max", "randomized_response",
    "dp_count", "dp_sum", "dp_mean", "dp_histogram", "dp_quantile",
    "sensitivity", "Sensitivity",
]
