"""Validation, ordering, de-duplication and Akin et al.'s (2021) filters, on flat NumPy arrays.

Documented handling of messy input (never silent):
- NaN or out-of-range coordinates: an error naming the column and the first bad row, or, with
  `on_invalid="drop"`, dropped and counted.
- Unsorted input: sorted by (id, time) (stable), and `counts["input_was_sorted"]` says so.
- Duplicate timestamps within one id: the first fix is kept, the others dropped and counted.
- A filter that leaves no point: an error naming the filter.
Every count ends up in the release's JSON sidecar.

Filters decide from locations which fixes are kept (as in Akin et al.: bounding box, time window,
heading range, plus speed outliers). The DP guarantee covers the fixes that were kept; the
decision to keep a fix is not randomised (see `docs/trajectory.md`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from privlab.errors import InvalidInputError
from privlab.trajectory.geo import BBox, bearing_deg, haversine_m
from privlab.trajectory.io import CANONICAL, from_frame

ON_INVALID = ("error", "drop")


@dataclass(frozen=True)
class Filters:
    """Preprocessing filters (all optional). `heading` is (lo, hi) in degrees, 0 = north,
    clockwise; lo > hi wraps through north (e.g. 350, 10)."""

    bbox: BBox | None = None
    time_window: tuple[pd.Timestamp, pd.Timestamp] | None = None
    heading: tuple[float, float] | None = None
    max_speed_kmh: float | None = None

    def __post_init__(self) -> None:
        if self.heading is not None:
            lo, hi = self.heading
            if not all(math.isfinite(v) and 0 <= v <= 360 for v in (lo, hi)):
                raise InvalidInputError(f"--heading must be two angles in [0, 360], got "
                                        f"{self.heading}")
        if self.max_speed_kmh is not None and not (
                math.isfinite(self.max_speed_kmh) and self.max_speed_kmh > 0):
            raise InvalidInputError(f"--max-speed must be a number > 0 km/h, got "
                                    f"{self.max_speed_kmh}")
        if self.time_window is not None:
            start, end = (pd.Timestamp(v) for v in self.time_window)
            if start >= end:
                raise InvalidInputError(f"--time-window start {start} must be before end {end}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "bbox": self.bbox.to_list() if self.bbox else None,
            "time_window": [str(pd.Timestamp(v)) for v in self.time_window]
            if self.time_window else None,
            "heading": list(self.heading) if self.heading else None,
            "max_speed_kmh": self.max_speed_kmh,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> Filters:
        data = data or {}
        return cls(bbox=BBox.parse(data.get("bbox")),
                   time_window=tuple(pd.Timestamp(v) for v in data["time_window"])
                   if data.get("time_window") else None,
                   heading=tuple(data["heading"]) if data.get("heading") else None,
                   max_speed_kmh=data.get("max_speed_kmh"))


@dataclass
class Prepared:
    """Fixes sorted by (id, time), one per (id, time), as flat arrays."""

    ids: np.ndarray          # unique trajectory ids (str), sorted; codes index into it
    codes: np.ndarray        # int64, per fix
    t: np.ndarray            # int64 nanoseconds since the epoch, per fix
    lat: np.ndarray          # float64 degrees
    lon: np.ndarray          # float64 degrees
    heading: np.ndarray | None = None
    counts: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.t)

    def take(self, keep: np.ndarray) -> Prepared:
        return Prepared(self.ids, self.codes[keep], self.t[keep], self.lat[keep], self.lon[keep],
                        None if self.heading is None else self.heading[keep], self.counts)

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame({"id": pd.Categorical.from_codes(self.codes, categories=self.ids),
                             "time": self.t.view("datetime64[ns]"), "lat": self.lat,
                             "lon": self.lon})

    def trip_starts(self, gap_minutes: float) -> np.ndarray:
        """Boolean per fix: True where a new trip starts (new id, or a time gap > gap)."""
        gap_ns = _check_gap(gap_minutes)
        new = np.ones(len(self.t), dtype=bool)
        if len(self.t) > 1:
            new[1:] = (self.codes[1:] != self.codes[:-1]) | (np.diff(self.t) > gap_ns)
        return new


def _check_gap(gap_minutes: float) -> int:
    try:
        gap = float(gap_minutes)
    except (TypeError, ValueError):
        raise InvalidInputError(f"--gap must be a number of minutes > 0, got {gap_minutes!r}") \
            from None
    if not (math.isfinite(gap) and gap > 0):
        raise InvalidInputError(f"--gap must be a number of minutes > 0, got {gap_minutes!r}")
    return int(gap * 60e9)


def _validate(frame: pd.DataFrame, on_invalid: str, counts: dict[str, Any]) -> pd.DataFrame:
    lat = frame["lat"].to_numpy(dtype=np.float64)
    lon = frame["lon"].to_numpy(dtype=np.float64)
    missing = np.isnan(lat) | np.isnan(lon)
    out_of_range = ~missing & ((np.abs(lat) > 90) | (np.abs(lon) > 180) |
                               ~np.isfinite(lat) | ~np.isfinite(lon))
    if on_invalid == "error":
        # one line naming the problem and the fix: no count, row, id or value of the
        # private fixes (issue 21)
        if missing.any():
            raise InvalidInputError(
                "a fix has a missing (NaN) latitude or longitude; remove such fixes or pass "
                "--drop-invalid")
        if out_of_range.any():
            hint = ""
            if (np.abs(lat) > 90).any() and np.all(np.abs(lon[~missing]) <= 90):
                hint = "; latitude and longitude look swapped (check --lat-col/--lon-col)"
            raise InvalidInputError(
                f"a fix is outside lat [-90, 90] / lon [-180, 180]{hint}; fix such fixes or "
                "pass --drop-invalid")
    bad = missing | out_of_range
    counts["invalid_dropped"] = int(bad.sum())
    return frame.loc[~bad] if bad.any() else frame


def _heading_of(p: Prepared) -> np.ndarray:
    """Heading per fix from consecutive fixes of the same id: towards the next fix, the last
    fix of an id takes the heading from its predecessor; a fix that did not move inherits the
    previous heading (NaN if none, and it is then dropped by a heading filter)."""
    n = len(p)
    head = np.full(n, np.nan)
    if n < 2:
        return head
    same = p.codes[1:] == p.codes[:-1]
    moved = (p.lat[1:] != p.lat[:-1]) | (p.lon[1:] != p.lon[:-1])
    b = bearing_deg(p.lat[:-1], p.lon[:-1], p.lat[1:], p.lon[1:])
    ok = same & moved
    head[:-1][ok] = b[ok]
    last = np.ones(n, dtype=bool)
    last[:-1] = ~same
    prev_ok = np.zeros(n, dtype=bool)
    prev_ok[1:] = ok
    fill = last & prev_ok
    head[fill] = np.r_[np.nan, b][fill]
    # forward-fill within an id for fixes that did not move
    s = pd.Series(head)
    return s.groupby(p.codes).ffill().to_numpy()


def _in_heading(head: np.ndarray, lo: float, hi: float) -> np.ndarray:
    if lo <= hi:
        return (head >= lo) & (head <= hi)
    return (head >= lo) | (head <= hi)


def _speed_outliers(p: Prepared, vmax_ms: float, max_passes: int = 20) -> np.ndarray:
    """Mask of spike fixes: both speeds (from the previous and to the next fix of the same id)
    exceed `vmax_ms`; an end fix is a spike when its one speed is too high while its neighbour's
    other speed is plausible. Repeated until stable (each pass is vectorised)."""
    keep = np.ones(len(p), dtype=bool)
    for _ in range(max_passes):
        idx = np.flatnonzero(keep)
        if len(idx) < 2:
            break
        c, t, la, lo = p.codes[idx], p.t[idx], p.lat[idx], p.lon[idx]
        same = c[1:] == c[:-1]
        dt = np.maximum(np.diff(t) / 1e9, 1e-9)
        v = haversine_m(la[:-1], lo[:-1], la[1:], lo[1:]) / dt
        fast = same & (v > vmax_ms)
        plausible = same & ~fast
        n = len(idx)
        v_in = np.zeros(n, dtype=bool)
        v_out = np.zeros(n, dtype=bool)
        v_in[1:] = fast
        v_out[:-1] = fast
        has_in = np.zeros(n, dtype=bool)
        has_out = np.zeros(n, dtype=bool)
        has_in[1:] = same
        has_out[:-1] = same
        ok_in = np.zeros(n, dtype=bool)   # previous fix's own incoming speed is plausible
        ok_in[2:] = plausible[:-1] & same[1:]
        ok_out = np.zeros(n, dtype=bool)  # next fix's own outgoing speed is plausible
        ok_out[:-2] = plausible[1:] & same[:-1]
        spike = (v_in & v_out) | (v_in & ~has_out & ok_in) | (v_out & ~has_in & ok_out)
        if not spike.any():
            break
        keep[idx[spike]] = False
    return ~keep


def _is_canonical(frame: pd.DataFrame) -> bool:
    """Already in the canonical layout (then the parsing step is skipped: 3.8 M rows matter)."""
    if not all(c in frame.columns for c in CANONICAL):
        return False
    return (pd.api.types.is_datetime64_any_dtype(frame["time"])
            and not isinstance(frame["time"].dtype, pd.DatetimeTZDtype)
            and pd.api.types.is_float_dtype(frame["lat"])
            and pd.api.types.is_float_dtype(frame["lon"])
            and not frame["time"].isna().any() and not frame["id"].isna().any())


def _id_codes(ids: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Integer codes of ids in sorted id order. Fast path for input already grouped in sorted
    id order (the usual case for exported trajectories): adjacent comparisons in Arrow, no
    hashing; otherwise pandas' sorted factorize."""
    try:
        arr = pa.array(ids)
        if isinstance(arr, pa.ChunkedArray):
            arr = arr.combine_chunks()
        if len(arr) > 1 and arr.null_count == 0:
            head, tail = arr.slice(0, len(arr) - 1), arr.slice(1)
            if not pc.any(pc.less(tail, head)).as_py():
                change = pc.not_equal(tail, head).to_numpy(zero_copy_only=False)
                starts = np.flatnonzero(np.r_[True, change])
                codes = np.cumsum(np.r_[False, change], dtype=np.int64)
                uniques = np.asarray(arr.take(pa.array(starts)).to_pylist(), dtype=object)
                return codes, uniques
    except (pa.ArrowException, TypeError, ValueError):
        pass
    codes, uniques = pd.factorize(ids, sort=True)
    return codes.astype(np.int64), np.asarray(uniques, dtype=object)


