"""Akin et al.'s Algorithm 1 (windows, means) and the three noise settings, with their guarantees.

Includes empirical privacy checks: the per-axis Laplace release with bbox sensitivity and the
planar Laplace release are run on neighbouring inputs (one fix moved within the box / by r)
many times at once, and the largest log-ratio of binned output frequencies must stay within the
stated epsilon (plus a sampling tolerance), while a release with half the noise is caught. With
stride 1 a fix lies in PB overlapping windows: the joint output of those windows is checked
against the stated per-fix epsilon (basic composition), which must also be needed.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest
from trajectory_helpers import BOX, make_trajectories

from privlab.core.rng import SEEDED_NOTE
from privlab.errors import InvalidInputError
from privlab.trajectory.geo import LocalProjection
from privlab.trajectory.preprocess import Filters, prepare
from privlab.trajectory.publish import (
    COVERS,
    NOT_COVERED,
    NotPrivateWarning,
    anonymize,
    make_windows,
    read_sidecar,
    windows_per_fix,
    write_release,
)


def _naive_windows(frame: pd.DataFrame, pb: int, stride: int, gap_min: float):
    """Per-trip loops, the obvious way, for comparison."""
    out = []
    for _, g in frame.sort_values(["uid", "datetime"]).groupby("uid", sort=True):
        t = g["datetime"].to_numpy()
        new = np.r_[True, np.diff(t) > np.timedelta64(int(gap_min * 60), "s")]
        trip = np.cumsum(new) - 1
        for k in np.unique(trip):
            sub = g[trip == k]
            for w, s in enumerate(range(0, len(sub) - pb + 1, stride)):
                out.append((sub["uid"].iloc[0], k, w, sub["lat"].iloc[s:s + pb].mean(),
                            sub["lng"].iloc[s:s + pb].mean()))
    return out


@pytest.mark.parametrize("pb,stride", [(1, 1), (2, 1), (3, 1), (4, 2), (3, 3), (4, 4)])
def test_windows_match_a_naive_per_trip_loop(traj, pb, stride):
    p = prepare(traj)
    w = make_windows(p, pb, stride, gap_minutes=30)
    naive = _naive_windows(traj, pb, stride, 30)
    assert len(w) == len(naive)
    got = list(zip(p.ids[w.codes], w.trip, w.window, strict=True))
    assert got == [(a, b, c) for a, b, c, _, _ in naive]
    np.testing.assert_allclose(w.lat, [x[3] for x in naive], rtol=0, atol=1e-12)
    np.testing.assert_allclose(w.lon, [x[4] for x in naive], rtol=0, atol=1e-12)
    assert w.counts["trips"] == 12
    assert windows_per_fix(pb, stride) == math.ceil(pb / stride)


def test_no_window_spans_two_trips():
    frame = make_trajectories(n_ids=1, trips=3, points=5)
    p = prepare(frame)
    w = make_windows(p, 2, 1, gap_minutes=30)
    assert len(w) == 3 * 4  # 4 windows per 5-fix trip, none across the 3-hour gaps
    span = p.t[w.start + 1] - p.t[w.start]
    assert span.max() == 5 * 10**9


def test_bad_window_parameters_and_short_trips(traj):
    p = prepare(traj)
    for window, stride in ((0, 1), (-2, 1), (2, 0), (2, 3), (2.5, 1)):
        with pytest.raises(InvalidInputError, match="--window|--stride"):
            make_windows(p, window, stride)
    with pytest.raises(InvalidInputError, match="every trip is shorter than --window 41"):
        make_windows(p, 41, 1)
    short = pd.concat([traj, pd.DataFrame({"uid": "lonely", "datetime": [pd.Timestamp(
        "2020-02-01")], "lat": [39.9], "lng": [116.3]})])
    w = make_windows(prepare(short), 2, 1)
    assert w.counts["trips_shorter_than_window"] == 1 and w.counts["fixes_in_short_trips"] == 1
    with pytest.raises(InvalidInputError, match="--gap"):
        make_windows(p, 2, 1, gap_minutes=0)


def test_planar_needs_a_public_box_and_a_radius(traj):
    with pytest.raises(InvalidInputError, match="needs a public --bbox"):
        anonymize(traj, window=2, epsilon=1)
    with pytest.raises(InvalidInputError, match="--radius"):
        anonymize(traj, window=2, epsilon=1, bbox=BOX, radius=0)
    with pytest.raises(InvalidInputError, match="epsilon"):
        anonymize(traj, window=2, epsilon=0, bbox=BOX)
    with pytest.raises(InvalidInputError, match="--sensitivity applies"):
        anonymize(traj, window=2, epsilon=1, bbox=BOX, sensitivity="paper")


def test_planar_guarantee_states_per_window_per_fix_and_per_trip_costs(traj):
    rel = anonymize(traj, window=3, stride=1, epsilon=1.5, radius=50, bbox=BOX, rng=1)
    g = rel.guarantee
    assert g.neighbouring == "location_radius" and g.model == "local"
    assert not g.is_dp and g.not_covered == NOT_COVERED and g.covers == COVERS
    assert g.epsilon == pytest.approx(3 * 1.5 / 3)
    assert any("r = 50 m" in n for n in g.notes) and SEEDED_NOTE in g.notes
    assert rel.trip_guarantee.epsilon == pytest.approx(38 * 1.5)  # 40-fix trips, PB 3
    rel2 = anonymize(traj, window=4, stride=4, epsilon=2.0, radius=50, bbox=BOX, rng=1)
    assert rel2.guarantee.epsilon == pytest.approx(2.0 / 4)


def test_planar_outputs_lie_on_the_metre_grid_and_have_the_right_spread():
    frame = make_trajectories(n_ids=50, trips=2, points=200, seed=4)
    eps, r = 2.0, 80.0
    rel = anonymize(frame, window=2, epsilon=eps, radius=r, bbox=BOX, rng=5)
    proj = LocalProjection.for_bbox(BOX)
    x, y = proj.forward(rel.published["lat"], rel.published["lon"])
    g = rel.noise["grid_m"]
    assert g == 2.0 ** math.floor(math.log2(r / 1024))
    np.testing.assert_allclose(x / g, np.rint(x / g), atol=1e-6)
    np.testing.assert_allclose(y / g, np.rint(y / g), atol=1e-6)
    ax, ay = proj.forward(rel.averaged["lat"], rel.averaged["lon"])
    d = np.hypot(x - ax, y - ay)
    n = len(d)
    # radius ~ Gamma(2, r/eps): mean 2 r/eps, sd sqrt(2) r/eps; allow 5 standard errors + grid
    assert abs(d.mean() - 2 * r / eps) < 5 * math.sqrt(2) * r / eps / math.sqrt(n) + g
    assert abs(np.mean(d ** 2) - 6 * (r / eps) ** 2) < 5 * math.sqrt(120 - 36) * (
        r / eps) ** 2 / math.sqrt(n) + 2 * g * r
    # the direction is uniform: mean displacement vector ~ 0
    assert abs(np.mean(x - ax)) < 5 * math.sqrt(3) * r / eps / math.sqrt(n)


def test_noise_scale_does_not_depend_on_the_data():
    a = make_trajectories(seed=1)
    b = make_trajectories(seed=2, points=60)
    for kw in ({"mechanism": "planar"}, {"mechanism": "laplace", "sensitivity": "bbox"}):
        ra = anonymize(a, window=2, epsilon=1.0, bbox=BOX, rng=0, **kw)
        rb = anonymize(b, window=2, epsilon=1.0, bbox=BOX, rng=0, **kw)
        assert ra.noise == rb.noise


def test_laplace_bbox_release_is_on_grids_with_stated_guarantee(traj):
    rel = anonymize(traj, window=2, stride=1, epsilon=1.0, mechanism="laplace", bbox=BOX, rng=2)
    g = rel.guarantee
    assert g.neighbouring == "location_event" and g.model == "local"
    assert not g.is_dp and g.not_covered == NOT_COVERED and g.covers == COVERS
    assert g.epsilon == pytest.approx(2 * 1.0)  # a fix lies in 2 windows at stride 1
    assert rel.trip_guarantee.neighbouring == "trajectory"
    assert rel.trip_guarantee.epsilon == pytest.approx(2 * 39 * 1.0)
    for axis, width in (("lat", BOX.width_lat), ("lon", BOX.width_lon)):
        info = rel.noise[axis]
        assert info["sensitivity_deg"] == pytest.approx(width / 2)
        q = rel.published[axis].to_numpy() / info["grid_deg"]
        np.testing.assert_array_equal(q, np.rint(q))
        steps = math.floor(width / 2 / info["grid_deg"]) + 1
        assert info["scale_deg"] == pytest.approx(steps / 0.5 * info["grid_deg"])


def _neighbours(n: int, moved: tuple[float, float]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """n independent two-fix trajectories, and the same with the first fix moved."""
    ids = np.repeat([f"u{i}" for i in range(n)], 2)
    t = np.tile(pd.to_datetime(["2020-01-01 10:00:00", "2020-01-01 10:00:05"]), n)
    lat = np.tile([BOX.lat0 + 0.01, 39.95], n)
    lon = np.tile([BOX.lon0 + 0.01, 116.40], n)
    d = pd.DataFrame({"id": ids, "time": t, "lat": lat, "lon": lon})
    d2 = d.copy()
    d2.loc[::2, "lat"] = moved[0]
    d2.loc[::2, "lon"] = moved[1]
    return d, d2


def _max_log_ratio(a: np.ndarray, b: np.ndarray, edges: list[np.ndarray],
                   min_count: int = 1000) -> float:
    """Largest |log(P_a[S] / P_b[S])| over the cells S of a grid (per-axis `edges`), among
    cells holding at least `min_count` samples of each. Any event S must satisfy the DP bound;
    edges at the two true centres make the bound tight in the outer cells."""
    ka = [np.searchsorted(e, a[:, i], side="right") for i, e in enumerate(edges)]
    kb = [np.searchsorted(e, b[:, i], side="right") for i, e in enumerate(edges)]
    shape = tuple(len(e) + 1 for e in edges)
    ca = np.bincount(np.ravel_multi_index(ka, shape), minlength=int(np.prod(shape)))
    cb = np.bincount(np.ravel_multi_index(kb, shape), minlength=int(np.prod(shape)))
    ok = (ca >= min_count) & (cb >= min_count)
    assert ok.sum() >= 4
    return float(np.abs(np.log(ca[ok] / cb[ok])).max())


def _edges(c1: float, c2: float, scale: float) -> np.ndarray:
    lo, hi = min(c1, c2), max(c1, c2)
    return np.array([lo - 2 * scale, lo - scale, lo, hi, hi + scale, hi + 2 * scale])


def test_laplace_bbox_respects_its_epsilon_on_neighbouring_inputs():
    """One fix moved from one corner of the box to the other: the worst case."""
    n, eps = 60_000, 1.0
    d, d2 = _neighbours(n, (BOX.lat1, BOX.lon1))
    kw = dict(window=2, stride=2, mechanism="laplace", bbox=BOX)
    r1 = anonymize(d, epsilon=eps, rng=11, **kw)
    r2 = anonymize(d2, epsilon=eps, rng=12, **kw)
    assert r1.guarantee.epsilon == eps  # stride 2: each fix in one window
    edges = [_edges(r1.averaged[ax].iloc[0], r2.averaged[ax].iloc[0], r1.noise[ax]["scale_deg"])
             for ax in ("lat", "lon")]
    cols = ["lat", "lon"]
    loss = _max_log_ratio(r1.published[cols].to_numpy(), r2.published[cols].to_numpy(), edges)
    # cells of >= 1000 samples: log-ratio standard error <= sqrt(2/1000) = 0.045
    assert loss <= eps + 0.15
    assert loss >= 0.8 * eps  # not vacuous: the worst case is reached
    # and it has power: a release with half the noise (epsilon doubled) is caught
    r3 = anonymize(d, epsilon=2 * eps, rng=13, **kw)
    r4 = anonymize(d2, epsilon=2 * eps, rng=14, **kw)
    assert _max_log_ratio(r3.published[cols].to_numpy(), r4.published[cols].to_numpy(),
                          edges) > eps + 0.4


def test_planar_respects_geo_indistinguishability_at_radius_r():
    """Two window means r metres apart (both fixes of the window moved by r to the north)."""
    n, eps, r = 60_000, 1.0, 100.0
    d, _ = _neighbours(n, (0.0, 0.0))
    d2 = d.copy()
    d2["lat"] += r / 111_195.08  # r metres north on the mean-radius sphere
    proj = LocalProjection.for_bbox(BOX)

    def run(e: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
        r1 = anonymize(d, window=2, stride=2, epsilon=e, radius=r, bbox=BOX, rng=seed)
        r2 = anonymize(d2, window=2, stride=2, epsilon=e, radius=r, bbox=BOX, rng=seed + 1)
        return (np.column_stack(proj.forward(r1.published["lat"], r1.published["lon"])),
                np.column_stack(proj.forward(r2.published["lat"], r2.published["lon"])))

    c1 = np.column_stack(proj.forward(d["lat"][:2].mean(), d["lon"][:2].mean()))[0]
    c2 = c1 + [0.0, r]
    edges = [np.array([c1[0] - r / eps, c1[0] + r / eps]), _edges(c1[1], c2[1], r / eps)]
    loss = _max_log_ratio(*run(eps, 21), edges)
    assert loss <= eps + 0.15
    assert loss >= 0.7 * eps
    assert _max_log_ratio(*run(2 * eps, 23), edges) > eps + 0.3


def _chains(n: int, pb: int) -> tuple[pd.DataFrame, np.ndarray]:
    """n identical trajectories of 2 PB - 1 fixes; at stride 1 the middle fix (index PB - 1)
    lies in all PB windows. Returns the frame and a mask of the middle fixes."""
    length = 2 * pb - 1
    ids = np.repeat([f"u{i:06d}" for i in range(n)], length)
    times = pd.Timestamp("2020-01-01 10:00") + pd.to_timedelta(np.arange(length) * 5, unit="s")
    d = pd.DataFrame({"id": ids, "time": np.tile(times, n), "lat": 39.95, "lon": 116.40})
    return d, np.arange(len(d)) % length == pb - 1


def _bonferroni_tolerance(min_count: int, cells: int, alpha: float = 1e-3) -> float:
    """Sampling tolerance of `_max_log_ratio`: in a cell holding >= min_count samples of each
    release, log(ca / cb) has standard error sqrt(1/ca + 1/cb) <= sqrt(2 / min_count) (delta
    method); a z-quantile Bonferroni-corrected over all cells bounds the chance that any cell
    exceeds its true log-ratio by more than this at alpha."""
    from scipy.stats import norm

    return float(norm.ppf(1 - alpha / (2 * cells)) * math.sqrt(2 / min_count))


@pytest.mark.parametrize("pb,n,eps", [(2, 100_000, 0.5), (3, 300_000, 1 / 3)])
def test_laplace_bbox_stride_1_a_fix_in_pb_windows_costs_pb_times_epsilon(pb, n, eps):
    """Stride 1: the middle fix lies in PB overlapping windows and is moved from one corner of
    the box to the other, which moves every one of those window means by the full sensitivity.
    The stated per-fix epsilon (PB x eps, basic composition) must hold on the joint output of
    the PB windows, and it must be needed: PB - 1 windows' worth would be exceeded."""
    d, mid = _chains(n, pb)
    d.loc[mid, ["lat", "lon"]] = (BOX.lat0, BOX.lon0)
    d2 = d.copy()
    d2.loc[mid, ["lat", "lon"]] = (BOX.lat1, BOX.lon1)
    kw = dict(window=pb, stride=1, mechanism="laplace", bbox=BOX, epsilon=eps)
    r1 = anonymize(d, rng=31, **kw)
    r2 = anonymize(d2, rng=32, **kw)
    stated = r1.guarantee.epsilon
    assert stated == pytest.approx(pb * eps) and len(r1.published) == n * pb
    # one row of 2 PB coordinates per trajectory: (lat, lon) of windows 0 .. PB-1
    cols = ["lat", "lon"]
    a = r1.published[cols].to_numpy().reshape(n, 2 * pb)
    b = r2.published[cols].to_numpy().reshape(n, 2 * pb)
    ca = r1.averaged[cols].to_numpy()[:pb].ravel()
    cb = r2.averaged[cols].to_numpy()[:pb].ravel()
    # edges at the two true centres per coordinate: the outer cells carry the full log-ratio
    edges = [np.array([x, y]) for x, y in zip(ca, cb, strict=True)]
    min_count = 1500
    tol = _bonferroni_tolerance(min_count, cells=3 ** (2 * pb))
    loss = _max_log_ratio(a, b, edges, min_count=min_count)
    assert loss <= stated + tol
    assert loss > (pb - 1) * eps + tol  # every one of the PB windows pays


