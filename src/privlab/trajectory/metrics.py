"""Utility and privacy metrics for published trajectories.

Utility: RMSE per axis in degrees (Akin et al.'s Equation 5, T'' against T') and in metres, mean
haversine error, the error against where the user really was at the published time, and
Hausdorff / discrete Frechet distances per trajectory. Privacy, not only utility: a linkage
attack (match each published trajectory to its original among all, top-1 accuracy) and the
share of trajectories singled out by k of their points (scikit-mobility's point attack).
Metrics may use the data freely (they are evaluations, not releases).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy.spatial import cKDTree
from scipy.spatial.distance import directed_hausdorff

from privlab.core.rng import RngLike, make_rng
from privlab.errors import InvalidInputError
from privlab.trajectory.geo import LocalProjection, haversine_m, metres_per_degree
from privlab.trajectory.preprocess import Prepared

UNITS = ("trip", "id")


def window_errors(averaged: pd.DataFrame, published: pd.DataFrame) -> dict[str, float]:
    """RMSE(T', T'') per axis (degrees, as Akin et al.) and in metres, plus haversine errors."""
    if len(averaged) != len(published):
        raise InvalidInputError(f"T' has {len(averaged)} windows but T'' has {len(published)}")
    la, lo = averaged["lat"].to_numpy(float), averaged["lon"].to_numpy(float)
    pa, po = published["lat"].to_numpy(float), published["lon"].to_numpy(float)
    dlat, dlon = pa - la, po - lo
    kn, ke = metres_per_degree(la)
    dn, de = dlat * kn, dlon * ke
    hav = haversine_m(la, lo, pa, po)
    out = {
        "windows": int(len(la)),
        "rmse_lat_deg": float(np.sqrt(np.mean(dlat ** 2))),
        "rmse_lon_deg": float(np.sqrt(np.mean(dlon ** 2))),
        "rmse_north_m": float(np.sqrt(np.mean(dn ** 2))),
        "rmse_east_m": float(np.sqrt(np.mean(de ** 2))),
        "rmse_m": float(np.sqrt(np.mean(dn ** 2 + de ** 2))),
        "mean_haversine_m": float(hav.mean()),
        "median_haversine_m": float(np.median(hav)),
        "p95_haversine_m": float(np.percentile(hav, 95)),
        "share_exact_lat": float(np.mean(dlat == 0)),
        "share_exact_lon": float(np.mean(dlon == 0)),
    }
    if "id" in averaged.columns and "trip" in averaged.columns:
        key = averaged["id"].astype("str") + "/" + averaged["trip"].astype("str")
        per = pd.DataFrame({"k": key.to_numpy(), "a": dlat ** 2, "b": dlon ** 2})
        per = per.groupby("k", sort=False).mean()
        out["mean_trajectory_rmse_lat_deg"] = float(np.sqrt(per["a"]).mean())
        out["mean_trajectory_rmse_lon_deg"] = float(np.sqrt(per["b"]).mean())
    return out


@dataclass
class Units:
    """Unit labels (trip or id) for the original fixes and for published windows."""

    fix_unit: np.ndarray      # per original fix
    pub_unit: np.ndarray      # per published row
    n_units: int
    names: list[str]


def units_for(p: Prepared, published: pd.DataFrame, unit: str = "trip",
              gap_minutes: float = 30.0) -> Units:
    """Label each original fix and each published window with its trajectory (trip or id)."""
    if unit not in UNITS:
        raise InvalidInputError(f"unit must be 'trip' or 'id', got {unit!r}")
    index = pd.Index(p.ids)
    codes = index.get_indexer(published["id"].astype("str"))
    if (codes < 0).any():
        first = published["id"].astype("str").iloc[int(np.flatnonzero(codes < 0)[0])]
        raise InvalidInputError(f"published id {first!r} does not occur in the original data")
    if unit == "id":
        used = np.unique(p.codes)
        remap = np.full(len(p.ids), -1, dtype=np.int64)
        remap[used] = np.arange(len(used))
        return Units(remap[p.codes], remap[codes], len(used), [str(p.ids[c]) for c in used])
    new = p.trip_starts(gap_minutes)
    trip_global = np.cumsum(new) - 1
    first_trip = np.full(len(p.ids), -1, dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, p.codes[1:] != p.codes[:-1]])
    first_trip[p.codes[starts]] = trip_global[starts]
    pub = first_trip[codes] + published["trip"].to_numpy(np.int64)
    n_units = int(trip_global[-1]) + 1
    if (first_trip[codes] < 0).any() or (pub >= n_units).any():
        raise InvalidInputError("published trips do not match the original data's trips; use "
                                "the same --gap and filters as the release")
    trip_codes = p.codes[new]
    local = trip_global[new] - first_trip[trip_codes]
    names = [f"{p.ids[c]}/{t}" for c, t in zip(trip_codes, local, strict=True)]
    return Units(trip_global, pub, n_units, names)


