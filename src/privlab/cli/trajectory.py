"""`privlab trajectory anonymize|evaluate|plot|experiment`: trajectory publishing with local DP.

`anonymize` writes the published windows (CSV / Parquet) and a JSON sidecar with parameters,
counts and the guarantee; `evaluate` and `plot` read that sidecar to recompute the true window
means from the original; `experiment` prints the RMSE table of Akin, Canbay and Sagiroglu
("A new privacy-aware model proposal and application on trajectory data publishing", Journal
of Polytechnic 24(3), 2021) for a dataset.
"""

from __future__ import annotations

import warnings
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from privlab.cli.common import (
    console,
    emit_json,
    err_console,
    parse_floats,
    parse_list,
    parse_range,
)
from privlab.cli.options import Json, OnInvalid, TestingSeed, option
from privlab.errors import InvalidInputError

if TYPE_CHECKING:
    from privlab.trajectory.publish import GuaranteeLabel

trajectory_app = typer.Typer(
    help="Trajectory publishing with local DP: window means + planar or per-axis Laplace.",
    no_args_is_help=True)


class Mechanism(StrEnum):
    planar = "planar"
    laplace = "laplace"


class Sensitivity(StrEnum):
    bbox = "bbox"
    paper = "paper"


class Unit(StrEnum):
    trip = "trip"
    id = "id"


def _read_options(fmt: str, id_col: str | None, time_col: str | None, lat_col: str | None,
                  lon_col: str | None, heading_col: str | None, time_unit: str,
                  delimiter: str | None) -> dict[str, Any]:
    opts: dict[str, Any] = {"fmt": fmt, "id_col": id_col, "time_col": time_col,
                            "lat_col": lat_col, "lon_col": lon_col, "heading_col": heading_col,
                            "time_unit": time_unit, "delimiter": delimiter}
    return {k: v for k, v in opts.items() if v is not None and not (k == "fmt" and v == "auto")
            and not (k == "time_unit" and v == "s")}


def _filters(bbox: str | None, time_window: str | None, heading: str | None,
             max_speed: float | None):
    import pandas as pd

    from privlab.trajectory.geo import BBox
    from privlab.trajectory.preprocess import Filters

    window = None
    if time_window is not None:
        parts = [p.strip() for p in time_window.split(",")]
        if len(parts) != 2:
            raise InvalidInputError(f"--time-window must be START,END (two timestamps), got "
                                    f"{time_window!r}")
        try:
            window = (pd.Timestamp(parts[0]), pd.Timestamp(parts[1]))
        except ValueError:
            raise InvalidInputError(f"--time-window has an unparseable timestamp: "
                                    f"{time_window!r}") from None
    head = None
    if heading is not None:
        head = parse_range(heading, "--heading")
    return Filters(bbox=BBox.parse(bbox), time_window=window, heading=head,
                   max_speed_kmh=max_speed)


def _warn_if_not_dp(sidecar: dict[str, Any]) -> GuaranteeLabel:
    """The release's guarantee label; a red warning on stderr (JSON mode too) when NOT DP."""
    from privlab.trajectory.publish import guarantee_label

    label = guarantee_label(sidecar)
    if not label.is_dp:
        err_console.print(f"[bold red]warning:[/bold red] this release is NOT differentially "
                          f"private: {label.text}; use it only for comparison",
                          highlight=False)
    return label


# Shared options (Typer needs them spelled per command).
_FMT = typer.Option("auto", "--format", help="auto | table | geolife | plt | tdrive.")
_ID = typer.Option(None, "--id-col", help="Trajectory id column (recognised if unset).")
_TIME = typer.Option(None, "--time-col", help="Timestamp column (recognised if unset).")
_LAT = typer.Option(None, "--lat-col", help="Latitude column (recognised if unset).")
_LON = typer.Option(None, "--lon-col", help="Longitude column (recognised if unset).")
_TUNIT = typer.Option("s", "--time-unit", help="Unit of numeric timestamps: s, ms, us, ns.")
_DELIM = typer.Option(None, "--delimiter", help="Field delimiter (sniffed if unset).")
_SCHEMA = Annotated[str, option("declared schema",
                                 "Declared public schema of a table input (e.g. geolife): id = "
                                 "its privacy unit, bounds of lat/lon/time (default: none, "
                                 "columns recognised by name).")]