def test_planar_stride_1_a_fix_in_two_windows_costs_the_stated_epsilon():
    """Stride 1, PB 2: the middle fix moved by r moves both window means by r/2; each costs
    eps/2 and the stated per-fix epsilon is ceil(PB/S) x eps / PB = eps. It must hold on the
    joint output of both windows and exceed one window's share."""
    n, eps, r = 100_000, 1.0, 100.0
    d, mid = _chains(n, 2)
    d2 = d.copy()
    d2.loc[mid, "lat"] += r / 111_195.08  # r metres north on the mean-radius sphere
    proj = LocalProjection.for_bbox(BOX)
    r1 = anonymize(d, window=2, stride=1, epsilon=eps, radius=r, bbox=BOX, rng=41)
    r2 = anonymize(d2, window=2, stride=1, epsilon=eps, radius=r, bbox=BOX, rng=42)
    stated = r1.guarantee.epsilon
    assert stated == pytest.approx(eps)

    def xy(frame: pd.DataFrame, rows: int) -> np.ndarray:
        x, y = proj.forward(frame["lat"].to_numpy()[:rows], frame["lon"].to_numpy()[:rows])
        return np.column_stack([x, y]).reshape(-1, 4)

    a, b = xy(r1.published, 2 * n), xy(r2.published, 2 * n)
    ca, cb = xy(r1.averaged, 2)[0], xy(r2.averaged, 2)[0]
    s = r / eps
    edges = [np.array([ca[0] - s, ca[0] + s]), np.array([ca[1], cb[1]]),
             np.array([ca[2] - s, ca[2] + s]), np.array([ca[3], cb[3]])]
    min_count = 1500
    tol = _bonferroni_tolerance(min_count, cells=3 ** 4)
    loss = _max_log_ratio(a, b, edges, min_count=min_count)
    assert loss <= stated + tol
    assert loss > eps / 2 + tol  # both windows pay: one window's share is exceeded