def interpolate_positions(p: Prepared, codes: np.ndarray, t: np.ndarray
                          ) -> tuple[np.ndarray, np.ndarray]:
    """Where each id really was at time t: linear interpolation between its fixes."""
    t0 = p.t.min()
    span = math.ceil((max(int(p.t.max()), int(t.max())) - min(int(t0), int(t.min()))) / 1e9) + 1
    key_fix = p.codes.astype(np.float64) * span + (p.t - t0) / 1e9
    key_q = codes.astype(np.float64) * span + (t - t0) / 1e9
    n = len(p)
    i = np.clip(np.searchsorted(key_fix, key_q, side="right") - 1, 0, n - 1)  # last fix <= q
    before_first = p.codes[i] != codes  # q precedes its id's first fix: use that fix
    i = np.where(before_first, np.minimum(i + 1, n - 1), i)
    j = np.minimum(i + 1, n - 1)
    dt = (p.t[j] - p.t[i]).astype(np.float64)
    inside = (~before_first) & (j != i) & (p.codes[j] == codes) & (dt > 0)
    w = np.where(inside, (t - p.t[i]) / np.where(dt > 0, dt, 1.0), 0.0)
    w = np.clip(w, 0.0, 1.0)
    return p.lat[i] + w * (p.lat[j] - p.lat[i]), p.lon[i] + w * (p.lon[j] - p.lon[i])


def errors_vs_truth(p: Prepared, codes: np.ndarray, published: pd.DataFrame) -> dict[str, float]:
    """Error of T'' against the user's true position at each published time (interpolated)."""
    t = published["time"].to_numpy().astype("datetime64[ns]").view(np.int64)
    lat, lon = interpolate_positions(p, codes, t)
    d = haversine_m(lat, lon, published["lat"].to_numpy(float), published["lon"].to_numpy(float))
    return {"rmse_m": float(np.sqrt(np.mean(d ** 2))), "mean_haversine_m": float(d.mean()),
            "median_haversine_m": float(np.median(d))}


def hausdorff(a: np.ndarray, b: np.ndarray) -> float:
    """Symmetric Hausdorff distance between two point sets (n x 2 arrays, same units)."""
    return float(max(directed_hausdorff(a, b)[0], directed_hausdorff(b, a)[0]))


def discrete_frechet(a: np.ndarray, b: np.ndarray) -> float:
    """Discrete Frechet distance (Eiter & Mannila 1994) between two curves (n x 2, m x 2)."""
    return float(discrete_frechet_many([(a, b)])[0])


