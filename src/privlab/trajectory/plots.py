"""Figures like the paper's 8-10 (X and Y over time; X/Y/time in 3-D: original, averaged,
anonymized) and an HTML map of one trajectory in its three versions.

Matplotlib is used through its object API (no pyplot, no global backend change). The map is
Leaflet through folium; its tiles are loaded by the reader's browser, nothing is fetched
while the file is written.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from privlab.errors import InvalidInputError
from privlab.trajectory.preprocess import Prepared
from privlab.utils.atomic import atomic_open, atomic_write_text

COLOURS = {"original": "#1f77b4", "averaged": "#2ca02c", "anonymized": "#d62728"}


def select(p: Prepared, averaged: pd.DataFrame, published: pd.DataFrame, *,
           traj_id: str | None = None, trip: int | None = None,
           gap_minutes: float = 30.0) -> dict[str, pd.DataFrame]:
    """The three versions of one trip (default: the trip with the most published windows)."""
    pub_id = published["id"].astype("str")
    if traj_id is None:
        sizes = published.assign(_id=pub_id).groupby(["_id", "trip"]).size()
        if trip is not None:
            sizes = sizes[sizes.index.get_level_values(1) == trip]
            if sizes.empty:
                raise InvalidInputError(f"no published trip number {trip}")
        traj_id, trip = sizes.idxmax()
    traj_id = str(traj_id)
    rows = pub_id == traj_id
    if not rows.any():
        raise InvalidInputError(f"--id {traj_id!r} is not in the published file")
    if trip is None:
        trip = int(published.loc[rows, "trip"].value_counts().idxmax())
    rows &= published["trip"] == trip
    if not rows.any():
        raise InvalidInputError(f"id {traj_id!r} has no published trip number {trip}")
    code = int(np.flatnonzero(p.ids == traj_id)[0])
    fixes = np.flatnonzero(p.codes == code)
    new = p.trip_starts(gap_minutes)[fixes]
    trip_no = np.cumsum(new) - 1
    fixes = fixes[trip_no == trip]
    original = pd.DataFrame({"time": p.t[fixes].view("datetime64[ns]"), "lat": p.lat[fixes],
                             "lon": p.lon[fixes]})
    avg_rows = (averaged["id"].astype("str") == traj_id) & (averaged["trip"] == trip)
    cols = ["time", "lat", "lon"]
    return {"original": original,
            "averaged": averaged.loc[avg_rows, cols].reset_index(drop=True),
            "anonymized": published.loc[rows, cols].reset_index(drop=True),
            "id": traj_id, "trip": int(trip)}


def _save(fig: Any, path: Path) -> None:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=120, bbox_inches="tight")
    with atomic_open(path, "wb") as handle:
        handle.write(buf.getvalue())


def plot_axes(views: dict[str, Any], out_dir: Path, epsilon: float | None = None) -> list[Path]:
    """Figures 8 and 9: X (latitude) and Y (longitude) over time for the three versions."""
    from matplotlib.figure import Figure

    paths = []
    for axis, label, name in (("lat", "X (latitude, degrees)", "x_over_time.png"),
                              ("lon", "Y (longitude, degrees)", "y_over_time.png")):
        fig = Figure(figsize=(9, 4))
        ax = fig.add_subplot()
        for version in ("anonymized", "averaged", "original"):  # noisiest underneath
            frame = views[version]
            ax.plot(frame["time"], frame[axis], label=version, color=COLOURS[version],
                    lw=0.8 if version == "anonymized" else 1.2,
                    alpha=0.6 if version == "anonymized" else 0.95)
        eps = f", epsilon = {epsilon:g}" if epsilon is not None else ""
        ax.set_title(f"{label.split(' ')[0]} over time: id {views['id']}, trip "
                     f"{views['trip']}{eps}")
        ax.set_xlabel("time")
        ax.set_ylabel(label)
        ax.legend()
        fig.autofmt_xdate()
        path = out_dir / name
        _save(fig, path)
        paths.append(path)
    return paths


def plot_3d(views: dict[str, Any], out_dir: Path) -> Path:
    """Figure 10: the trip in X, Y and time, original against anonymized (and averaged)."""
    from matplotlib.figure import Figure
    from mpl_toolkits.mplot3d import Axes3D  # noqa: F401  (registers the 3-D projection)

    fig = Figure(figsize=(7, 6))
    ax = fig.add_subplot(projection="3d")
    t0 = views["original"]["time"].min()
    for version in ("anonymized", "averaged", "original"):
        frame = views[version]
        minutes = (frame["time"] - t0).dt.total_seconds() / 60
        ax.plot(frame["lat"], frame["lon"], minutes, label=version, color=COLOURS[version],
                lw=0.7 if version == "anonymized" else 1.2,
                alpha=0.55 if version == "anonymized" else 0.95)
    ax.set_xlabel("X (lat)")
    ax.set_ylabel("Y (lon)")
    ax.set_zlabel("minutes")
    ax.legend()
    path = out_dir / "xyt_3d.png"
    _save(fig, path)
    return path


def map_html(views: dict[str, Any], path: Path) -> Path:
    """Leaflet map (folium) with the three versions as toggleable layers."""
    try:
        import folium
    except ImportError:
        raise InvalidInputError("the HTML map needs folium: pip install 'privlab[geo]'") from None
    orig = views["original"]
    centre = [float(orig["lat"].mean()), float(orig["lon"].mean())]
    fmap = folium.Map(location=centre, zoom_start=13, tiles="OpenStreetMap")
    for version in ("original", "averaged", "anonymized"):
        frame = views[version]
        group = folium.FeatureGroup(name=f"{version} ({len(frame)} points)")
        coords = frame[["lat", "lon"]].to_numpy().tolist()
        if len(coords) >= 2:
            folium.PolyLine(coords, color=COLOURS[version], weight=3, opacity=0.8).add_to(group)
        for lat, lon in coords[:: max(1, len(coords) // 300)]:
            folium.CircleMarker([lat, lon], radius=2, color=COLOURS[version],
                                fill=True).add_to(group)
        group.add_to(fmap)
    folium.LayerControl(collapsed=False).add_to(fmap)
    lats = np.concatenate([views[v]["lat"].to_numpy() for v in ("original", "anonymized")])
    lons = np.concatenate([views[v]["lon"].to_numpy() for v in ("original", "anonymized")])
    fmap.fit_bounds([[float(lats.min()), float(lons.min())], [float(lats.max()),
                                                             float(lons.max())]])
    atomic_write_text(path, fmap.get_root().render())
    return path


def plot_release(views: dict[str, Any], out_dir: str | Path,
                 epsilon: float | None = None) -> dict[str, str]:
    """Write x_over_time.png, y_over_time.png, xyt_3d.png and map.html into out_dir."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise InvalidInputError(f"--out {out} exists and is not a directory")
    out.mkdir(parents=True, exist_ok=True)
    x_path, y_path = plot_axes(views, out, epsilon)
    return {"x_over_time": str(x_path), "y_over_time": str(y_path),
            "xyt_3d": str(plot_3d(views, out)), "map": str(map_html(views, out / "map.html"))}
