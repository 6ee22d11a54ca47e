"""Variance / standard deviation (privlab.measure.stats.variance): the sensitivity bounds
what the code computes, the value is near the exact one, the stated half-width covers, and
`privlab release variance|stddev` offers it through the registry."""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from privlab.cli.main import main
from privlab.errors import InvalidInputError
from privlab.measure import measurement, stats
from privlab.measure.stats.base import Inputs
from privlab.measure.stats.variance import square_bound
from privlab.schema import parse_schema

SPEC = {"name": "v", "public_size": 400,
        "columns": {"x": {"type": "numeric", "bounds": [-3.7, 11.3]},
                    "c": {"type": "categorical", "categories": ["a", "b"]}}}


def test_sensitivities_bound_the_float_terms() -> None:
    """For random bounds, the extreme rows' fl(x - c) and fl(y * y) stay within d and d^2
    rounded up: what one row adds to the centred sum and the sum of squares."""
    rng = np.random.default_rng(0)
    for _ in range(2000):
        lo, hi = sorted(rng.uniform(-1e6, 1e6, 2) * rng.choice([1e-9, 1.0, 1e3]))
        centre, d, d2 = square_bound((lo, hi))
        for x in (lo, hi, np.nextafter(lo, hi), np.nextafter(hi, lo), centre):
            y = x - centre
            assert abs(y) <= d and y * y <= d2
        assert Fraction(d2) >= Fraction(d) ** 2


def test_registry_offers_variance_and_stddev() -> None:
    assert {"count", "sum", "mean", "histogram", "quantile", "variance", "stddev"} <= \
        set(stats.names())
    assert stats.get("variance").numeric and stats.get("stddev").root  # type: ignore[attr-defined]
    with pytest.raises(InvalidInputError, match="statistic must be one of"):
        stats.get("kurtosis")


def test_large_epsilon_gives_the_exact_population_variance() -> None:
    rng = np.random.default_rng(1)
    x = rng.uniform(-3.7, 11.3, 400)
    v = stats.get("variance")
    inputs = Inputs((-3.7, 11.3), None, None, None, False, "laplace", 1e6, 0.0)
    out = v.release(x, inputs, 7)
    assert out.value == pytest.approx(np.var(x), abs=1e-3)
    sd = stats.get("stddev").release(x, inputs, 7)
    assert sd.value == pytest.approx(np.std(x), abs=1e-3)
    assert out.guarantee.epsilon == 1e6 and "3 releases" in out.guarantee.accountant
    # the exact (NOT private) value the demo prints beside it: of the clamped values
    assert stats.get("variance").exact(np.append(x, 50.0), inputs) == \
        pytest.approx(np.var(np.append(x, 11.3)))


def test_stated_half_width_covers_at_least_95_percent() -> None:
    """The first-order half-width bounds each term's error by its 95% noise quantile and adds
    them: over 300 seeded releases at the public size, at least 95% - 3 binomial sd fall
    within it (sd = sqrt(.95 x .05 / 300) = 1.26%)."""
    sch = parse_schema(SPEC, "v")
    m = measurement(sch, "variance", "x", epsilon=2.0)
    hw = m.half_width()
    assert hw is not None and hw > 0
    rng = np.random.default_rng(2)
    frame = pd.DataFrame({"x": rng.uniform(-3.7, 11.3, 400), "c": "a"})
    truth = float(np.var(frame["x"]))
    hits = sum(abs(m(frame, rng=s).value - truth) <= hw for s in range(300))
    assert hits / 300 >= 0.95 - 3 * math.sqrt(0.95 * 0.05 / 300)


def test_measurement_states_three_draws_before_data() -> None:
    sch = parse_schema(SPEC, "v")
    m = measurement(sch, "stddev", "x", epsilon=0.9, delta=1e-6, mechanism="gaussian")
    assert len(m.noise) == 3 and all(n.epsilon == pytest.approx(0.3) for n in m.noise)
    assert m.guarantee.delta == 1e-6
    frame = pd.DataFrame({"x": [0.0, 1.0, 5.0] * 50, "c": "a"})
    out = m(frame, rng=3)  # raises if a drawn scale differs from the stated ones
    assert 0.0 <= out.value <= square_bound((-3.7, 11.3))[1]
    with pytest.raises(InvalidInputError, match="needs an integer or numeric column"):
        measurement(sch, "variance", "c", epsilon=1.0)


@pytest.mark.parametrize("stat", ["variance", "stddev"])
def test_release_cli_offers_it(stat: str, tmp_path: Path,
                               capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "v.csv"
    path.write_text("x\n" + "\n".join(str(i % 9) for i in range(200)) + "\n", encoding="utf-8")
    code = main(["release", stat, str(path), "--column", "x", "--bounds", "0:10",
                 "--epsilon", "1", "--seed", "2", "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    payload = json.loads(out.out)
    assert payload["statistic"] == stat and payload["guarantee"]["is_dp"]
    assert payload[f"{stat}_half_width_95_approx"] > 0
    assert 0 <= payload["value"] <= (25 if stat == "variance" else 5)