def test_paper_setting_is_labelled_not_private_and_leaks(traj):
    frame = traj.copy()
    frame.loc[1, ["lat", "lng"]] = frame.loc[0, ["lat", "lng"]].to_numpy()  # a zero-length step
    with pytest.warns(NotPrivateWarning, match="NOT differentially private"):
        rel = anonymize(frame, window=2, epsilon=2.0, mechanism="laplace", sensitivity="paper",
                        rng=3)
    g = rel.guarantee
    assert not g.is_dp and g.neighbouring == "none" and math.isinf(g.epsilon)
    assert "NOT differentially private" in g.describe()
    assert rel.warnings
    pub, avg = rel.published, rel.averaged
    assert pub.loc[0, "lat"] == avg.loc[0, "lat"] and pub.loc[0, "lon"] == avg.loc[0, "lon"]
    p = prepare(frame)
    lo = np.minimum(p.lat[:-1], p.lat[1:])
    hi = np.maximum(p.lat[:-1], p.lat[1:])
    same = p.codes[:-1] == p.codes[1:]
    trip_ok = np.diff(p.t) <= 30 * 60 * 10**9
    lo, hi = lo[same & trip_ok], hi[same & trip_ok]
    lat = pub["lat"].to_numpy()
    assert np.all((lat >= lo) & (lat <= hi))  # clipped into the user's own fixes
    assert np.mean((lat == lo) | (lat == hi)) > 0.25  # e^-1 ~ 37 % land on a true fix


