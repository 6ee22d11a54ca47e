"""Utility and re-identification metrics."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from trajectory_helpers import BOX, make_trajectories

from privlab.errors import InvalidInputError
from privlab.trajectory import metrics
from privlab.trajectory.evaluate import evaluate_release
from privlab.trajectory.preprocess import prepare
from privlab.trajectory.publish import anonymize


def _naive_frechet(a: np.ndarray, b: np.ndarray) -> float:
    d = np.hypot(a[:, None, 0] - b[None, :, 0], a[:, None, 1] - b[None, :, 1])
    ca = np.zeros_like(d)
    for i in range(len(a)):
        for j in range(len(b)):
            if i == 0 and j == 0:
                ca[i, j] = d[0, 0]
            elif i == 0:
                ca[i, j] = max(ca[i, j - 1], d[i, j])
            elif j == 0:
                ca[i, j] = max(ca[i - 1, j], d[i, j])
            else:
                ca[i, j] = max(min(ca[i - 1, j], ca[i - 1, j - 1], ca[i, j - 1]), d[i, j])
    return float(ca[-1, -1])


def test_frechet_matches_the_textbook_recursion_in_batches():
    rng = np.random.default_rng(0)
    pairs = [(rng.normal(size=(n, 2)).cumsum(0), rng.normal(size=(m, 2)).cumsum(0))
             for n, m in rng.integers(1, 30, size=(40, 2))]
    got = metrics.discrete_frechet_many(pairs, batch=7)
    np.testing.assert_allclose(got, [_naive_frechet(a, b) for a, b in pairs], rtol=0, atol=0)
    with pytest.raises(InvalidInputError):
        metrics.discrete_frechet(np.zeros((0, 2)), np.zeros((3, 2)))


def test_frechet_and_hausdorff_reference_values():
    a = np.array([[0.0, 0.0], [1.0, 0.0], [2.0, 0.0]])
    b = np.array([[0.0, 1.0], [1.0, 1.0], [2.0, 1.0]])
    assert metrics.discrete_frechet(a, b) == 1.0
    assert metrics.hausdorff(a, b) == 1.0
    # Frechet respects order, Hausdorff does not
    assert metrics.discrete_frechet(a, b[::-1]) == pytest.approx(math.hypot(2, 1))
    assert metrics.hausdorff(a, b[::-1]) == 1.0


def test_window_errors_in_degrees_and_metres():
    avg = pd.DataFrame({"id": ["a", "a"], "trip": [0, 0], "lat": [40.0, 40.0],
                        "lon": [116.0, 116.0]})
    pub = avg.assign(lat=[40.001, 39.999])
    e = metrics.window_errors(avg, pub)
    assert e["rmse_lat_deg"] == pytest.approx(0.001)
    assert e["rmse_lon_deg"] == 0.0
    assert e["rmse_m"] == pytest.approx(111.195, rel=1e-4)
    assert e["mean_haversine_m"] == pytest.approx(111.195, rel=1e-4)
    with pytest.raises(InvalidInputError):
        metrics.window_errors(avg, pub.iloc[:1])


def test_interpolated_true_positions():
    frame = pd.DataFrame({"id": ["a", "a", "b"], "time": pd.to_datetime(
        ["2020-01-01 00:00:00", "2020-01-01 00:00:10", "2020-01-01 00:00:00"]),
        "lat": [40.0, 40.01, 30.0], "lon": [116.0, 116.02, 100.0]})
    p = prepare(frame)
    t = pd.to_datetime(["2020-01-01 00:00:05", "2020-01-01 00:00:00"]).to_numpy()
    t = t.astype("datetime64[ns]").view(np.int64)
    lat, lon = metrics.interpolate_positions(p, np.array([0, 1]), t)
    np.testing.assert_allclose(lat, [40.005, 30.0])
    np.testing.assert_allclose(lon, [116.01, 100.0])


def test_linkage_drops_with_noise_and_time_still_links():
    frame = make_trajectories(n_ids=10, trips=2, points=60, seed=7)
    p = prepare(frame)
    small = anonymize(frame, window=2, epsilon=5.0, radius=5.0, bbox=BOX, rng=1)
    big = anonymize(frame, window=2, epsilon=0.1, radius=2000.0, bbox=BOX, rng=1)
    units = metrics.units_for(p, small.published)
    assert units.n_units == 20
    before = metrics.linkage_attack(p, units, small.averaged)["top1_accuracy"]
    after_small = metrics.linkage_attack(p, units, small.published)["top1_accuracy"]
    after_big = metrics.linkage_attack(p, units, big.published)["top1_accuracy"]
    assert before == 1.0 and after_small >= 0.95
    assert after_big <= 0.4  # 20 km of noise on ~1 km walks: close to a guess (0.05)
    # timestamps are published unchanged: a space-time attacker still links
    timed = metrics.linkage_attack(p, units, big.published, use_time=True)["top1_accuracy"]
    assert timed > after_big


def test_uniqueness_before_and_after():
    frame = make_trajectories(n_ids=8, trips=1, points=50, seed=3)
    p = prepare(frame)
    rel = anonymize(frame, window=2, epsilon=0.1, radius=2000.0, bbox=BOX, rng=4)
    units = metrics.units_for(p, rel.published, unit="id")
    before = metrics.uniqueness(p, units, None, k=2, tolerance_s=None, rng=0)
    after = metrics.uniqueness(p, units, rel.published, k=2, tolerance_s=None, rng=0)
    assert before["targets"] == 8 and before["unique_share"] == 1.0
    assert after["unique_share"] < before["unique_share"]
    with pytest.raises(InvalidInputError):
        metrics.uniqueness(p, units, None, k=0)


def test_evaluate_release_reports_everything(traj):
    p = prepare(traj)
    rel = anonymize(traj, window=2, epsilon=1.0, radius=50, bbox=BOX, rng=0)
    out = evaluate_release(p, rel, ks=(1, 2), max_points=50)
    assert out["utility"]["windows"] == len(rel.published)
    assert out["shape"]["trajectories"] == 12
    assert out["shape"]["mean_frechet_m"] >= out["shape"]["mean_hausdorff_m"] * 0.999
    assert set(out["linkage"]) == {"space", "space_time"}
    assert [u["k"] for u in out["uniqueness"]] == [1, 2]
    # stride 1, PB 2: the window mean is where the user was at the mid time
    assert out["utility_vs_true_position"]["rmse_m"] == pytest.approx(
        out["utility"]["rmse_m"], rel=1e-3)