CURATOR_NOTE = ("curator_counts are exact counts of the input (fixes read, dropped, in trips "
                "too short to publish): for the data's curator only, not protected, never "
                "written to the sidecar")


def _read_input(input: Path, options: dict[str, Any], schema: str | None,
                on_invalid: str) -> Any:
    """The trajectories, fitted to --schema when given (then the columns come from it)."""
    from privlab.trajectory.io import read_trajectories, read_with_schema

    if schema is None:
        return read_trajectories(input, **options)
    chosen = sorted(k for k in ("id_col", "time_col", "lat_col", "lon_col", "fmt")
                    if k in options)
    if chosen:
        raise InvalidInputError(f"--schema names the columns; drop --{chosen[0].replace('_', '-')}"
                                .replace("--fmt", "--format"))
    return read_with_schema(input, schema, on_invalid, delimiter=options.get("delimiter"))


@trajectory_app.command("anonymize")
def anonymize_cmd(
    input: Path = typer.Argument(..., help="Trajectories: CSV/TSV/Parquet, GeoLife, T-Drive."),
    out: Annotated[Path, option("output file", "Published file: .csv, .csv.gz, .parquet")] = ...,
    window: int = typer.Option(..., "--window", help="Window length PB (fixes per window)."),
    epsilon: Annotated[float, option("epsilon", "Epsilon per window, > 0.")] = ...,
    stride: int = typer.Option(1, "--stride", help="1 = sliding windows (as in Akin et al. "
                               "2021), PB = non-overlapping."),
    mechanism: Mechanism = typer.Option(Mechanism.planar, "--mechanism", "-m",
                                        help="planar (geo-indistinguishability) or laplace."),
    radius: float = typer.Option(100.0, "--radius", help="planar: protection radius r, metres."),
    bbox: str = typer.Option(None, "--bbox", help="Public box LAT0,LON0,LAT1,LON1 (filter, "
                             "projection, laplace sensitivity; default: none, needed by "
                             "planar and --sensitivity bbox)."),
    sensitivity: Sensitivity = typer.Option(Sensitivity.bbox, "--sensitivity",
                                            help="laplace: bbox (DP) or paper = Akin et al. "
                                                 "2021's data-derived bounds (NOT DP)."),
    gap: float = typer.Option(30.0, "--gap", help="Split trips at time gaps > GAP minutes."),
    time_window: str = typer.Option(None, "--time-window", help="Keep fixes in START,END "
                                    "(default: all times)."),
    heading: str = typer.Option(None, "--heading", help="Keep fixes with heading LO:HI "
                                "degrees, e.g. 350:10 wraps through north (default: all)."),
    heading_col: str = typer.Option(None, "--heading-col", help="Heading column (computed "
                                    "from consecutive fixes if unset)."),
    max_speed: float = typer.Option(None, "--max-speed", help="Drop speed spikes > KMH km/h "
                                    "(default: none dropped)."),
    drop_invalid: bool = typer.Option(False, "--drop-invalid", help="Drop NaN/out-of-range "
                                      "coordinates instead of failing."),
    seed: TestingSeed = None,
    fmt: str = _FMT, id_col: str = _ID, time_col: str = _TIME, lat_col: str = _LAT,
    lon_col: str = _LON, time_unit: str = _TUNIT, delimiter: str = _DELIM,
    schema: _SCHEMA = None, on_invalid: OnInvalid = "refuse",
    as_json: Json = False,
) -> None:
    """Publish trajectories: window means (Akin et al. 2021) plus noise, with a JSON sidecar."""
    from privlab.trajectory.publish import NotPrivateWarning, anonymize, write_release

    options = _read_options(fmt, id_col, time_col, lat_col, lon_col, heading_col, time_unit,
                            delimiter)
    filters = _filters(bbox, time_window, heading, max_speed)
    frame = _read_input(input, options, schema, on_invalid)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NotPrivateWarning)
        release = anonymize(frame, window=window, epsilon=epsilon, stride=stride,
                            mechanism=mechanism.value, radius=radius, sensitivity=sensitivity.value,
                            gap_minutes=gap, filters=filters, rng=seed,
                            on_invalid="drop" if drop_invalid else "error", keep_averaged=False,
                            read_options=options, seed_per_user=True)
    if schema is not None:
        release.parameters["schema"] = schema
        release.parameters["on_invalid_schema"] = on_invalid
    for msg in release.warnings:
        err_console.print(f"[bold red]warning:[/bold red] {msg}", highlight=False)
    side = write_release(release, out)
    if as_json:
        payload = {"out": str(out), "sidecar": str(side), **release.sidecar(),
                   "curator_counts": release.curator_counts(), "curator_note": CURATOR_NOTE}
        # this output (not the sidecar) also carries the exact input counts: say so
        payload["guarantee"] = release.guarantee.with_not_covered(
            "curator_counts (exact counts of the input; in this CLI output only, never "
            "written beside the release)").to_dict()
        emit_json(payload)
        return
    console.print(release.guarantee.headline(), highlight=False,
                  style=None if release.guarantee.is_dp else "bold red")
    c = release.counts
    console.print(f"published {c['windows']:,} windows ({c['trips']:,} trips of {c['ids']:,} "
                  f"ids) to {out}")
    console.print(f"  curator-only (exact, not protected, not in the sidecar): "
                  f"{c['kept_fixes']:,} fixes kept")
    if c["trips_shorter_than_window"]:
        console.print(f"  {c['trips_shorter_than_window']:,} trip(s) shorter than the window "
                      f"({c['fixes_in_short_trips']:,} fixes) were not published")
    dropped = {k: v for k, v in c.items() if k.endswith("_dropped") and v}
    if dropped:
        console.print("  dropped: " + ", ".join(f"{k.removesuffix('_dropped')} {v:,}"
                                                for k, v in dropped.items()))
    if not c["input_was_sorted"]:
        console.print("  input was not sorted by (id, time): sorted")
    noise = release.noise
    if noise.get("distribution") == "planar_laplace":
        console.print(f"  noise: planar Laplace, mean displacement "
                      f"{noise['mean_displacement_m']:.1f} m, RMSE per axis "
                      f"{noise['rmse_per_axis_m']:.1f} m")
    console.print(f"  guarantee: {release.guarantee.describe()}", highlight=False)
    for note in release.guarantee.notes:
        console.print(f"  note: {note}", highlight=False)
    console.print(f"  sidecar: {side}")