def discrete_frechet_many(pairs: Sequence[tuple[np.ndarray, np.ndarray]],
                          batch: int = 32) -> np.ndarray:
    """Discrete Frechet distances of many curve pairs at once.

    The dynamic programme runs along anti-diagonals, vectorised over the diagonal and over a
    batch of pairs of similar size (padded: padding cells only feed cells beyond a pair's own
    end, so they never reach its answer). O(n m) work per pair, O(batch (n + m)) memory."""
    sizes = []
    for a, b in pairs:
        if len(a) == 0 or len(b) == 0:
            raise InvalidInputError("Frechet distance needs two non-empty curves")
        sizes.append((len(a), len(b)))
    out = np.empty(len(pairs))
    order = sorted(range(len(pairs)), key=lambda q: sizes[q][0] + sizes[q][1])
    for g in range(0, len(order), batch):
        idx = order[g:g + batch]
        ns = np.array([sizes[q][0] for q in idx])
        ms = np.array([sizes[q][1] for q in idx])
        big_n, big_m, nb = int(ns.max()), int(ms.max()), len(idx)
        ax = np.zeros((nb, big_n))
        ay = np.zeros((nb, big_n))
        bx = np.zeros((nb, big_m))
        by = np.zeros((nb, big_m))
        for r, q in enumerate(idx):
            ax[r, :ns[r]], ay[r, :ns[r]] = pairs[q][0][:, 0], pairs[q][0][:, 1]
            bx[r, :ms[r]], by[r, :ms[r]] = pairs[q][1][:, 0], pairs[q][1][:, 1]
        target = ns + ms - 2
        res = np.empty(nb)
        # Three rotating diagonal buffers indexed by i + 1 (column 0 stays inf for i = -1).
        # Only cells lo-1..hi+1 of a diagonal are ever read later; they are reset to inf.
        bufs = [np.full((nb, big_n + 2), np.inf) for _ in range(3)]
        prev2, prev, cur = bufs
        for d in range(big_n + big_m - 1):
            lo, hi = max(0, d - big_m + 1), min(big_n - 1, d)
            jl, jh = d - hi, d - lo  # j runs from jh down to jl as i runs lo..hi
            dx = ax[:, lo:hi + 1] - bx[:, jl:jh + 1][:, ::-1]
            dy = ay[:, lo:hi + 1] - by[:, jl:jh + 1][:, ::-1]
            dist = np.hypot(dx, dy)
            if d == 0:
                cur[:, 1] = dist[:, 0]
            else:
                best = np.minimum(prev[:, lo:hi + 1], prev[:, lo + 1:hi + 2])  # (i-1,j), (i,j-1)
                np.minimum(best, prev2[:, lo:hi + 1], out=best)                  # (i-1,j-1)
                np.maximum(dist, best, out=cur[:, lo + 1:hi + 2])
            cur[:, lo] = np.inf if lo > 0 else cur[:, lo]
            if hi + 2 < big_n + 2:
                cur[:, hi + 2] = np.inf
            done = np.flatnonzero(target == d)
            if len(done):
                res[done] = cur[done, ns[done]]
            prev2, prev, cur = prev, cur, prev2
        out[idx] = res
    return out


def _subsample(xy: np.ndarray, max_points: int) -> np.ndarray:
    if len(xy) <= max_points:
        return xy
    return xy[np.linspace(0, len(xy) - 1, max_points).round().astype(int)]


def shape_distances(p: Prepared, units: Units, published: pd.DataFrame,
                    max_points: int = 1000) -> pd.DataFrame:
    """Hausdorff and discrete Frechet (metres) per trajectory, original fixes vs published.

    Frechet is computed on at most `max_points` evenly spaced points per curve (documented
    approximation; Hausdorff uses all points)."""
    plat, plon = published["lat"].to_numpy(float), published["lon"].to_numpy(float)
    fix_order = np.argsort(units.fix_unit, kind="stable")
    pub_order = np.argsort(units.pub_unit, kind="stable")
    fix_bounds = np.searchsorted(units.fix_unit[fix_order], np.arange(units.n_units + 1))
    pub_bounds = np.searchsorted(units.pub_unit[pub_order], np.arange(units.n_units + 1))
    rows, pairs = [], []
    for u in range(units.n_units):
        fi = fix_order[fix_bounds[u]:fix_bounds[u + 1]]
        pi = pub_order[pub_bounds[u]:pub_bounds[u + 1]]
        if len(fi) == 0 or len(pi) == 0:
            continue
        proj = LocalProjection.around(float(np.mean(p.lat[fi])), float(np.mean(p.lon[fi])))
        a = np.column_stack(proj.forward(p.lat[fi], p.lon[fi]))
        b = np.column_stack(proj.forward(plat[pi], plon[pi]))
        rows.append({"trajectory": units.names[u], "fixes": len(fi), "windows": len(pi),
                     "hausdorff_m": hausdorff(a, b)})
        pairs.append((_subsample(a, max_points), _subsample(b, max_points)))
    frechet = discrete_frechet_many(pairs) if pairs else np.array([])
    for row, value in zip(rows, frechet, strict=True):
        row["frechet_m"] = float(value)
    return pd.DataFrame(rows)


def _dataset_projection(p: Prepared) -> LocalProjection:
    return LocalProjection.around(float(np.median(p.lat)), float(np.median(p.lon)))


