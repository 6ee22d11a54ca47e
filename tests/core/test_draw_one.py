"""`draw_on_grid` on one value takes a Python-number path (issue 32: the gateway's scalar
query); it must check, draw and return exactly what the NumPy path did."""

from __future__ import annotations

import numpy as np
import pytest

from privlab.core.mechanisms import _check_integral, draw_on_grid
from privlab.core.rng import make_rng
from privlab.core.samplers import discrete_gaussian, discrete_laplace, round_to_grid
from privlab.errors import InvalidInputError


def _numpy_path(arr: np.ndarray, granularity: float, steps: float, *, gaussian: bool,
                exact: bool, integer_valued: bool, rng: np.random.Generator) -> object:
    """The 0-d array path as it was before the Python-number path (the oracle)."""
    _check_integral(arr, exact)
    gen = make_rng(rng)
    sampler = discrete_gaussian if gaussian else discrete_laplace
    noisy = round_to_grid(arr, granularity) + sampler(steps, size=None, rng=gen)
    out = np.asarray(noisy, dtype=np.float64) * granularity
    return out.astype(np.int64) if (integer_valued and granularity == 1.0) else out


VALUES = [0.0, -0.0, 1.0, -3.0, 2.5, 3.5, -2.5, 1234.75, 1e15, 2.0**53, 1e-3]
BAD = [float("nan"), float("inf"), float("-inf"), 2.0**60, 1e300]


@pytest.mark.parametrize("gaussian", [False, True])
@pytest.mark.parametrize("granularity", [1.0, 0.5, 2.0, 1e-9])
def test_one_value_draws_and_returns_what_the_numpy_path_did(gaussian: bool,
                                                             granularity: float) -> None:
    for i, x in enumerate(VALUES + BAD):
        for exact in (False, True):
            for integer_valued in (False, True):
                got_rng, want_rng = np.random.default_rng(i), np.random.default_rng(i)
                kwargs = dict(gaussian=gaussian, exact=exact, integer_valued=integer_valued)
                try:
                    want = _numpy_path(np.asarray(x), granularity, 7.5, rng=want_rng,
                                       **kwargs)
                except InvalidInputError as exc:
                    with pytest.raises(InvalidInputError) as err:
                        draw_on_grid(np.asarray(x), granularity, 7.5, rng=got_rng, **kwargs)
                    assert str(err.value) == str(exc)
                    continue
                got = draw_on_grid(np.asarray(x), granularity, 7.5, rng=got_rng, **kwargs)
                assert type(got) is type(want) and repr(got) == repr(want), (x, kwargs)
                # the generator was advanced exactly as far
                assert got_rng.bytes(8) == want_rng.bytes(8)


def test_a_non_integer_is_refused_when_declared_integer() -> None:
    with pytest.raises(InvalidInputError, match="integer_valued=True"):
        draw_on_grid(np.asarray(2.5), 1.0, 3.0, gaussian=False, exact=True,
                     integer_valued=True, rng=np.random.default_rng(0))
