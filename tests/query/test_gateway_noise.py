"""Noise stage: budget split, sensitivities, partition-selection threshold, distributions."""

from __future__ import annotations

import math

import numpy as np
import pytest
from gw_fixtures import SMALL_JOINS, SMALL_TABLES, analysts

from privlab.core.rng import SEEDED_NOTE
from privlab.query.config import parse_config
from privlab.query.demo import adult_config
from privlab.query.measurement import measure_query
from privlab.query.noise import answer, plan_budget, selection_threshold
from privlab.query.planner import Planner, QueryRefused


@pytest.fixture(scope="module")
def planner() -> Planner:
    raw = adult_config("unused.duckdb", "unused.db", analysts())
    raw["tables"].update(SMALL_TABLES)
    raw["joins"] = SMALL_JOINS
    return Planner(parse_config(raw))


def discrete_laplace_var(t: float) -> float:
    a = math.exp(-1 / t)
    return 2 * a / (1 - a) ** 2


def test_count_noise_has_the_calibrated_variance(planner: Planner) -> None:
    plan = planner.plan("SELECT COUNT(*) FROM adult")
    budget = plan_budget(plan, 0.5, 0.0, None)
    rng, measurement = np.random.default_rng(11), measure_query(plan, budget)
    draws = np.array([answer(plan, [(1000,)], [], measurement, rng=rng).rows[0][0]
                      for _ in range(4000)], dtype=float)
    # scale t = k / eps = 2; the variance estimate of 4000 Laplace draws has ~4% relative sd
    expected = discrete_laplace_var(2.0)
    assert abs(draws.var() / expected - 1) < 0.15
    assert abs(draws.mean() - 1000) < 4 * math.sqrt(expected / 4000)
    assert np.all(draws == np.round(draws))  # integer grid


def test_user_level_scales_noise_by_the_contribution_bound(planner: Planner) -> None:
    row = planner.plan("SELECT COUNT(*) FROM people")  # max_rows 1
    user = planner.plan("SELECT COUNT(*) FROM visits")  # max_rows 3
    a = answer(row, [(10,)], [], measure_query(row, plan_budget(row, 1.0, 0, None)), rng=1)
    b = answer(user, [(10,)], [], measure_query(user, plan_budget(user, 1.0, 0, None)),
               rng=1)
    assert b.guarantee.neighbouring == "user"
    ci_a, ci_b = a.info[0].confidence_interval_95, b.info[0].confidence_interval_95
    assert 2.5 * ci_a <= ci_b <= 3.5 * ci_a


def test_budget_split_and_guarantee(planner: Planner) -> None:
    plan = planner.plan("SELECT sex, COUNT(*), AVG(\"hours-per-week\"), MEDIAN(age) FROM adult "
                        "GROUP BY sex")
    budget = plan_budget(plan, 0.9, 0.0, None)
    assert len(plan.primitives) == 3 and budget.per_primitive_epsilon == pytest.approx(0.3)
    ans = answer(plan, [], [], measure_query(plan, budget), rng=3)
    assert ans.guarantee.epsilon == 0.9 and ans.guarantee.delta == 0.0
    assert ans.guarantee.neighbouring == "add_remove_record"
    assert SEEDED_NOTE in ans.guarantee.notes
    # AVG's two measurements are charged to it; the count is shared with COUNT(*)
    assert [c.epsilon for c in ans.info] == pytest.approx([0.0, 0.3, 0.6, 0.3])
    assert [r[0] for r in ans.rows] == ["Female", "Male"]  # zero-count cells are released too


def test_mechanism_and_delta_checks(planner: Planner) -> None:
    plan = planner.plan("SELECT COUNT(*) FROM adult")
    with pytest.raises(QueryRefused, match="delta > 0"):
        plan_budget(plan, 1.0, 0.0, "gaussian")
    with pytest.raises(QueryRefused, match="mechanism"):
        plan_budget(plan, 1.0, 0.0, "exponential")
    ps = planner.plan('SELECT "native-country", COUNT(*) FROM adult GROUP BY "native-country"')
    with pytest.raises(QueryRefused, match="partition selection"):
        plan_budget(ps, 1.0, 0.0, None)
    gauss = plan_budget(plan, 1.0, 1e-6, "gaussian")
    ans = answer(plan, [(500,)], [], measure_query(plan, gauss), rng=4)
    assert ans.guarantee.delta == 1e-6 and "gaussian" in ans.guarantee.mechanism
    # Laplace does not spend the delta it was offered
    assert plan_budget(plan, 1.0, 1e-6, None).delta == 0.0