@trajectory_app.command("evaluate")
def evaluate_cmd(
    original: Path = typer.Argument(..., help="The original trajectories."),
    published: Path = typer.Argument(..., help="The published file (with its .json sidecar)."),
    unit: Unit = typer.Option(Unit.trip, "--unit", help="What a trajectory is for linkage and "
                              "uniqueness: trip or id."),
    k: str = typer.Option("2", "--k", help="Known points for the uniqueness attack, e.g. 1,2,4."),
    tolerance_m: float = typer.Option(100.0, "--tolerance-m", help="Uniqueness: metres."),
    tolerance_min: float = typer.Option(15.0, "--tolerance-min", help="Uniqueness: minutes."),
    shapes: bool = typer.Option(True, "--shapes/--no-shapes", help="Hausdorff and Frechet."),
    linkage: bool = typer.Option(True, "--linkage/--no-linkage", help="Linkage attack."),
    max_points: int = typer.Option(500, "--max-points", help="Frechet: points per curve."),
    seed: Annotated[int, option("seed", "Seed of the attack's random draws.")] = 0,
    as_json: Json = False,
) -> None:
    """Utility (RMSE, haversine, Hausdorff, Frechet) and re-identification of a release."""
    from privlab.trajectory.evaluate import evaluate_files

    ks = [int(float(x)) for x in (parse_list(k, "--k") or [])]
    if any(x < 1 for x in ks):
        raise InvalidInputError(f"--k must be integers >= 1, got {k!r}")
    if max_points < 2:
        raise InvalidInputError(f"--max-points must be >= 2, got {max_points}")
    result = evaluate_files(original, published, unit=unit.value, ks=ks, shapes=shapes,
                            linkage=linkage, max_points=max_points, tolerance_m=tolerance_m,
                            tolerance_s=tolerance_min * 60, rng=seed)
    label = _warn_if_not_dp(result)
    if as_json:
        emit_json({**result, "guarantee_label": label.text,
                   "evaluation_guarantee": EVALUATION_GUARANTEE.to_dict()})
        return
    console.print(EVALUATION_GUARANTEE.headline(), style="bold red", highlight=False)
    u = result["utility"]
    console.print(f"[bold]utility[/bold] ({u['windows']:,} windows)")
    console.print(f"  RMSE(T', T''): lat {u['rmse_lat_deg']:.3g} deg, lon {u['rmse_lon_deg']:.3g}"
                  f" deg, {u['rmse_m']:.1f} m; mean haversine {u['mean_haversine_m']:.1f} m")
    v = result["utility_vs_true_position"]
    console.print(f"  vs true position at the published time: RMSE {v['rmse_m']:.1f} m, mean "
                  f"{v['mean_haversine_m']:.1f} m")
    if "shape" in result:
        s = result["shape"]
        console.print(f"  per {unit.value}: mean Hausdorff {s['mean_hausdorff_m']:.1f} m, mean "
                      f"Frechet {s['mean_frechet_m']:.1f} m")
    if "linkage" in result:
        console.print(f"[bold]linkage[/bold] (top-1 among {result['trajectories']} "
                      f"{unit.value}s)")
        for kind, res in result["linkage"].items():
            parts = [f"{when.split(' ')[0]} {r['top1_accuracy']:.3f}" for when, r in res.items()]
            console.print(f"  {kind}: " + ", ".join(parts))
    for entry in result.get("uniqueness", []):
        b = entry["before (original fixes)"]["unique_share"]
        a = entry["after (T'', published)"]["unique_share"]
        console.print(f"[bold]uniqueness[/bold] with k={entry['k']} known points: before "
                      f"{b:.3f}, after {a:.3f}")
    console.print(f"guarantee: {label.text}", style=None if label.is_dp else "bold red",
                  highlight=False)


