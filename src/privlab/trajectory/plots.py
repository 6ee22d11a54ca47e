"""Figures like Akin et al.'s (2021) 8-10 (X and Y over time; X/Y/time in 3-D: original, averaged,
anonymized) and an HTML map of one trajectory in its three versions.

Every figure and the map carry the release's guarantee (`publish.guarantee_label`): epsilon,
mechanism and radius for a DP release, "NOT DP (data-dependent bounds)" in red for Akin et al.'s
setting, so an image cut out of a report still says what it shows.

Matplotlib is used through its object API (no pyplot, no global backend change). The map is
Leaflet through folium; its tiles are loaded by the reader's browser, nothing is fetched
while the file is written.
"""

from __future__ import annotations

import html
import io
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from privlab.errors import InvalidInputError, missing_extra
from privlab.trajectory.preprocess import Prepared
from privlab.trajectory.publish import GuaranteeLabel
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


def _save(fig: Any, path: Path, label: GuaranteeLabel) -> None:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=120, bbox_inches="tight",
                metadata={"Description": label.text})
    with atomic_open(path, "wb") as handle:
        handle.write(buf.getvalue())


def _label_figure(fig: Any, label: GuaranteeLabel) -> None:
    """The guarantee as the figure's headline: red and bold when the release is NOT DP."""
    fig.suptitle(label.text, color=label.colour, fontsize=10,
                 fontweight="normal" if label.is_dp else "bold")


def axes_figures(views: dict[str, Any], label: GuaranteeLabel) -> dict[str, Any]:
    """Figures 8 and 9: X (latitude) and Y (longitude) over time for the three versions."""
    from matplotlib.figure import Figure

    figures = {}
    for axis, axis_label, name in (("lat", "X (latitude, degrees)", "x_over_time.png"),
                                   ("lon", "Y (longitude, degrees)", "y_over_time.png")):
        fig = Figure(figsize=(9, 4))
        ax = fig.add_subplot()
        for version in ("anonymized", "averaged", "original"):  # noisiest underneath
            frame = views[version]
            ax.plot(frame["time"], frame[axis], label=version, color=COLOURS[version],
                    lw=0.8 if version == "anonymized" else 1.2,
                    alpha=0.6 if version == "anonymized" else 0.95)
        ax.set_title(f"{axis_label.split(' ')[0]} over time: id {views['id']}, trip "
                     f"{views['trip']}")
        ax.set_xlabel("time")
        ax.set_ylabel(axis_label)
        ax.legend()
        fig.autofmt_xdate()
        _label_figure(fig, label)
        figures[name] = fig
    return figures


def figure_3d(views: dict[str, Any], label: GuaranteeLabel) -> Any:
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
    ax.set_title(f"id {views['id']}, trip {views['trip']}")
    ax.set_xlabel("X (lat)")
    ax.set_ylabel("Y (lon)")
    ax.set_zlabel("minutes")
    ax.legend()
    _label_figure(fig, label)
    return fig


def plot_axes(views: dict[str, Any], out_dir: Path, label: GuaranteeLabel) -> list[Path]:
    """Write x_over_time.png and y_over_time.png (the label is also in the PNG metadata)."""
    paths = []
    for name, fig in axes_figures(views, label).items():
        _save(fig, out_dir / name, label)
        paths.append(out_dir / name)
    return paths


def plot_3d(views: dict[str, Any], out_dir: Path, label: GuaranteeLabel) -> Path:
    """Write xyt_3d.png."""
    path = out_dir / "xyt_3d.png"
    _save(figure_3d(views, label), path, label)
    return path


def _legend_html(label: GuaranteeLabel) -> str:
    text = html.escape(label.text)
    weight = "normal" if label.is_dp else "bold"
    return (f'<div id="privlab-guarantee" style="position: fixed; top: 10px; left: 50px; '
            f"z-index: 9999; max-width: 60%; background: white; padding: 6px 10px; "
            f"border: 2px solid {label.colour}; color: {label.colour}; font: {weight} 13px "
            f'sans-serif;">{text}</div>')


def map_document(views: dict[str, Any], label: GuaranteeLabel) -> str:
    """Leaflet map (folium) with the three versions as toggleable layers and the guarantee in
    a fixed legend box and in the published layer's name."""
    try:
        import folium
    except ImportError:
        raise missing_extra("folium", "the HTML map") from None
    orig = views["original"]
    centre = [float(orig["lat"].mean()), float(orig["lon"].mean())]
    fmap = folium.Map(location=centre, zoom_start=13, tiles="OpenStreetMap")
    short = "NOT DP" if not label.is_dp else "DP"
    for version in ("original", "averaged", "anonymized"):
        frame = views[version]
        name = f"{version} ({len(frame)} points)"
        if version == "anonymized":
            name += f" [{short}]"
        group = folium.FeatureGroup(name=name)
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
    root = fmap.get_root()
    root.header.add_child(folium.Element(f"<title>{html.escape(label.text)}</title>"))
    root.html.add_child(folium.Element(_legend_html(label)))
    return root.render()


def map_html(views: dict[str, Any], path: Path, label: GuaranteeLabel) -> Path:
    """Write the map of `map_document` to `path` atomically."""
    atomic_write_text(path, map_document(views, label))
    return path


def plot_release(views: dict[str, Any], out_dir: str | Path,
                 label: GuaranteeLabel) -> dict[str, str]:
    """Write x_over_time.png, y_over_time.png, xyt_3d.png and map.html into out_dir, each
    headed by the release's guarantee label (`publish.guarantee_label(sidecar)`)."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise InvalidInputError(f"--out {out} exists and is not a directory")
    out.mkdir(parents=True, exist_ok=True)
    x_path, y_path = plot_axes(views, out, label)
    return {"x_over_time": str(x_path), "y_over_time": str(y_path),
            "xyt_3d": str(plot_3d(views, out, label)),
            "map": str(map_html(views, out / "map.html", label))}