def test_release_files_and_sidecar_roundtrip(tmp_path, traj):
    rel = anonymize(traj, window=2, epsilon=1.0, bbox=BOX, rng=1)
    for name in ("pub.csv", "pub.parquet"):
        side = write_release(rel, tmp_path / name)
        data = read_sidecar(tmp_path / name)
        assert side.name == name + ".json"
        assert data["guarantee"]["neighbouring"] == "location_radius"
        assert data["parameters"]["window"] == 2 and data["counts"]["windows"] == len(rel.published)
        assert "lat" in data["columns"]
    back = pd.read_csv(tmp_path / "pub.csv", dtype={"id": str})
    assert list(back.columns) == ["id", "trip", "window", "time", "lat", "lon"]
    with pytest.raises(InvalidInputError, match="sidecar"):
        read_sidecar(tmp_path / "other.csv")


def test_filters_flow_through_and_counts_are_reported(traj):
    frame = traj.copy()
    frame.loc[3, "lat"] = 45.0  # outside the box
    rel = anonymize(frame, window=2, epsilon=1.0, bbox=BOX, rng=0,
                    filters=Filters(max_speed_kmh=500))
    c = rel.counts
    assert c["outside_bbox_dropped"] == 1 and c["kept_fixes"] == len(traj) - 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        anonymize(frame, window=2, epsilon=1.0, bbox=BOX, rng=0)  # no warning for DP settings