@trajectory_app.command("plot")
def plot_cmd(
    original: Path = typer.Argument(..., help="The original trajectories."),
    published: Path = typer.Argument(..., help="The published file (with its .json sidecar)."),
    out: Annotated[Path, option("output file", "Output directory.")] = ...,
    traj_id: str = typer.Option(None, "--id", help="Trajectory id (default: longest trip)."),
    trip: int = typer.Option(None, "--trip", help="Trip number within the id "
                             "(default: the one with most published windows)."),
    as_json: Json = False,
) -> None:
    """Figures 8-10 of Akin et al. 2021 (X, Y over time; 3-D) and an HTML map of one trip."""
    from privlab.trajectory.evaluate import align, averaged_for, read_trajectories_table
    from privlab.trajectory.io import read_trajectories
    from privlab.trajectory.plots import plot_release, select
    from privlab.trajectory.publish import read_sidecar

    side = read_sidecar(published)
    params = side["parameters"]
    p, averaged = averaged_for(read_trajectories(original, **(params.get("read_options") or {})),
                               params)
    pub = align(averaged, read_trajectories_table(published))
    views = select(p, averaged, pub, traj_id=traj_id, trip=trip,
                   gap_minutes=params["gap_minutes"])
    label = _warn_if_not_dp(side)
    paths = plot_release(views, out, label)
    if as_json:
        emit_json({"id": views["id"], "trip": views["trip"], "files": paths,
                   "guarantee_label": label.text, "is_dp": label.is_dp})
        return
    console.print(f"id {views['id']}, trip {views['trip']}: " + ", ".join(paths.values()))
    console.print(f"guarantee: {label.text}", style=None if label.is_dp else "bold red",
                  highlight=False)


