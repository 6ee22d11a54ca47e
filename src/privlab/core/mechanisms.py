"""DP mechanisms on grid-valued samplers: Laplace, Gaussian, geometric, exponential,
report-noisy-max and k-ary randomized response. Each returns a `Release` with its guarantee.

Rounding onto the grid is part of the mechanism and is paid for: two neighbouring true
values x, y with |x - y| <= D round to grid points at most floor(D/g) + 1 steps apart (per
changed coordinate), so the noise is calibrated to that grid sensitivity. With the default
grid g = 2^floor(log2(D / 1024 m)) this costs at most ~0.1% more noise than the ideal
continuous mechanism, and the stated epsilon is exact for the discrete mechanism.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np

from privlab.core.calibration import discrete_gaussian_sigma, rho_for_target
from privlab.core.guarantee import Model, PrivacyGuarantee, check_delta, check_epsilon
from privlab.core.release import Release
from privlab.core.rng import SEEDED_NOTE, RngLike, is_seeded, make_rng
from privlab.core.samplers import (
    GAUSSIAN_SAMPLER_TV,
    discrete_gaussian,
    discrete_laplace,
    discrete_laplace_ints,
    laplace_scale_at_least,
    power_of_two_at_most,
    round_to_grid,
    sampler_delta,
)
from privlab.core.sensitivity import check_sensitivity as _check_sensitivity
from privlab.errors import InvalidInputError

_T = TypeVar("_T")

GRID_RESOLUTION = 1024


def _notes(rng: RngLike, *extra: str) -> tuple[str, ...]:
    return tuple(e for e in extra if e) + ((SEEDED_NOTE,) if is_seeded(rng) else ())


def _grid(sensitivity: float, changed: int, granularity: float | None,
          integer_valued: bool) -> tuple[float, float, bool]:
    """Pick the grid and return (granularity, grid sensitivity per changed coordinate, exact)."""
    if granularity is not None:
        g = _check_sensitivity(granularity)
    elif integer_valued:
        g = 1.0
    else:
        g = power_of_two_at_most(sensitivity / (GRID_RESOLUTION * changed))
    # Integer values on the unit grid need no rounding, so the grid sensitivity is D itself.
    # On any other grid (even an integer one: 1 and 3 round to 0 and 4 on the grid 2Z)
    # rounding can add one step: floor(D / g) + 1.
    exact = integer_valued and g == 1.0 and float(sensitivity).is_integer()
    return g, (int(sensitivity) if exact else math.floor(sensitivity / g) + 1), exact


def _check_integral(arr: np.ndarray, exact: bool) -> None:
    """Integer data on the unit grid is charged D, not floor(D) + 1: only if it IS integer."""
    if exact and arr.size and not np.all(arr == np.rint(arr)):
        raise InvalidInputError("integer_valued=True but a value is not an integer: round the "
                                "data first or leave integer_valued off")


def _changed(changed_coordinates: int | None, size: int, scalar: bool) -> int:
    """How many coordinates one neighbour can change (1 for a scalar; default: all)."""
    if scalar:
        return 1
    if changed_coordinates is None:
        return max(size, 1)
    if int(changed_coordinates) != changed_coordinates or changed_coordinates < 1:
        raise InvalidInputError(f"changed_coordinates must be a positive integer, "
                                f"got {changed_coordinates!r}")
    return int(changed_coordinates)


def _finish(values: np.ndarray, scalar: bool) -> Any:
    return values.reshape(()).item() if scalar else values


def _cached(plan: Callable[..., _T]) -> Callable[..., _T]:
    """`plan` memoised on its (public) arguments: a calibration is a pure function of them,
    and the gateway asks for the same few thousands of times (a discrete-Gaussian sigma is
    a root search, ~2 ms). Small and per process; exact types in the key (1 and 1.0 and
    True stay apart); an unhashable argument is calibrated uncached (and refused there)."""
    memo = functools.lru_cache(maxsize=256, typed=True)(plan)

    @functools.wraps(plan)
    def calibrate(*args: Any, **kwargs: Any) -> _T:
        try:
            hash((args, tuple(kwargs.items())))
        except TypeError:
            return plan(*args, **kwargs)
        return memo(*args, **kwargs)

    calibrate.cache_info = memo.cache_info  # type: ignore[attr-defined]
    return calibrate


def draw_on_grid(arr: np.ndarray, granularity: float, steps: float, *, gaussian: bool,
                 exact: bool, integer_valued: bool, rng: RngLike) -> np.ndarray:
    """The draw of a calibrated discrete Laplace (`steps` = its scale in grid steps) or
    discrete Gaussian (`steps` = sigma in grid steps): `arr` rounded onto the grid plus the
    noise, in the value's units (int64 for integer data on the unit grid). The mechanisms
    below and the gateway's `QueryMeasurement` (calibrated once per query shape) share it,
    so a calibration made ahead of the data draws exactly what the mechanism would."""
    if arr.ndim == 0:
        return _draw_one(float(arr), granularity, steps, gaussian=gaussian, exact=exact,
                         integer_valued=integer_valued, rng=rng)
    _check_integral(arr, exact)
    gen = make_rng(rng)
    sampler = discrete_gaussian if gaussian else discrete_laplace
    noisy = round_to_grid(arr, granularity) + sampler(steps, size=arr.shape or None, rng=gen)
    out = np.asarray(noisy, dtype=np.float64) * granularity
    return out.astype(np.int64) if (integer_valued and granularity == 1.0) else out


def draw_few_on_grid(values: list[float], granularity: float, steps: float, *,
                     gaussian: bool, exact: bool, rng: RngLike) -> list[float]:
    """`draw_on_grid` of a short vector as float64, in Python numbers: the same checks (a
    value that fails one goes to `draw_on_grid`, which raises its message), ONE sampler call
    for all values (the same draws from `rng`) and the same values, without a dozen NumPy
    calls on a handful of cells (the gateway's GROUP BY answers, issue 32)."""
    multiples = []
    for x in values:
        q = x / granularity
        if (not math.isfinite(x) or (exact and x != round(x)) or not math.isfinite(q)
                or abs(round(q)) > 2**52):
            out = draw_on_grid(np.array(values, dtype=np.float64), granularity, steps,
                               gaussian=gaussian, exact=exact, integer_valued=False, rng=rng)
            return out.tolist()  # type: ignore[no-any-return]
        multiples.append(round(q))
    gen = make_rng(rng)
    n = len(values)
    noise = discrete_gaussian(steps, size=n, rng=gen).tolist() if gaussian \
        else discrete_laplace_ints(steps, n, gen)
    return [float(k + z) * granularity for k, z in zip(multiples, noise, strict=True)]


def _draw_one(x: float, granularity: float, steps: float, *, gaussian: bool, exact: bool,
              integer_valued: bool, rng: RngLike) -> Any:
    """`draw_on_grid` of one value in Python numbers: the same checks in the same order
    with the same messages, the same draw from `rng` and the same result, without the dozen
    NumPy calls on a 0-d array that cost more than the draw (the gateway's scalar query,
    issue 32)."""
    out = np.float64(draw_one_float(x, granularity, steps, gaussian=gaussian, exact=exact,
                                    rng=rng))
    return out.astype(np.int64) if (integer_valued and granularity == 1.0) else out


def draw_one_float(x: float, granularity: float, steps: float, *, gaussian: bool, exact: bool,
                   rng: RngLike) -> float:
    """`_draw_one` as a Python float (what a float64 array of its result holds: an integer
    on the unit grid is exact in a float), for callers that keep the value in Python (the
    gateway's scalar answer). `round` is round-half-even, as `np.rint` is."""
    if exact and (x != x or (not math.isinf(x) and x != round(x))):
        _check_integral(np.asarray(x), exact)  # raises: the one message
    gen = make_rng(rng)
    if not math.isfinite(x):
        round_to_grid(x, granularity)  # raises: not finite
    q = x / granularity
    if not math.isfinite(q) or abs(round(q)) > 2**52:
        round_to_grid(x, granularity)  # raises: too many grid steps
    sampler = discrete_gaussian if gaussian else discrete_laplace
    noisy = round(q) + int(sampler(steps, size=None, rng=gen))
    return float(noisy) * granularity


@_cached
def laplace_plan(sensitivity: float, epsilon: float, changed: int = 1,
                 granularity: float | None = None, integer_valued: bool = False
                 ) -> tuple[float, float, bool, float]:
    """The discrete Laplace's calibration from public inputs alone, before any value is seen:
    (grid g, grid L1 sensitivity in steps, exact, scale in grid steps). `laplace_mechanism`
    draws with exactly this, so a measurement can state its noise before reading a row.
    Memoised (`_cached`)."""
    epsilon = check_epsilon(epsilon)
    sensitivity = _check_sensitivity(sensitivity)
    g, grid_sens, exact = _grid(sensitivity, changed, granularity, integer_valued)
    l1_grid = grid_sens if exact or changed == 1 else math.floor(sensitivity / g) + changed
    return g, l1_grid, exact, laplace_scale_at_least(l1_grid, epsilon)


def laplace_mechanism(
    value: float | Sequence[float] | np.ndarray,
    sensitivity: float,
    epsilon: float,
    *,
    rng: RngLike = None,
    granularity: float | None = None,
    integer_valued: bool = False,
    changed_coordinates: int | None = None,
    neighbouring: str = "add_remove_record",
    model: Model = "central",
    mechanism_name: str = "laplace",
) -> Release:
    """epsilon-DP release of `value` (scalar or vector) with L1 `sensitivity`.

    `changed_coordinates` bounds how many coordinates one neighbour can change (1 for a
    histogram under add/remove; default: all), which sets the cost of grid rounding.
    """
    epsilon = check_epsilon(epsilon)
    sensitivity = _check_sensitivity(sensitivity)
    arr = np.asarray(value, dtype=np.float64)
    scalar = arr.ndim == 0
    m = _changed(changed_coordinates, arr.size, scalar)
    g, l1_grid, exact, scale_steps = laplace_plan(sensitivity, epsilon, m, granularity,
                                                  integer_valued)
    out = draw_on_grid(arr, g, scale_steps, gaussian=False, exact=exact,
                       integer_valued=integer_valued, rng=rng)
    guarantee = PrivacyGuarantee(
        epsilon=epsilon, delta=0.0, neighbouring=neighbouring, model=model,
        mechanism=f"{mechanism_name} (discrete Laplace on grid {g:g})", accountant="exact",
        notes=_notes(rng, "" if exact else
                     f"rounding to grid {g:g} accounted: grid L1 sensitivity {l1_grid} steps"),
    )
    return Release(
        value=_finish(out, scalar), guarantee=guarantee, granularity=g,
        noise={"distribution": "discrete_laplace", "scale": scale_steps * g,
               "sensitivity": sensitivity},
    )


def geometric_mechanism(value: int | Sequence[int] | np.ndarray, sensitivity: int,
                        epsilon: float, **kwargs: Any) -> Release:
    """epsilon-DP release of integers (counts) with integer sensitivity: the two-sided geometric."""
    sens = _check_sensitivity(sensitivity)
    if not sens.is_integer():
        raise InvalidInputError("the geometric mechanism needs an integer sensitivity")
    arr = np.asarray(value, dtype=np.float64)
    if arr.size and not np.all(np.equal(np.mod(arr, 1), 0)):
        raise InvalidInputError("the geometric mechanism releases integers; value must be integral")
    return laplace_mechanism(value, sensitivity, epsilon, integer_valued=True,
                             mechanism_name="geometric", **kwargs)


@_cached
def gaussian_plan(sensitivity: float, epsilon: float, delta: float, changed: int = 1,
                  draws: int = 1, granularity: float | None = None,
                  integer_valued: bool = False) -> tuple[float, bool, float, float, float, str]:
    """The discrete Gaussian's calibration from public inputs alone (`draws`: how many
    coordinates are released): (grid g, exact, sigma in grid steps, the sampler's delta
    slack, the epsilon sigma is calibrated at, how). `gaussian_mechanism` draws with it.
    Memoised (`_cached`): the root search runs once per distinct set of arguments."""
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    if delta == 0:
        raise InvalidInputError("delta must be > 0 for the Gaussian mechanism; use laplace")
    sensitivity = _check_sensitivity(sensitivity)
    m = changed
    g, grid_sens, exact = _grid(sensitivity, m, granularity, integer_valued)
    # The sampler's float64 acceptance step may add a tiny, data-independent delta,
    # (1 + e^eps0) x samples x GAUSSIAN_SAMPLER_TV: it is charged inside the stated delta (sigma
    # is calibrated for what is left) at an eps0 <= epsilon that keeps it below delta / 2
    # (only a very large epsilon needs eps0 < epsilon; (eps0, delta)-DP implies (epsilon, delta)).
    room = delta / (2 * draws * GAUSSIAN_SAMPLER_TV) - 1
    if room <= 1:
        raise InvalidInputError(f"delta {delta:g} is too small for {draws} discrete-Gaussian "
                                f"draws: the sampler's float64 step alone may add about "
                                f"{sampler_delta(0.0, draws):.2g}; use a larger delta or laplace")
    eps_cal = min(epsilon, math.log(room))
    slack = sampler_delta(eps_cal, draws)
    target = delta - slack
    if m == 1:
        sigma_steps = discrete_gaussian_sigma(int(grid_sens), eps_cal, target)
        how = "exact discrete-Gaussian privacy profile"
    else:
        rho = rho_for_target(eps_cal, target)
        while True:
            l2_grid = sensitivity / g + (0 if exact else math.sqrt(m))
            sigma_steps = l2_grid / math.sqrt(2 * rho)
            if sigma_steps >= 16 or granularity is not None:
                break
            # Too little noise in grid steps for the bound: refine the default grid. Integer
            # data stays exactly on a finer power-of-two grid, so `exact` still holds.
            g /= 2
        how = "zCDP (CKS Thm 14) with tight conversion"
        if sigma_steps < 16:
            raise InvalidInputError("granularity too coarse for the multivariate discrete "
                                    "Gaussian bound; pass a finer granularity")
    return g, exact, sigma_steps, slack, eps_cal, how


def gaussian_mechanism(
    value: float | Sequence[float] | np.ndarray,
    sensitivity: float,
    epsilon: float,
    delta: float,
    *,
    rng: RngLike = None,
    granularity: float | None = None,
    integer_valued: bool = False,
    changed_coordinates: int | None = None,
    neighbouring: str = "add_remove_record",
    model: Model = "central",
) -> Release:
    """(epsilon, delta)-DP release with the discrete Gaussian at L2 `sensitivity`.

    One changed coordinate (a scalar or a histogram): sigma from the exact discrete-Gaussian
    privacy profile (CKS 2020, Thm 7). Several: sigma from rho-zCDP (CKS Thm 14, on a grid
    fine enough that its tau term is below 1e-300) converted with the tight RDP bound.
    """
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    if delta == 0:
        raise InvalidInputError("delta must be > 0 for the Gaussian mechanism; use laplace")
    sensitivity = _check_sensitivity(sensitivity)
    arr = np.asarray(value, dtype=np.float64)
    scalar = arr.ndim == 0
    m = _changed(changed_coordinates, arr.size, scalar)
    g, exact, sigma_steps, slack, eps_cal, how = gaussian_plan(
        sensitivity, epsilon, delta, m, max(arr.size, 1), granularity, integer_valued)
    out = draw_on_grid(arr, g, sigma_steps, gaussian=True, exact=exact,
                       integer_valued=integer_valued, rng=rng)
    guarantee = PrivacyGuarantee(
        epsilon=epsilon, delta=delta, neighbouring=neighbouring, model=model,
        mechanism=f"gaussian (discrete Gaussian on grid {g:g})", accountant=how,
        notes=_notes(rng, "" if exact else f"rounding to grid {g:g} accounted in sensitivity",
                     f"delta includes {slack:.2g} for the sampler's float64 acceptance step "
                     "(docs/guarantees.md)"
                     + ("" if eps_cal == epsilon else f"; sigma calibrated at epsilon "
                        f"{eps_cal:.4g} to leave room for it")),
    )
    return Release(
        value=_finish(out, scalar), guarantee=guarantee, granularity=g,
        noise={"distribution": "discrete_gaussian", "scale": sigma_steps * g,
               "sensitivity": sensitivity},
    )


def exponential_mechanism(
    candidates: Sequence[Any],
    scores: Sequence[float] | np.ndarray,
    sensitivity: float,
    epsilon: float,
    *,
    method: str = "permute_and_flip",
    monotonic: bool = False,
    rng: RngLike = None,
    neighbouring: str = "add_remove_record",
) -> Release:
    """Select a candidate with probability increasing in its score (epsilon-DP).

    `permute_and_flip` (McKenna & Sheldon 2020) never does worse than the classic exponential
    mechanism; `gumbel` is the classic one (argmax of score * eps / (2 D) + Gumbel noise).
    `monotonic=True` (scores move in one direction between neighbours, e.g. counts) halves
    the factor of 2 in the exponent.
    """
    epsilon = check_epsilon(epsilon)
    sensitivity = _check_sensitivity(sensitivity)
    u = np.asarray(scores, dtype=np.float64)
    if u.ndim != 1 or u.size == 0 or u.size != len(candidates):
        raise InvalidInputError("scores must be a non-empty 1-D array, one score per candidate")
    if not np.all(np.isfinite(u)):
        raise InvalidInputError("scores must be finite")
    factor = epsilon / ((1 if monotonic else 2) * sensitivity)
    gen = make_rng(rng)
    if method == "gumbel":
        index = int(np.argmax(u * factor + gen.gumbel(size=u.size)))
    elif method == "permute_and_flip":
        best = u.max()
        accept = np.exp(factor * (u - best))
        index = -1
        while index < 0:
            for i in gen.permutation(u.size):
                if gen.random() <= accept[i]:
                    index = int(i)
                    break
    else:
        raise InvalidInputError("method must be 'permute_and_flip' or 'gumbel'")
    guarantee = PrivacyGuarantee(epsilon=epsilon, neighbouring=neighbouring,
                                 mechanism=f"exponential ({method})", accountant="exact",
                                 notes=_notes(rng))
    return Release(value=candidates[index], guarantee=guarantee, details={"index": index})


def report_noisy_max(scores: Sequence[float] | np.ndarray, sensitivity: float, epsilon: float,
                     *, rng: RngLike = None, neighbouring: str = "add_remove_record") -> Release:
    """Index of the largest score after adding discrete Laplace noise of scale 2 D / eps per score.

    Only the index is released (epsilon-DP, Dwork & Roth Claim 3.9); scores are rounded
    onto an integer grid of D/1024 steps, paid for as in `laplace_mechanism`.
    """
    epsilon = check_epsilon(epsilon)
    sensitivity = _check_sensitivity(sensitivity)
    u = np.asarray(scores, dtype=np.float64)
    if u.ndim != 1 or u.size == 0 or not np.all(np.isfinite(u)):
        raise InvalidInputError("scores must be a non-empty 1-D array of finite numbers")
    g = power_of_two_at_most(sensitivity / GRID_RESOLUTION)
    grid_sens = math.floor(sensitivity / g) + 1
    noisy = round_to_grid(u, g) + discrete_laplace(laplace_scale_at_least(2 * grid_sens, epsilon),
                                                  size=u.size, rng=make_rng(rng))
    index = int(np.argmax(noisy))
    guarantee = PrivacyGuarantee(epsilon=epsilon, neighbouring=neighbouring,
                                 mechanism="report-noisy-max (discrete Laplace)",
                                 accountant="exact", notes=_notes(rng))
    return Release(value=index, guarantee=guarantee)


def randomized_response(values: Sequence[Any] | np.ndarray, categories: Sequence[Any],
                        epsilon: float, *, rng: RngLike = None) -> Release:
    """k-ary randomized response, applied to each value independently (local epsilon-DP).

    Each report keeps the true category with probability e^eps / (e^eps + k - 1) and is
    otherwise uniform over the k - 1 others. `details["estimated_frequencies"]` holds the
    unbiased estimate of the category frequencies.
    """
    epsilon = check_epsilon(epsilon)
    cats = list(categories)
    k = len(cats)
    if k < 2 or len(set(cats)) != k:
        raise InvalidInputError("categories must list at least two distinct values")
    index_of = {c: i for i, c in enumerate(cats)}
    try:
        codes = np.fromiter((index_of[v] for v in values), dtype=np.int64)
    except KeyError as exc:
        raise InvalidInputError(f"value {exc.args[0]!r} is not among the declared categories") \
            from None
    gen = make_rng(rng)
    p_keep = 1.0 / (1.0 + (k - 1) * math.exp(-epsilon))  # e^eps / (e^eps + k - 1), no overflow
    keep = gen.random(codes.size) < p_keep
    other = (codes + gen.integers(1, k, size=codes.size)) % k
    reported = np.where(keep, codes, other)
    n = max(codes.size, 1)
    observed = np.bincount(reported, minlength=k) / n
    q = (1 - p_keep) / (k - 1)
    estimated = (observed - q) / (p_keep - q)
    guarantee = PrivacyGuarantee(epsilon=epsilon, neighbouring="replace_record", model="local",
                                 mechanism=f"{k}-ary randomized response", accountant="exact",
                                 notes=_notes(rng, "each individual's report is epsilon-LDP"))
    return Release(value=[cats[i] for i in reported], guarantee=guarantee,
                   details={"estimated_frequencies": dict(zip(cats, estimated.tolist(),
                                                              strict=True)),
                            "p_keep": p_keep})