def test_laplace_bbox_scale_is_never_below_the_exact_ratio(monkeypatch) -> None:
    """Regression: the bbox Laplace used the float quotient steps / eps_axis, which rounds
    to nearest and can fall below the exact ratio (privacy loss a hair above epsilon). It
    now rounds up (`laplace_scale_at_least`), as the core mechanisms do."""
    from fractions import Fraction

    import privlab.trajectory.publish as publish

    traj = make_trajectories()
    first = anonymize(traj, window=2, epsilon=1.0, mechanism="laplace", bbox=BOX, rng=1)
    steps = first.noise["lat"]["grid_sensitivity_steps"]
    # an epsilon whose float quotient steps / (epsilon / 2) rounds down
    epsilon = next(e / 1000 for e in range(1000, 3000)
                   if Fraction(steps / (e / 2000)) < Fraction(steps) / Fraction(e / 2000))
    scales: list[float] = []
    real = publish.discrete_laplace

    def spy(scale: float, *args, **kwargs):
        scales.append(scale)
        return real(scale, *args, **kwargs)

    monkeypatch.setattr(publish, "discrete_laplace", spy)
    rel = anonymize(traj, window=2, epsilon=epsilon, mechanism="laplace", bbox=BOX, rng=1)
    eps_axis = Fraction(epsilon / 2)
    assert scales and rel.noise["lat"]["grid_sensitivity_steps"] == steps
    for axis, scale in zip(("lat", "lon"), scales, strict=True):
        assert Fraction(scale) * eps_axis >= rel.noise[axis]["grid_sensitivity_steps"]