@pytest.mark.parametrize(("k", "eps", "delta"), [(1, 1.0, 1e-6), (3, 0.5, 1e-8), (20, 2.0, 1e-5)])
def test_selection_threshold_is_the_smallest_safe_one(k: int, eps: float, delta: float) -> None:
    tau = selection_threshold(k, eps, delta)
    a = math.exp(-eps / k)
    m = tau - k
    assert k * a**m / (1 + a) <= delta  # one unit's <= k new cells pass w.p. <= delta
    assert m == 1 or k * a ** (m - 1) / (1 + a) > delta


def test_partition_selection_drops_rare_keys(planner: Planner) -> None:
    plan = planner.plan('SELECT "native-country", COUNT(*) FROM adult GROUP BY "native-country"')
    budget = plan_budget(plan, 1.0, 1e-6, None)
    rows = [("Common", 5000)] + [(f"Unique-{i}", 1) for i in range(500)]
    rng, measurement = np.random.default_rng(5), measure_query(plan, budget)
    for _ in range(20):
        ans = answer(plan, rows, [], measurement, rng=rng)
        assert [r[0] for r in ans.rows] == ["Common"]


def test_partition_selection_without_candidates_is_shaped_like_with_one(
        planner: Planner) -> None:
    """Found by the neighbouring fuzz: with no candidate group at all, the threshold, the
    intervals and the notes used to be None / missing, while one candidate (not released)
    filled them in, so whether any row passed the WHERE showed without noise."""
    plan = planner.plan('SELECT "native-country", COUNT(*), SUM(age), AVG("hours-per-week") '
                        'FROM adult GROUP BY "native-country"')
    budget = plan_budget(plan, 1.0, 1e-6, None)
    assert plan.result_columns[:2] == ("__g0", "__n")
    width = len(plan.result_columns)
    one = [("Atlantis",) + (1,) * (width - 1)]
    empty = answer(plan, [], [], measure_query(plan, budget), rng=3)
    single = answer(plan, one, [], measure_query(plan, budget), rng=3)
    assert empty.rows == single.rows == []
    assert [c.to_dict() for c in empty.info] == [c.to_dict() for c in single.info]
    assert empty.guarantee == single.guarantee
    assert "None" not in str(empty.info[0].notes)


def test_avg_is_clamped_and_close(planner: Planner) -> None:
    plan = planner.plan("SELECT AVG(age) FROM adult")
    budget = plan_budget(plan, 1.0, 0.0, None)
    # 10,000 people of mean age 40 (count, count of age, sum of age)
    assert plan.result_columns == ("__n", "__c0", "__s0")
    values = []
    rng, measurement = np.random.default_rng(8), measure_query(plan, budget)
    for _ in range(200):
        ans = answer(plan, [(10_000, 10_000, 400_000)], [], measurement, rng=rng)
        values.append(ans.rows[0][0])
        assert 17 <= ans.rows[0][0] <= 90
    # centred sum noise scale (90-17)/2 / 0.5 = 73 -> sd of the mean ~ 73*sqrt2/1e4 ~ 0.01
    assert abs(np.mean(values) - 40) < 0.01
    assert ans.info[0].confidence_interval_95[0] < 0.1


def test_order_limit_offset_are_post_processing(planner: Planner) -> None:
    plan = planner.plan("SELECT race, COUNT(*) AS n FROM adult GROUP BY race ORDER BY n DESC "
                        "LIMIT 2 OFFSET 1")
    rows = [("White", 20_000), ("Black", 3000), ("Asian-Pac-Islander", 900), ("Other", 250),
            ("Amer-Indian-Eskimo", 280)]
    ans = answer(plan, rows, [], measure_query(plan, plan_budget(plan, 2.0, 0, None)), rng=6)
    assert [r[0] for r in ans.rows] == ["Black", "Asian-Pac-Islander"]


@pytest.mark.parametrize("k", [1, 2, 3, 100, 10_000])
@pytest.mark.parametrize("delta", [5e-324, 1e-300, 1e-30, 1e-6])
def test_selection_threshold_holds_for_subnormal_deltas(k: int, delta: float) -> None:
    """Computed in logarithms: delta * (1 + a) / k underflowed to 0 (log(0): ValueError)
    for delta 5e-324 and k >= 2. The threshold is still the smallest safe one."""
    eps = 0.5
    tau = selection_threshold(k, eps, delta)
    log_a, a = -eps / k, math.exp(-eps / k)
    m = tau - k
    log_delta = math.log(delta)
    assert math.log(k) + m * log_a - math.log1p(a) <= log_delta
    assert m == 1 or math.log(k) + (m - 1) * log_a - math.log1p(a) > log_delta - 1e-9
