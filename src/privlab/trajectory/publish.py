"""Akin et al.'s model (Algorithm 1) with a sound noise step: window means T', then noise T''.

Per trajectory, split into trips at time gaps so that no window spans two trips: windows of
PB consecutive fixes with a stride (1 = the authors' sliding windows, PB = non-overlapping),
T' = the window means, T'' = T' plus noise. Three noise settings, each with an honest
guarantee object:

- ``planar`` (default): geo-indistinguishability (planar Laplace, Andres et al. 2013) on the
  window means in a public local metric projection: any two true window means within r metres
  are e^epsilon-indistinguishable. Radius ~ Gamma(2, r / epsilon) exactly (sum of two
  exponentials), angle uniform, output snapped to a power-of-two metre grid.
- ``laplace`` + ``bbox``: classic local DP, fixes clamped to a public box, per-axis discrete
  Laplace with sensitivity (box width) / PB per axis, epsilon split evenly over the two axes.
- ``laplace`` + ``paper``: the authors' data-derived bounds (min/max of the window's own
  fixes, one coordinate at a time, epsilon per coordinate, output clipped into those bounds,
  as ``diffprivlib.tools.mean`` with ``bounds`` does). NOT differentially private: labelled
  so in the guarantee and warned about; for comparison only.

Everything is vectorised over all windows of all trajectories at once (no per-point loop).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from privlab import __version__
from privlab.core.guarantee import PrivacyGuarantee, check_epsilon
from privlab.core.rng import SEEDED_NOTE, RngLike, is_seeded, make_rng
from privlab.core.samplers import (
    discrete_laplace,
    laplace_scale_at_least,
    power_of_two_at_most,
    round_to_grid,
)
from privlab.errors import InvalidInputError
from privlab.trajectory.geo import BBox, LocalProjection
from privlab.trajectory.io import read_trajectories
from privlab.trajectory.preprocess import Filters, Prepared, _check_gap, prepare

MECHANISMS = ("planar", "laplace")
SENSITIVITIES = ("bbox", "paper")
GRID_RESOLUTION = 1024

#: A public box around Beijing (approximately the 6th Ring Road), for the bundled GeoLife sample.
BEIJING_BBOX = BBox(39.68, 116.07, 40.18, 116.72)

PAPER_REASON = ("the Laplace scale and the clipping interval come from the window's own fixes "
                "(max - min of each coordinate), so the noise depends on the data: a window whose "
                "fixes share a coordinate is published exactly, outputs are clipped into the "
                "interval of the user's own fixes, and epsilon is spent once per coordinate "
                "without composition")


class NotPrivateWarning(UserWarning):
    """Raised (as a warning) when a setting that is not differentially private is used."""


@dataclass
class Windows:
    """T': one row per window, with the index of its first fix in the prepared arrays."""

    codes: np.ndarray
    trip: np.ndarray       # trip number within its id (0, 1, ...)
    window: np.ndarray     # window number within its trip
    t: np.ndarray          # int64 ns, mean time of the window's fixes
    lat: np.ndarray
    lon: np.ndarray
    start: np.ndarray      # index of the window's first fix
    size: int
    stride: int
    trip_of_window: np.ndarray  # global trip number per window
    counts: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.t)


def check_window(window: int, stride: int) -> tuple[int, int]:
    """Validate PB >= 1 and 1 <= stride <= PB (a larger stride would drop fixes unseen)."""
    if isinstance(window, bool) or not isinstance(window, (int, np.integer)) or window < 1:
        raise InvalidInputError(f"--window (PB) must be an integer >= 1, got {window!r}")
    if isinstance(stride, bool) or not isinstance(stride, (int, np.integer)) or not (
            1 <= stride <= window):
        raise InvalidInputError(f"--stride must be an integer between 1 (sliding windows) and "
                                f"--window {window} (non-overlapping), got {stride!r}")
    return int(window), int(stride)