@trajectory_app.command("experiment")
def experiment_cmd(
    input: Path = typer.Argument(None, help="Trajectories (default: bundled GeoLife sample)."),
    settings: str = typer.Option("planar,laplace-bbox,laplace-paper", "--settings",
                                 help="Any of planar, laplace-bbox, laplace-paper."),
    windows: str = typer.Option("2,3,4", "--windows", help="PB values."),
    epsilons: str = typer.Option("0.5,1,1.5,2", "--epsilons", help="Epsilon values."),
    radius: float = typer.Option(100.0, "--radius", help="planar: protection radius, metres."),
    bbox: str = typer.Option(None, "--bbox", help="Public box (default for the bundled "
                             "GeoLife sample: Beijing)."),
    stride: int = typer.Option(1, "--stride", help="Window stride (capped at PB)."),
    gap: float = typer.Option(30.0, "--gap", help="Trip gap, minutes."),
    repeats: int = typer.Option(1, "--repeats", help="Runs per cell (MSE averaged)."),
    seed: TestingSeed = None,
    out: Annotated[Path, option("output file",
                                "Also write the table (.csv/.parquet; default: printed "
                                "only).")] = None,
    fmt: str = _FMT, id_col: str = _ID, time_col: str = _TIME, lat_col: str = _LAT,
    lon_col: str = _LON, time_unit: str = _TUNIT, delimiter: str = _DELIM,
    schema: _SCHEMA = None, on_invalid: OnInvalid = "refuse",
    as_json: Json = False,
) -> None:
    """RMSE table of Akin et al. 2021 (PB x epsilon) per setting, with each setting's guarantee."""
    from rich.table import Table

    from privlab.trajectory.experiment import rmse_table
    from privlab.trajectory.geo import BBox
    from privlab.trajectory.preprocess import Filters, prepare
    from privlab.trajectory.publish import BEIJING_BBOX
    from privlab.utils.atomic import atomic_write_frame

    names = parse_list(settings, "--settings") or []
    pbs = [int(x) for x in parse_floats(windows, "--windows") or []]
    epss = parse_floats(epsilons, "--epsilons") or []
    box = BBox.parse(bbox)
    if input is None:
        from privlab.data.datasets import load_geolife
        from privlab.schema import bundled_schema, conform

        frame = conform(load_geolife(), bundled_schema("geolife"), "refuse")
        box = box or BEIJING_BBOX
        source = "bundled GeoLife sample"
    else:
        frame = _read_input(input, _read_options(fmt, id_col, time_col, lat_col, lon_col, None,
                                                 time_unit, delimiter), schema, on_invalid)
        source = str(input)
    if box is None:
        raise InvalidInputError("experiment needs a public --bbox LAT0,LON0,LAT1,LON1 for the "
                                "planar projection and the laplace-bbox sensitivity")
    p = prepare(frame, Filters(bbox=box))
    total = len(names) * len(pbs) * len(epss) * repeats
    from privlab.cli.progress import reporter

    # one step per (setting, window, epsilon, repeat) cell: the total is fixed by the options
    with reporter("trajectory experiment", as_json) as report:
        cells = iter(range(1, total + 1))
        report("RMSE table cell", 0, total)
        table = rmse_table(p, bbox=box, settings=names, windows=pbs, epsilons=epss,
                           radius=radius, stride=stride, gap_minutes=gap, repeats=repeats,
                           rng=seed,
                           progress=lambda: report("RMSE table cell", next(cells), total))
    if out is not None:
        atomic_write_frame(table, out)
    if "laplace-paper" in names:
        err_console.print("[bold red]warning:[/bold red] laplace-paper rows are NOT "
                          "differentially private (data-derived bounds); comparison only",
                          highlight=False)
    if as_json:
        emit_json({"source": source, "bbox": box.to_list(), "fixes": len(p),
                   "rows": table.to_dict(orient="records"),
                   "guarantee": EXPERIMENT_GUARANTEE.to_dict()})
        return
    console.print(EXPERIMENT_GUARANTEE.headline(), style="bold red", highlight=False)
    view = Table(title=f"RMSE(T', T'') on {source}, {len(p):,} fixes")
    view.add_column("setting", no_wrap=True)
    for name in ("PB", "eps", "RMSE X (lat, deg)", "RMSE Y (lon, deg)", "RMSE m",
                 "eps per fix"):
        view.add_column(name)
    for row in table.itertuples():
        view.add_row(row.setting, str(row.window), f"{row.epsilon:g}", f"{row.rmse_lat_deg:.3g}",
                     f"{row.rmse_lon_deg:.3g}", f"{row.rmse_m:.4g}",
                     "NOT DP" if row.epsilon_per_fix is None or row.epsilon_per_fix
                     != row.epsilon_per_fix else f"{row.epsilon_per_fix:g} (locations)")
    console.print(view)


def _not_private(what: str, reason: str) -> Any:
    from privlab.core.guarantee import PrivacyGuarantee

    return PrivacyGuarantee.not_private(what, reason)


#: `experiment` and `evaluate` print exact errors, counts and attack rates computed against the
#: original trajectories: evaluations for the experimenter, not releases.
EXPERIMENT_GUARANTEE = _not_private(
    "RMSE table (exact, on the input trajectories)",
    "an evaluation for the experimenter: the fix count and every RMSE are computed exactly "
    "from the original trajectories; each row's own setting carries its release guarantee")
EVALUATION_GUARANTEE = _not_private(
    "evaluation of a release (exact, on the original trajectories)",
    "utility, shape, linkage and uniqueness figures are computed exactly from the original "
    "trajectories: an evaluation for the data's curator, not a release")


def register(app: typer.Typer) -> None:
    app.add_typer(trajectory_app, name="trajectory")
