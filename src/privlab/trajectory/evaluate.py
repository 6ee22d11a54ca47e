"""Evaluate a published release against the original data: utility and re-identification.

The true window means T' are recomputed from the original with the parameters in the
release's JSON sidecar (they are never stored next to the published file).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from privlab.core.rng import RngLike
from privlab.errors import InvalidInputError
from privlab.trajectory import metrics
from privlab.trajectory.io import read_trajectories
from privlab.trajectory.preprocess import Filters, Prepared, prepare
from privlab.trajectory.publish import TrajectoryRelease, make_windows, read_sidecar

KEYS = ["id", "trip", "window"]


def averaged_for(original: pd.DataFrame | Prepared, parameters: dict[str, Any]
                 ) -> tuple[Prepared, pd.DataFrame]:
    """Prepare the original and recompute T' exactly as the release did."""
    filters = Filters.from_dict(parameters.get("filters"))
    p = prepare(original, filters, on_invalid=parameters.get("on_invalid", "error"))
    w = make_windows(p, int(parameters["window"]), int(parameters["stride"]),
                     float(parameters["gap_minutes"]))
    averaged = pd.DataFrame({"id": pd.Categorical.from_codes(w.codes, categories=p.ids),
                             "trip": w.trip, "window": w.window,
                             "time": w.t.view("datetime64[ns]"), "lat": w.lat, "lon": w.lon})
    return p, averaged


def align(averaged: pd.DataFrame, published: pd.DataFrame) -> pd.DataFrame:
    """Order the published rows like T' (by id, trip, window), or say why they do not match."""
    missing = [c for c in KEYS + ["time", "lat", "lon"] if c not in published.columns]
    if missing:
        raise InvalidInputError(f"the published file lacks column(s) {', '.join(missing)}; it "
                                "must come from `privlab trajectory anonymize`")
    if len(published) != len(averaged):
        raise InvalidInputError(
            f"the published file has {len(published)} windows but the original gives "
            f"{len(averaged)} with the sidecar's parameters: wrong ORIGINAL file?")
    pub = published.copy()
    pub["id"] = pub["id"].astype("str")
    pub["time"] = pub["time"].astype("datetime64[ns]")  # read by the declared rule
    key_a = pd.MultiIndex.from_arrays([averaged["id"].astype("str"), averaged["trip"],
                                       averaged["window"]])
    key_p = pd.MultiIndex.from_arrays([pub["id"], pub["trip"], pub["window"]])
    pos = key_p.get_indexer(key_a) if key_p.is_unique else None
    if pos is None or (pos < 0).any():
        raise InvalidInputError("the published windows do not match the original's (id, trip, "
                                "window) keys: wrong ORIGINAL file or edited published file?")
    return pub.iloc[pos].reset_index(drop=True)


def evaluate(p: Prepared, averaged: pd.DataFrame, published: pd.DataFrame, *,
             gap_minutes: float = 30.0, unit: str = "trip", ks: Sequence[int] = (2,),
             linkage: bool = True, shapes: bool = True, max_points: int = 1000,
             tolerance_m: float = 100.0, tolerance_s: float = 900.0, trials: int = 5,
             rng: RngLike = 0) -> dict[str, Any]:
    """All metrics for one release (T' and T'' aligned row by row)."""
    out: dict[str, Any] = {"utility": metrics.window_errors(averaged, published)}
    codes = pd.Index(p.ids).get_indexer(published["id"].astype("str"))
    out["utility_vs_true_position"] = metrics.errors_vs_truth(p, codes, published)
    units = metrics.units_for(p, published, unit, gap_minutes)
    out["unit"] = unit
    out["trajectories"] = units.n_units
    if shapes:
        per = metrics.shape_distances(p, units, published, max_points=max_points)
        out["shape"] = {
            "trajectories": int(len(per)),
            "mean_hausdorff_m": float(per["hausdorff_m"].mean()),
            "median_hausdorff_m": float(per["hausdorff_m"].median()),
            "mean_frechet_m": float(per["frechet_m"].mean()),
            "median_frechet_m": float(per["frechet_m"].median()),
            "frechet_max_points": max_points,
        }
    if linkage:
        out["linkage"] = {
            "space": {"before (T', averaged only)": metrics.linkage_attack(p, units, averaged),
                      "after (T'', published)": metrics.linkage_attack(p, units, published)},
            "space_time": {
                "before (T', averaged only)": metrics.linkage_attack(p, units, averaged,
                                                                    use_time=True),
                "after (T'', published)": metrics.linkage_attack(p, units, published,
                                                                 use_time=True)},
        }
    if ks:
        out["uniqueness"] = []
        for k in ks:
            common = dict(k=int(k), tolerance_m=tolerance_m, tolerance_s=tolerance_s,
                          trials=trials, rng=rng)
            out["uniqueness"].append({
                "k": int(k),
                "before (original fixes)": metrics.uniqueness(p, units, None, **common),
                "after (T'', published)": metrics.uniqueness(p, units, published, **common)})
    return out