def prepare(data: pd.DataFrame | Prepared, filters: Filters | None = None, *,
            on_invalid: str = "error") -> Prepared:
    """Validate, sort by (id, time), de-duplicate timestamps and apply the filters."""
    if isinstance(data, Prepared):
        return data
    if on_invalid not in ON_INVALID:
        raise InvalidInputError(f"on_invalid must be 'error' or 'drop', got {on_invalid!r}")
    filters = filters or Filters()
    frame = data
    if not isinstance(frame, pd.DataFrame):
        raise InvalidInputError("trajectories must be a pandas DataFrame, a path or Prepared")
    if not _is_canonical(frame):
        frame = from_frame(frame, heading_col="heading" if "heading" in frame.columns else None)
    if len(frame) == 0:
        raise InvalidInputError("the trajectory table has no rows")
    counts: dict[str, Any] = {"input_fixes": int(len(frame))}
    frame = _validate(frame, on_invalid, counts)
    if len(frame) == 0:
        raise InvalidInputError("no valid fix left after dropping invalid coordinates")
    codes, uniques = _id_codes(frame["id"].astype("str"))
    t = frame["time"].to_numpy().astype("datetime64[ns]").view(np.int64)
    lat = frame["lat"].to_numpy(dtype=np.float64)
    lon = frame["lon"].to_numpy(dtype=np.float64)
    heading = frame["heading"].to_numpy(dtype=np.float64) if "heading" in frame.columns else None
    dc = np.diff(codes)
    is_sorted = bool(np.all((dc > 0) | ((dc == 0) & (np.diff(t) >= 0))))
    counts["input_was_sorted"] = is_sorted
    if not is_sorted:
        order = np.lexsort((t, codes))
        codes, t, lat, lon = codes[order], t[order], lat[order], lon[order]
        heading = None if heading is None else heading[order]
    dup = np.zeros(len(t), dtype=bool)
    dup[1:] = (codes[1:] == codes[:-1]) & (t[1:] == t[:-1])
    counts["duplicate_timestamps_dropped"] = int(dup.sum())
    p = Prepared(uniques, codes, t, lat, lon, heading, counts)
    if dup.any():
        p = p.take(~dup)
    if filters.bbox is not None:
        inside = filters.bbox.contains(p.lat, p.lon)
        counts["outside_bbox_dropped"] = int(len(inside) - np.count_nonzero(inside))
        if not inside.any():
            raise InvalidInputError(
                f"--bbox {filters.bbox} (LAT0,LON0,LAT1,LON1) excludes every fix; the data spans "
                f"lat {p.lat.min():.4f}..{p.lat.max():.4f}, lon {p.lon.min():.4f}.."
                f"{p.lon.max():.4f}")
        if counts["outside_bbox_dropped"]:
            p = p.take(inside)
    if filters.time_window is not None:
        start, end = (pd.Timestamp(v).as_unit("ns").value for v in filters.time_window)
        inside = (p.t >= start) & (p.t <= end)
        counts["outside_time_window_dropped"] = int((~inside).sum())
        if not inside.any():
            raise InvalidInputError(f"--time-window {filters.time_window[0]}..."
                                    f"{filters.time_window[1]} excludes every fix")
        p = p.take(inside)
    if filters.max_speed_kmh is not None:
        spikes = _speed_outliers(p, filters.max_speed_kmh / 3.6)
        counts["speed_outliers_dropped"] = int(spikes.sum())
        p = p.take(~spikes)
    if filters.heading is not None:
        head = p.heading if p.heading is not None else _heading_of(p)
        inside = _in_heading(head, *filters.heading)
        counts["heading_computed"] = p.heading is None
        counts["outside_heading_dropped"] = int((~inside).sum())
        if not inside.any():
            raise InvalidInputError(f"--heading {filters.heading[0]:g}:{filters.heading[1]:g} "
                                    "excludes every fix")
        p = p.take(inside)
    counts["kept_fixes"] = len(p)
    counts["ids"] = int(np.count_nonzero(np.diff(p.codes)) + 1) if len(p) else 0
    p.counts = counts
    return p