def linkage_attack(p: Prepared, units: Units, published: pd.DataFrame, *,
                   use_time: bool = False, speed_mps: float = 10.0) -> dict[str, Any]:
    """Top-1 accuracy of re-linking each published trajectory to its original.

    The attacker holds all original trajectories (labels hidden in the release). Each published
    point votes for the trajectory of its nearest original fix, in space, or with
    `use_time` in space-time (one second counts as `speed_mps` metres); the published
    trajectory is linked to the most-voted one (ties share the credit)."""
    proj = _dataset_projection(p)
    ox, oy = proj.forward(p.lat, p.lon)
    px, py = proj.forward(published["lat"].to_numpy(float), published["lon"].to_numpy(float))
    if use_time:
        t0 = p.t.min()
        ot = (p.t - t0) / 1e9 * speed_mps
        pt = (published["time"].to_numpy().astype("datetime64[ns]").view(np.int64) - t0) \
            / 1e9 * speed_mps
        tree = cKDTree(np.column_stack([ox, oy, ot]))
        _, nn = tree.query(np.column_stack([px, py, pt]), k=1)
    else:
        tree = cKDTree(np.column_stack([ox, oy]))
        _, nn = tree.query(np.column_stack([px, py]), k=1)
    votes = pd.DataFrame({"pub": units.pub_unit, "cand": units.fix_unit[nn]})
    counts = votes.value_counts().rename("n").reset_index()
    best = counts.groupby("pub")["n"].transform("max")
    top = counts[counts["n"] == best]
    ties = top.groupby("pub")["cand"].agg(list)
    credit = [(pub in cands) / len(cands) for pub, cands in ties.items()]
    n = len(credit)
    return {"attack": "nearest-fix vote, space-time" if use_time else "nearest-fix vote, space",
            "trajectories": n, "top1_accuracy": float(np.mean(credit)) if n else math.nan,
            "random_guess": 1.0 / units.n_units}


def uniqueness(p: Prepared, units: Units, candidates: pd.DataFrame | None = None, *,
               candidate_units: np.ndarray | None = None, k: int = 2,
               tolerance_m: float = 100.0, tolerance_s: float | None = 900.0, trials: int = 5,
               rng: RngLike = 0) -> dict[str, Any]:
    """Share of trajectories singled out by k of their true points (point attack).

    The attacker knows k random true fixes (place and time) of a target and looks for the
    trajectories in `candidates` (the original fixes when None, else a published table) having,
    for every known fix, a point within `tolerance_m` metres on each axis and `tolerance_s`
    seconds (`tolerance_s=None`: places only, time ignored). The target is uniquely
    identified when the match set is exactly {target};
    `unique_share` is the share of targets identified in at least one of `trials` draws
    (scikit-mobility's risk = 1), `mean_risk` the mean over draws of 1/|matches| when the target
    is among the matches (0 otherwise: the attacker was misled)."""
    if k < 1 or trials < 1:
        raise InvalidInputError("k and trials must be >= 1")
    gen = make_rng(rng)
    proj = _dataset_projection(p)
    if candidates is None:
        clat, clon, ct, cu = p.lat, p.lon, p.t, units.fix_unit
    else:
        clat = candidates["lat"].to_numpy(float)
        clon = candidates["lon"].to_numpy(float)
        ct = candidates["time"].to_numpy().astype("datetime64[ns]").view(np.int64)
        cu = units.pub_unit if candidate_units is None else candidate_units
    t0 = p.t.min()

    def scaled(lat: np.ndarray, lon: np.ndarray, t: np.ndarray) -> np.ndarray:
        x, y = proj.forward(lat, lon)
        if tolerance_s is None:
            return np.column_stack([x / tolerance_m, y / tolerance_m])
        return np.column_stack([x / tolerance_m, y / tolerance_m, (t - t0) / 1e9 / tolerance_s])

    tree = cKDTree(scaled(clat, clon, ct))
    order = np.argsort(units.fix_unit, kind="stable")
    bounds = np.searchsorted(units.fix_unit[order], np.arange(units.n_units + 1))
    identified, risks, targets = [], [], 0
    for u in range(units.n_units):
        members = order[bounds[u]:bounds[u + 1]]
        if len(members) < k:
            continue
        targets += 1
        hit = False
        for _ in range(trials):
            pick = gen.choice(members, size=k, replace=False)
            q = scaled(p.lat[pick], p.lon[pick], p.t[pick])
            match: set[int] | None = None
            for idx in tree.query_ball_point(q, r=1.0, p=np.inf):
                found = set(np.unique(cu[np.asarray(idx, dtype=np.int64)]).tolist())
                match = found if match is None else match & found
                if not match:
                    break
            match = match or set()
            risks.append(1.0 / len(match) if u in match else 0.0)
            hit = hit or match == {u}
        identified.append(hit)
    return {"k": k, "targets": targets, "unique_share": float(np.mean(identified))
            if identified else math.nan, "mean_risk": float(np.mean(risks)) if risks else math.nan,
            "tolerance_m": tolerance_m, "tolerance_s": tolerance_s, "trials": trials}