def evaluate_release(p: Prepared, release: TrajectoryRelease, **kwargs: Any) -> dict[str, Any]:
    """Evaluate an in-memory release (it must have been made with keep_averaged=True)."""
    if release.averaged is None:
        raise InvalidInputError("this release was made with keep_averaged=False")
    return evaluate(p, release.averaged, release.published,
                    gap_minutes=release.parameters["gap_minutes"], **kwargs)


def evaluate_files(original: str | Path, published: str | Path,
                   read_options: dict[str, Any] | None = None, **kwargs: Any) -> dict[str, Any]:
    """Evaluate a published file (with its sidecar) against the original file."""
    side = read_sidecar(published)
    params = side["parameters"]
    pub = read_trajectories_table(published)
    options = params.get("read_options") or {} if read_options is None else read_options
    p, averaged = averaged_for(read_trajectories(original, **options), params)
    pub = align(averaged, pub)
    out = evaluate(p, averaged, pub, gap_minutes=params["gap_minutes"], **kwargs)
    out["parameters"] = params
    out["guarantee"] = side["guarantee"]
    return out


def read_trajectories_table(path: str | Path) -> pd.DataFrame:
    """Read a published file as written by `write_release`, each cell by its column's declared
    type (`PUBLISHED`, the rules of `privlab.schema.values`): ids as text, trip and window as
    integers, time by the ISO 8601 rule (offsets and Z to UTC, naive = UTC), lat/lon as
    numbers. No cell changes how another is read (pandas took the time format from the first
    row); a cell that does not fit is refused in one line."""
    from privlab.data.io import read_table

    frame = read_table(path)
    for column, kind in PUBLISHED.items():
        if column in frame.columns:
            frame[column] = _declared(frame[column], kind, Path(path).name)
    return frame


#: The published file's columns and their declared types (`_frame` in privlab.trajectory.publish).
PUBLISHED = {"id": "text", "trip": "integer", "window": "integer", "time": "datetime",
             "lat": "numeric", "lon": "numeric"}


def _declared(cells: pd.Series, kind: str, where: str) -> pd.Series:
    """One column of a published file read by `kind`, value by value."""
    from privlab.schema.values import INVALID, code_of, datetime_of, number_of, parse_each

    parse = {"text": code_of, "integer": lambda v: number_of(v, True),
             "numeric": lambda v: number_of(v, False), "datetime": datetime_of}[kind]
    values = parse_each(cells, parse)
    bad = next((i for i, v in enumerate(values) if v is None or v is INVALID
                or (kind == "integer" and not isinstance(v, int))), None)
    if bad is not None:
        raise InvalidInputError(
            f"{where}: column {cells.name!r} row {bad + 1} is {cells.iloc[bad]!r}, not "
            f"{'an' if kind == 'integer' else 'a'} {kind} value; pass the file written by "
            "`privlab trajectory anonymize` unedited")
    if kind == "text":
        return pd.Series(values, index=cells.index, name=cells.name, dtype=object)
    if kind == "datetime":
        return pd.Series(pd.DatetimeIndex(values).astype("datetime64[ns]"), index=cells.index,
                         name=cells.name)
    return pd.Series(values, index=cells.index, name=cells.name,
                     dtype="int64" if kind == "integer" else "float64")


def summary_row(result: dict[str, Any]) -> dict[str, Any]:
    """A flat row of the headline numbers (for tables)."""
    u = result["utility"]
    row = {k: u[k] for k in ("rmse_lat_deg", "rmse_lon_deg", "rmse_m", "mean_haversine_m")}
    if "linkage" in result:
        row["linkage_space_after"] = result["linkage"]["space"]["after (T'', published)"][
            "top1_accuracy"]
    return row