def make_windows(p: Prepared, window: int, stride: int = 1, gap_minutes: float = 30.0) -> Windows:
    """Group each trip's fixes into windows and average them (T'), fully vectorised."""
    window, stride = check_window(window, stride)
    _check_gap(gap_minutes)
    n = len(p)
    new = p.trip_starts(gap_minutes)
    trip_start = np.flatnonzero(new)
    trip_len = np.diff(np.append(trip_start, n))
    trip_global = np.cumsum(new) - 1
    id_first_trip = np.zeros(int(p.codes.max()) + 1 if n else 1, dtype=np.int64)
    firsts = np.flatnonzero(np.r_[True, p.codes[1:] != p.codes[:-1]]) if n else np.array([], int)
    id_first_trip[p.codes[firsts]] = trip_global[firsts]
    m = np.where(trip_len >= window, (trip_len - window) // stride + 1, 0)
    total = int(m.sum())
    short = trip_len < window
    counts = {
        "trips": int(len(trip_start)),
        "trips_shorter_than_window": int(short.sum()),
        "fixes_in_short_trips": int(trip_len[short].sum()),
        "fixes_not_in_any_window": int(
            trip_len[short].sum() + np.where(short, 0, (trip_len - window) % stride).sum()),
        "windows": total,
        "max_windows_per_trip": int(m.max()) if len(m) else 0,
    }
    if total == 0:
        raise InvalidInputError(
            f"every trip is shorter than --window {window} (longest trip: {int(trip_len.max())} "
            f"fixes); lower --window or raise --gap (now {gap_minutes:g} minutes)")
    if stride == 1:  # every fix starts a window except the last PB-1 of its trip
        valid = np.ones(n, dtype=bool)
        if window > 1:
            trip_end = np.append(trip_start[1:], n)
            tail = trip_end[:, None] - np.arange(1, window)[None, :]
            tail = tail[tail >= trip_start[:, None]]
            valid[tail] = False
        start = np.flatnonzero(valid)
        w_trip = trip_global[start]
        w_idx = start - trip_start[w_trip]
    else:
        offsets = np.cumsum(m) - m
        w_trip = np.repeat(np.arange(len(trip_start)), m)
        w_idx = np.arange(total) - np.repeat(offsets, m)
        start = trip_start[w_trip] + stride * w_idx
    # Window sums over every candidate start, on contiguous slices, then one gather each.
    k = n - window + 1
    lat_sum = p.lat[:k].copy()
    lon_sum = p.lon[:k].copy()
    dt_sum = np.zeros(k, dtype=np.int64)
    for j in range(1, window):
        lat_sum += p.lat[j:j + k]
        lon_sum += p.lon[j:j + k]
        dt_sum += p.t[j:j + k] - p.t[:k]
    codes = p.codes[start]
    return Windows(codes=codes, trip=w_trip - id_first_trip[codes], window=w_idx,
                   t=p.t[start] + dt_sum[start] // window, lat=lat_sum[start] / window,
                   lon=lon_sum[start] / window, start=start, size=window, stride=stride,
                   trip_of_window=w_trip, counts=counts)


def windows_per_fix(window: int, stride: int) -> int:
    """The most windows one fix can belong to: ceil(PB / stride)."""
    return -(-window // stride)


def _window_reduce(values: np.ndarray, w: Windows, op: np.ufunc) -> np.ndarray:
    """op-reduce each window's fixes: on contiguous slices over every candidate start, then
    one gather (cheaper than PB gathers)."""
    k = len(values) - w.size + 1
    acc = values[:k].copy()
    for j in range(1, w.size):
        op(acc, values[j:j + k], out=acc)
    return acc[w.start]


def _planar(w: Windows, epsilon: float, radius: float, box: BBox,
            gen: np.random.Generator) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    proj = LocalProjection.for_bbox(box)
    x, y = proj.forward(w.lat, w.lon)
    scale = radius / epsilon  # metres; radius ~ Gamma(shape 2, scale)
    n = len(w)
    rho = gen.standard_exponential(n)
    rho += gen.standard_exponential(n)
    rho *= scale
    # angle uniform on [0, 2 pi): cos from the angle, sin = +-sqrt(1 - cos^2) with the sign of
    # the half-turn (the same point as sin(theta), one transcendental call instead of two)
    u = gen.random(n)
    cos_t = np.cos(u * (2.0 * math.pi))
    sin_t = np.sqrt(np.maximum(1.0 - cos_t * cos_t, 0.0))
    sin_t[u >= 0.5] *= -1.0
    g = power_of_two_at_most(radius / GRID_RESOLUTION)
    cos_t *= rho
    sin_t *= rho
    x += cos_t
    y += sin_t
    xs = np.rint(x / g) * g
    ys = np.rint(y / g) * g
    lat, lon = proj.inverse(xs, ys)
    info = {"distribution": "planar_laplace", "epsilon_per_metre": epsilon / radius,
            "radius_m": radius, "gamma_shape": 2, "gamma_scale_m": scale,
            "mean_displacement_m": 2 * scale, "rmse_radial_m": math.sqrt(6) * scale,
            "rmse_per_axis_m": math.sqrt(3) * scale, "grid_m": g,
            "projection": proj.to_dict(), "max_stretch_in_box": proj.max_stretch(box)}
    return lat, lon, info


def _laplace_bbox(p: Prepared, w: Windows, epsilon: float, box: BBox,
                  gen: np.random.Generator) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    eps_axis = epsilon / 2.0
    out: list[np.ndarray] = []
    info: dict[str, Any] = {"distribution": "discrete_laplace", "epsilon_per_axis": eps_axis}
    for name, values, lo, hi in (("lat", p.lat, box.lat0, box.lat1),
                                 ("lon", p.lon, box.lon0, box.lon1)):
        mean = _window_reduce(np.clip(values, lo, hi), w, np.add) / w.size
        sens = (hi - lo) / w.size
        g = power_of_two_at_most(sens / GRID_RESOLUTION)
        steps = math.floor(sens / g) + 1
        scale_steps = laplace_scale_at_least(steps, eps_axis)  # never below the exact ratio
        noisy = round_to_grid(mean, g) + discrete_laplace(scale_steps, size=len(w), rng=gen)
        out.append(noisy.astype(np.float64) * g)
        info[name] = {"sensitivity_deg": sens, "grid_deg": g, "grid_sensitivity_steps": steps,
                      "scale_deg": scale_steps * g,
                      "rmse_deg": math.sqrt(2) * scale_steps * g}
    return out[0], out[1], info


def _laplace_paper(p: Prepared, w: Windows, epsilon: float,
                   gen: np.random.Generator) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    out = []
    for values, mean in ((p.lat, w.lat), (p.lon, w.lon)):
        lo = _window_reduce(values, w, np.minimum)
        hi = _window_reduce(values, w, np.maximum)
        noisy = mean + gen.laplace(0.0, 1.0, size=len(w)) * ((hi - lo) / epsilon)
        out.append(np.clip(noisy, lo, hi))
    info = {"distribution": "laplace (continuous, truncated to the window's own min/max)",
            "epsilon_per_coordinate": epsilon,
            "scale": "(max - min of the window's fixes) / epsilon, per coordinate"}
    return out[0], out[1], info


def _guarantees(mechanism: str, sensitivity: str, epsilon: float, radius: float, w: Windows,
                box: BBox | None, noise: dict[str, Any], seeded: bool
                ) -> tuple[PrivacyGuarantee, PrivacyGuarantee]:
    pb, s = w.size, w.stride
    k = windows_per_fix(pb, s)
    max_w = w.counts["max_windows_per_trip"]
    common = ["timestamps, trip boundaries and the number of fixes and windows are published "
              "unchanged: they are not protected (named in not_covered)",
              "preprocessing filters (bbox, time window, heading, speed) keep or drop fixes by "
              "their values; the guarantee covers the fixes that were kept"]
    if seeded:
        common.append(SEEDED_NOTE)
    if mechanism == "planar":
        per_fix = k * epsilon / pb
        g = noise["grid_m"]
        notes = [
            f"protection radius r = {radius:g} m: two true window means within r are "
            f"e^{epsilon:g}-indistinguishable; at distance d the bound is e^(epsilon*d/r) "
            f"(geo-indistinguishability, {epsilon / radius:.4g} per metre)",
            f"per window: epsilon {epsilon:g} at radius r (the --epsilon parameter)",
            f"per fix: one fix moved by <= r moves each window mean holding it by <= r/{pb}; it "
            f"lies in up to {k} window(s) at stride {s}, so epsilon = {k} x {epsilon:g} / {pb} "
            f"= {per_fix:.4g}",
            f"per trip: every fix of a trip moved by <= r costs epsilon {epsilon:g} per window; "
            f"the longest trip here has {max_w} windows: {max_w * epsilon:.4g}",
            "distances in metres on the mean-radius sphere; equirectangular projection with its "
            "reference latitude at the poleward box edge, so projected distances never exceed "
            "true ones inside the box",
            f"outputs snapped to a {g:g} m grid in the projection (post-processing; it removes "
            "input-dependent floating-point low bits)",
        ]
        fix_g = PrivacyGuarantee(
            epsilon=per_fix, neighbouring="location_radius", model="local",
            mechanism=f"planar Laplace on window means (PB={pb}, stride {s}, r={radius:g} m)",
            accountant="basic composition over overlapping windows", notes=tuple(notes + common))
        trip_g = PrivacyGuarantee(
            epsilon=max_w * epsilon, neighbouring="location_radius", model="local",
            mechanism=fix_g.mechanism, accountant="basic composition over the trip's windows",
            notes=(f"every fix of one trip moved by at most r = {radius:g} m; longest trip: "
                   f"{max_w} windows x epsilon {epsilon:g}",) + tuple(common))
        return _label(fix_g), _label(trip_g)
    if sensitivity == "bbox":
        assert box is not None
        per_fix = k * epsilon
        trip_eps = pb * max_w * epsilon
        notes = [
            f"neighbouring: one fix moved anywhere within the public box {box} "
            f"(LAT0,LON0,LAT1,LON1)",
            f"per window: epsilon {epsilon:g} (epsilon/2 per axis, sensitivity (box width)/{pb} "
            f"per axis: {noise['lat']['sensitivity_deg']:.4g} deg lat, "
            f"{noise['lon']['sensitivity_deg']:.4g} deg lon)",
            f"per fix: a fix lies in up to {k} window(s) at stride {s}: epsilon = {k} x "
            f"{epsilon:g} = {per_fix:.4g}",
            f"outputs on power-of-two degree grids ({noise['lat']['grid_deg']:g} lat, "
            f"{noise['lon']['grid_deg']:g} lon), rounding paid for in the grid sensitivity",
        ]
        fix_g = PrivacyGuarantee(
            epsilon=per_fix, neighbouring="location_event", model="local",
            mechanism=f"per-axis discrete Laplace on clamped window means (PB={pb}, stride {s})",
            accountant="basic composition over overlapping windows", notes=tuple(notes + common))
        trip_g = PrivacyGuarantee(
            epsilon=trip_eps, neighbouring="trajectory", model="local",
            mechanism=fix_g.mechanism, accountant="basic composition over the trip's windows",
            notes=(f"a whole trip replaced within the box: each of its (up to {max_w}) windows has "
                   f"{pb} fixes at epsilon {epsilon:g} each: {trip_eps:.4g}",) + tuple(common))
        return _label(fix_g), _label(trip_g)
    ng = PrivacyGuarantee.not_private(
        "window mean + Laplace with data-derived bounds (the authors' setting)", PAPER_REASON,
        model="local")
    ng = ng.with_notes("for comparison with Akin et al. (2021) only; use --mechanism planar or "
                       "--mechanism laplace --sensitivity bbox for a real guarantee")
    ng = _label(ng).with_not_covered(
        "lat, lon (noise scale and clipping interval from each window's own min/max fixes)")
    return ng, ng


#: What every trajectory release publishes exactly, outside any noise. In the local model each
#: user's own published rows depend on that user's data; these parts do so without noise.
NOT_COVERED = (
    "time, trip and window columns and the ids (each user's window times and trip structure "
    "are published exactly; the neighbouring relation moves locations only)",
    "counts.windows, counts.trips, counts.ids, counts.max_windows_per_trip and the per-trip "
    "epsilon (functions of the published time/trip columns)",
)
COVERS = ("lat, lon of every published window (noisy window means)",)


def _label(g: PrivacyGuarantee) -> PrivacyGuarantee:
    """What the claim covers and what is published outside it (docs/guarantees.md)."""
    return g.with_covers(*COVERS).with_not_covered(*NOT_COVERED)


#: Counts that can be recomputed from the published file itself (its rows, ids and trips).
PUBLISHED_COUNTS = ("windows", "trips", "ids", "max_windows_per_trip")


@dataclass
class TrajectoryRelease:
    """The published windows T'' with their guarantees.

    `averaged` holds the true window means T' for evaluation in memory; it is NOT private and
    is never written next to the published file.
    """

    published: pd.DataFrame
    guarantee: PrivacyGuarantee
    trip_guarantee: PrivacyGuarantee
    parameters: dict[str, Any]
    counts: dict[str, Any]
    noise: dict[str, Any]
    warnings: list[str] = field(default_factory=list)
    averaged: pd.DataFrame | None = field(default=None, repr=False)

    def sidecar(self) -> dict[str, Any]:
        """The JSON sidecar: parameters, published counts, noise and guarantees (no data).

        Only the counts that are functions of the published rows go in (PUBLISHED_COUNTS);
        the input-side counts (fixes read, dropped, in short trips) are the curator's, in
        `curator_counts()`, never written next to the release.
        """
        return {"kind": "privlab.trajectory.release", "privlab_version": __version__,
                "parameters": self.parameters, "guarantee": self.guarantee.to_dict(),
                "trip_guarantee": self.trip_guarantee.to_dict(), "noise": self.noise,
                "counts": {k: self.counts[k] for k in PUBLISHED_COUNTS if k in self.counts},
                "warnings": self.warnings,
                "columns": list(map(str, self.published.columns))}

    def curator_counts(self) -> dict[str, Any]:
        """Exact counts of the input (read, dropped, unpublished): for the data's curator
        only, not protected, never in the sidecar."""
        return {k: v for k, v in self.counts.items() if k not in PUBLISHED_COUNTS}


def _subset(w: Windows, rows: np.ndarray) -> Windows:
    return replace(w, codes=w.codes[rows], trip=w.trip[rows], window=w.window[rows], t=w.t[rows],
                   lat=w.lat[rows], lon=w.lon[rows], start=w.start[rows],
                   trip_of_window=w.trip_of_window[rows])


def _per_user(p: Prepared, w: Windows, seed: int, noisy: Any
              ) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """Seeded runs draw each user's noise from a stream keyed by (seed, that user's id).

    In the local model every user randomizes their own trajectory; keying the stream by the
    user (not by the position in a shared stream) keeps the other users' published rows
    identical when one user is added, removed or changed (the neighbouring-dataset harness).
    """
    import hashlib

    lat = np.empty(len(w))
    lon = np.empty(len(w))
    noise: dict[str, Any] = {}
    bounds = np.flatnonzero(np.r_[True, w.codes[1:] != w.codes[:-1], True])
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        uid = str(p.ids[w.codes[a]])
        digest = hashlib.sha256(uid.encode("utf-8")).digest()
        key = [int.from_bytes(digest[i:i + 4], "little") for i in range(0, 16, 4)]
        gen = np.random.default_rng(np.random.SeedSequence([seed, *key]))
        rows = np.arange(a, b)
        lat[rows], lon[rows], noise = noisy(_subset(w, rows), gen)
    return lat, lon, noise


def _frame(p: Prepared, w: Windows, lat: np.ndarray, lon: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame({
        "id": pd.Categorical.from_codes(w.codes, categories=p.ids),
        "trip": w.trip, "window": w.window, "time": w.t.view("datetime64[ns]"),
        "lat": lat, "lon": lon})


def anonymize(data: pd.DataFrame | Prepared | str | Path, *, window: int, epsilon: float,
              stride: int = 1, mechanism: str = "planar", radius: float = 100.0,
              bbox: BBox | str | tuple[float, float, float, float] | None = None,
              sensitivity: str = "bbox", gap_minutes: float = 30.0,
              filters: Filters | None = None, rng: RngLike = None, on_invalid: str = "error",
              keep_averaged: bool = True, read_options: dict[str, Any] | None = None,
              seed_per_user: bool = False) -> TrajectoryRelease:
    """Publish trajectories with Akin et al.'s (2021) Algorithm 1 and a stated guarantee.

    `bbox` is the public box (LAT0,LON0,LAT1,LON1): it filters the fixes, fixes the planar
    projection and gives the laplace sensitivity; it must not be derived from the data.
    `seed_per_user` (with an int `rng`): draw each user's noise from a stream keyed by the seed
    and the user's id, so other users' rows do not move when one user's data changes (what the
    CLI does with --seed); the default draws one vectorised stream, much faster for the
    statistical tests' hundreds of thousands of trajectories.
    """
    epsilon = check_epsilon(epsilon)
    window, stride = check_window(window, stride)
    if mechanism not in MECHANISMS:
        raise InvalidInputError(f"--mechanism must be planar or laplace, got {mechanism!r}")
    if sensitivity not in SENSITIVITIES:
        raise InvalidInputError(f"--sensitivity must be bbox or paper, got {sensitivity!r}")
    if mechanism == "planar" and sensitivity != "bbox":
        raise InvalidInputError("--sensitivity applies to --mechanism laplace only; planar "
                                "Laplace is calibrated by --radius and --epsilon")
    try:
        radius = float(radius)
    except (TypeError, ValueError):
        raise InvalidInputError(f"--radius must be a number of metres > 0, got {radius!r}") \
            from None
    if not (math.isfinite(radius) and radius > 0):
        raise InvalidInputError(f"--radius must be a number of metres > 0, got {radius!r}")
    box = BBox.parse(bbox)
    filters = filters or Filters()
    if box is None:
        box = filters.bbox
    elif filters.bbox is None:
        filters = replace(filters, bbox=box)
    elif filters.bbox != box:
        raise InvalidInputError("two different boxes given (bbox and filters.bbox); pass one")
    needs_box = mechanism == "planar" or sensitivity == "bbox"
    if needs_box and box is None:
        what = ("fixes the metric projection of planar Laplace" if mechanism == "planar"
                else "gives the sensitivity (box width / PB)")
        raise InvalidInputError(f"--mechanism {mechanism} needs a public --bbox "
                                f"LAT0,LON0,LAT1,LON1: it {what}; a box derived from the data "
                                "would not be private")
    if isinstance(data, (str, Path)):
        data = read_trajectories(data, **(read_options or {}))
    filtered_here = not isinstance(data, Prepared)  # prepare() applies the box filter
    p = prepare(data, filters, on_invalid=on_invalid)
    if needs_box and not filtered_here and not box.contains(p.lat, p.lon).all():
        raise InvalidInputError(f"some fixes lie outside --bbox {box}: prepare the data with "
                                "the same box as filter")
    w = make_windows(p, window, stride, gap_minutes)
    warn: list[str] = []

    def noisy(part: Windows, gen: np.random.Generator
              ) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
        if mechanism == "planar":
            return _planar(part, epsilon, radius, box, gen)
        if sensitivity == "bbox":
            return _laplace_bbox(p, part, epsilon, box, gen)
        return _laplace_paper(p, part, epsilon, gen)

    if seed_per_user and is_seeded(rng) and not isinstance(rng, np.random.Generator):
        lat, lon, noise = _per_user(p, w, int(rng), noisy)  # type: ignore[arg-type]
    else:
        lat, lon, noise = noisy(w, make_rng(rng))
    if mechanism == "laplace" and sensitivity == "paper":
        msg = ("--sensitivity paper is NOT differentially private: " + PAPER_REASON +
               "; use it only to compare with Akin et al. (2021)")
        warn.append(msg)
        warnings.warn(msg, NotPrivateWarning, stacklevel=2)
    g_fix, g_trip = _guarantees(mechanism, sensitivity, epsilon, radius, w, box, noise,
                                is_seeded(rng))
    parameters = {"window": window, "stride": stride, "epsilon": epsilon,
                  "mechanism": mechanism,
                  "sensitivity": sensitivity if mechanism == "laplace" else None,
                  "radius_m": radius if mechanism == "planar" else None,
                  "bbox": box.to_list() if box else None, "gap_minutes": float(gap_minutes),
                  "filters": filters.to_dict(), "on_invalid": on_invalid,
                  "seeded": is_seeded(rng), "windows_per_fix": windows_per_fix(window, stride),
                  "read_options": dict(read_options or {})}
    counts = {**p.counts, **w.counts, "ids": int(len(np.unique(w.codes)))}
    return TrajectoryRelease(
        published=_frame(p, w, lat, lon), guarantee=g_fix, trip_guarantee=g_trip,
        parameters=parameters, counts=counts, noise=noise, warnings=warn,
        averaged=_frame(p, w, w.lat, w.lon) if keep_averaged else None)


NOT_DP_COLOUR = "#c00000"
DP_COLOUR = "#222222"


@dataclass(frozen=True)
class GuaranteeLabel:
    """One line saying what a release guarantees, for titles, legends and CLI summaries.

    Built from the sidecar (not from the parameters alone) so that a release whose guarantee
    says `is_dp` False can never be shown with a bare "epsilon = 2".
    """

    text: str
    is_dp: bool

    @property
    def colour(self) -> str:
        return DP_COLOUR if self.is_dp else NOT_DP_COLOUR


def _num(x: Any) -> str:
    return f"{x:g}" if isinstance(x, (int, float)) else "?"


def guarantee_label(sidecar: dict[str, Any]) -> GuaranteeLabel:
    """The honest one-line label of a release (`TrajectoryRelease.sidecar()` or a read sidecar).

    Anything but an explicit ``is_dp: true`` guarantee with a finite epsilon is labelled
    NOT DP: a missing or damaged guarantee must not read as a private release.
    """
    g = sidecar.get("guarantee") or {}
    params = sidecar.get("parameters") or {}
    eps = _num(params.get("epsilon"))
    pb, stride = params.get("window"), params.get("stride")
    shape = f"PB {pb}, stride {stride}"
    per_fix = g.get("epsilon")
    # a claim on the locations with the times and trip structure published outside it
    locations_only = (g.get("is_dp") is False and list(g.get("not_covered") or []) ==
                      list(NOT_COVERED) and isinstance(per_fix, (int, float))
                      and math.isfinite(per_fix))
    if locations_only:
        g = {**g, "is_dp": True}
        shape += "; not covered: times and trip structure (published exactly)"
    if g.get("is_dp") is not True or not isinstance(per_fix, (int, float)) \
            or not math.isfinite(per_fix):
        if params.get("mechanism") == "laplace" and params.get("sensitivity") == "paper":
            return GuaranteeLabel(
                f"NOT DP (data-dependent bounds): the epsilon = {eps} parameter gives no "
                f"guarantee; {shape}", False)
        return GuaranteeLabel(f"NOT DP (no differential-privacy guarantee recorded); {shape}",
                              False)
    ok = not locations_only
    if params.get("mechanism") == "planar":
        radius = _num(params.get("radius_m"))
        return GuaranteeLabel(
            f"geo-indistinguishability (local DP) on locations, planar Laplace r = {radius} m: "
            f"epsilon = {eps} per window, {per_fix:.4g} per fix moved <= r; {shape}", ok)
    return GuaranteeLabel(
        f"local DP on locations, per-axis Laplace, box sensitivity: epsilon = {eps} per "
        f"window, {per_fix:.4g} per fix moved in the box; {shape}", ok)


def sidecar_path(path: str | Path) -> Path:
    """Where the JSON sidecar of a published file lives: `<file>.json`."""
    path = Path(path)
    return path.with_name(path.name + ".json")


def write_release(release: TrajectoryRelease, path: str | Path) -> Path:
    """Write T'' (CSV / CSV.gz / Parquet) and its JSON sidecar, both atomically."""
    import json

    from privlab.utils.atomic import atomic_write_frame, atomic_write_text

    path = Path(path)
    frame = release.published.copy()
    frame["id"] = frame["id"].astype("str")
    atomic_write_frame(frame, path)
    side = sidecar_path(path)
    atomic_write_text(side, json.dumps(release.sidecar(), indent=2, default=str) + "\n")
    return side


def read_sidecar(path: str | Path) -> dict[str, Any]:
    """The sidecar of a published file, or an error saying it is needed and where."""
    import json

    side = sidecar_path(path)
    if not side.exists():
        raise InvalidInputError(f"{side} not found: evaluate/plot need the JSON sidecar written "
                                "by `privlab trajectory anonymize` next to the published file")
    try:
        data = json.loads(side.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InvalidInputError(f"{side} is not valid JSON: {exc}") from None
    if data.get("kind") != "privlab.trajectory.release":
        raise InvalidInputError(f"{side} is not a privlab trajectory sidecar")
    return data
