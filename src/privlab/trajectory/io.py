"""Reading trajectories into one canonical table: id (str), time (datetime64[ns]), lat, lon.

Formats: any CSV/TSV/Parquet table with configurable (or recognised) id/time/lat/lon columns
(the bundled GeoLife sample is one: lat, lng, datetime, uid), raw GeoLife `.plt` files or a
GeoLife `Data/` directory, and T-Drive text files (`taxi id, datetime, longitude, latitude`,
no header) or a directory of them. Reading only parses and renames; validation, sorting,
de-duplication and filters happen in `privlab.trajectory.preprocess.prepare`.
"""

from __future__ import annotations

import gzip
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from privlab.data.io import read_table
from privlab.errors import InvalidInputError
from privlab.schema.values import INVALID, code_of, datetime_of, number_of, numbers, parse_each

CANONICAL = ("id", "time", "lat", "lon")
FORMATS = ("auto", "table", "geolife", "plt", "tdrive")

_CANDIDATES = {
    "id": ("id", "uid", "user", "user_id", "userid", "taxi_id", "taxi", "vehicle_id", "tid",
           "traj_id", "trajectory_id"),
    "time": ("time", "datetime", "timestamp", "date_time", "t", "ts"),
    "lat": ("lat", "latitude"),
    "lon": ("lon", "lng", "long", "longitude"),
}
_OPTION = {"id": "--id-col", "time": "--time-col", "lat": "--lat-col", "lon": "--lon-col"}


def _find_column(frame: pd.DataFrame, role: str, given: str | None) -> str:
    if given is not None:
        if given not in frame.columns:
            have = ", ".join(map(str, frame.columns[:20]))
            raise InvalidInputError(f"unknown {_OPTION[role]} {given!r}; the table has: {have}")
        return given
    lower = {str(c).lower(): c for c in frame.columns}
    for cand in _CANDIDATES[role]:
        if cand in lower:
            return lower[cand]
    have = ", ".join(map(str, frame.columns[:20]))
    raise InvalidInputError(f"no {role} column recognised (tried {', '.join(_CANDIDATES[role])});"
                            f" pass {_OPTION[role]}; the table has: {have}")


def _time_of(unit: str) -> Any:
    """One cell's time by a fixed rule (privlab.schema.values): a number is an epoch offset in
    `unit`, text is ISO 8601 (an offset or Z converted to UTC, a naive time taken as UTC)."""
    scale = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}[unit]

    def parse(cell: Any) -> Any:
        if isinstance(cell, str) and _EPOCH.fullmatch(cell.strip()):
            cell = number_of(cell, integer=False)
        if isinstance(cell, (int, float, np.integer, np.floating)) and \
                not isinstance(cell, (bool, np.bool_)):
            if not np.isfinite(cell):
                return None
            try:
                return pd.Timestamp(int(round(float(cell) * scale)), unit="ns")
            except (OverflowError, ValueError, pd.errors.OutOfBoundsDatetime):
                return INVALID
        return datetime_of(cell)

    return parse


_EPOCH = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)")


def parse_times(values: pd.Series, field: str = "time", unit: str = "s") -> pd.Series:
    """Parse a time column to naive UTC datetime64[ns], each cell on its own (`_time_of`):
    no cell's format decides how another is read."""
    if unit not in ("s", "ms", "us", "ns"):
        raise InvalidInputError(f"--time-unit must be s, ms, us or ns, got {unit!r}")
    col = values
    if isinstance(col.dtype, pd.DatetimeTZDtype):
        out = col.dt.tz_convert("UTC").dt.tz_localize(None)
    elif pd.api.types.is_datetime64_any_dtype(col):
        out = col
    else:
        parsed = parse_each(col, _time_of(unit))
        out = pd.Series([pd.NaT if v is None or v is INVALID else v for v in parsed],
                        index=col.index, dtype="datetime64[ns]")
    out = out.astype("datetime64[ns]")
    bad = out.isna().to_numpy()
    if bad.any():  # no count, row or value of the private rows in the message (issue 21)
        raise InvalidInputError(
            f"{field}: a missing or unparseable timestamp (ISO 8601, or a number of {unit} "
            f"since 1970); fix or remove such rows, or pass the right {field} column")
    return out.reset_index(drop=True)


def _numeric(values: pd.Series, field: str) -> np.ndarray:
    out = numbers(values)  # the one numeric rule, cell by cell
    bad = out.isna() & values.notna()
    if bad.any():
        raise InvalidInputError(f"column {field!r} has a value that is not a number; it must "
                                "hold decimal degrees")
    return out.to_numpy(dtype=np.float64, na_value=np.nan)


def from_frame(frame: pd.DataFrame, *, id_col: str | None = None, time_col: str | None = None,
               lat_col: str | None = None, lon_col: str | None = None,
               heading_col: str | None = None, time_unit: str = "s") -> pd.DataFrame:
    """Rename and parse a user table into the canonical columns (plus `heading` if given)."""
    if not isinstance(frame, pd.DataFrame):
        raise InvalidInputError("trajectories must be a pandas DataFrame or a file path")
    if len(frame) == 0:
        raise InvalidInputError("the trajectory table has no rows")
    cols = {role: _find_column(frame, role, given) for role, given in
            (("id", id_col), ("time", time_col), ("lat", lat_col), ("lon", lon_col))}
    if heading_col is not None and heading_col not in frame.columns:  # before any value
        have = ", ".join(map(str, frame.columns[:20]))
        raise InvalidInputError(f"unknown --heading-col {heading_col!r}; the table has: {have}")
    ids = frame[cols["id"]]
    if ids.isna().any():
        raise InvalidInputError(f"id column {cols['id']!r} has a missing value; every fix needs "
                                "a trajectory id")
    out = pd.DataFrame({
        "id": pd.Series(parse_each(ids, code_of), dtype=object),
        "time": parse_times(frame[cols["time"]], f"time column {cols['time']!r}", time_unit),
        "lat": _numeric(frame[cols["lat"]], cols["lat"]),
        "lon": _numeric(frame[cols["lon"]], cols["lon"]),
    })
    if heading_col is not None:
        out["heading"] = _numeric(frame[heading_col], heading_col)
    return out


def _first_line(path: Path) -> str:
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", encoding="utf-8-sig", errors="replace") as handle:
            for line in handle:
                if line.strip():
                    return line.strip()
    except OSError as exc:
        raise InvalidInputError(f"cannot read {path}: {exc}") from None
    return ""


def _looks_tdrive(line: str) -> bool:
    parts = [p.strip() for p in line.split(",")]
    if len(parts) != 4:
        return False
    try:
        float(parts[2])
        float(parts[3])
        pd.Timestamp(parts[1])
    except (ValueError, TypeError):
        return False
    return True


def _read_tdrive_file(path: Path) -> pd.DataFrame:
    try:
        # every cell as text, typed cell by cell in from_frame (no inference across rows)
        raw = pd.read_csv(path, header=None, names=["id", "time", "lon", "lat"], dtype=str,
                          skipinitialspace=True, keep_default_na=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise InvalidInputError(f"cannot parse T-Drive file {path}: "
                                f"{str(exc).splitlines()[0]}") from None
    return raw


def _read_plt(path: Path) -> pd.DataFrame:
    try:
        raw = pd.read_csv(path, skiprows=6, header=None, dtype=str, keep_default_na=False,
                          names=["lat", "lon", "zero", "alt", "days", "date", "clock"])
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise InvalidInputError(f"cannot parse GeoLife .plt file {path}: "
                                f"{str(exc).splitlines()[0]}") from None
    uid = path.parent.parent.name if path.parent.name.lower() == "trajectory" else path.stem
    stamp = raw["date"].str.strip() + " " + raw["clock"].str.strip()
    return pd.DataFrame({"id": uid, "time": stamp, "lat": raw["lat"], "lon": raw["lon"]})


def detect_format(path: Path) -> str:
    """Guess the format: .plt or a GeoLife directory, T-Drive lines, else a table."""
    if path.is_dir():
        if any(path.rglob("*.plt")):
            return "plt"
        if any(path.glob("*.txt")):
            return "tdrive"
        raise InvalidInputError(f"directory {path} holds no .plt (GeoLife) or .txt (T-Drive) files")
    if path.suffix.lower() == ".plt":
        return "plt"
    if path.suffix.lower() == ".parquet":
        return "table"
    return "tdrive" if _looks_tdrive(_first_line(path)) else "table"


def read_trajectories(path: str | Path, *, fmt: str = "auto", id_col: str | None = None,
                      time_col: str | None = None, lat_col: str | None = None,
                      lon_col: str | None = None, heading_col: str | None = None,
                      time_unit: str = "s", delimiter: str | None = None) -> pd.DataFrame:
    """Read a trajectory file or directory into the canonical table (not yet validated)."""
    path = Path(path)
    if not path.exists():
        raise InvalidInputError(f"file not found: {path}")
    if fmt not in FORMATS:
        raise InvalidInputError(f"--format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    kind = detect_format(path) if fmt == "auto" else fmt
    if kind == "geolife":  # the scikit-mobility sample layout is a plain table
        kind = "plt" if (path.is_dir() or path.suffix.lower() == ".plt") else "table"
    if kind == "table":
        if path.is_dir():
            raise InvalidInputError(f"{path} is a directory; --format table needs a file")
        frame = read_table(path, delimiter=delimiter)  # cells as text: '001' stays '001'
        id_name = _find_column(frame, "id", id_col)
        return from_frame(frame, id_col=id_name, time_col=time_col, lat_col=lat_col,
                          lon_col=lon_col, heading_col=heading_col, time_unit=time_unit)
    if kind == "tdrive":
        files = sorted(path.glob("*.txt")) if path.is_dir() else [path]
        frames = [_read_tdrive_file(f) for f in files]
    else:
        files = sorted(path.rglob("*.plt")) if path.is_dir() else [path]
        frames = [_read_plt(f) for f in files]
    frames = [f for f in frames if len(f)]
    if not frames:
        raise InvalidInputError(f"{path} holds no trajectory points")
    return from_frame(pd.concat(frames, ignore_index=True), id_col="id", time_col="time",
                      lat_col="lat", lon_col="lon")


_LAT_NAMES = ("lat", "latitude")
_LON_NAMES = ("lon", "lng", "long", "longitude")


def schema_roles(schema: Any) -> dict[str, str]:
    """Which declared column is the id (the privacy unit), the time, the latitude, the
    longitude: from the schema alone."""
    where = f"schema {schema.name!r}"
    if schema.privacy_unit == "row":
        raise InvalidInputError(f"{where}: trajectories need a person column as privacy_unit "
                                "(e.g. uid), not 'row'")
    times = [c.name for c in schema.columns if c.type == "datetime"]
    lats = [c.name for c in schema.columns if c.is_numeric and c.name.lower() in _LAT_NAMES]
    lons = [c.name for c in schema.columns if c.is_numeric and c.name.lower() in _LON_NAMES]
    for role, found in (("datetime", times), ("latitude (lat)", lats),
                        ("longitude (lon/lng)", lons)):
        if len(found) != 1:
            raise InvalidInputError(f"{where}: declare exactly one {role} column for "
                                    f"trajectories, found {len(found)}")
    return {"id": schema.privacy_unit, "time": times[0], "lat": lats[0], "lon": lons[0]}


def read_with_schema(path: str | Path, schema: Any, on_invalid: str = "refuse", *,
                     delimiter: str | None = None) -> pd.DataFrame:
    """A trajectory table fitted to a declared schema (e.g. the bundled `geolife`), then put
    in the canonical columns. Coordinates and times outside the schema's bounds are refused
    or (coerce) clamped; rows with no place (a missing or unparseable value) are dropped."""
    from privlab.schema import check_policy, load_schema, read_declared

    sch = load_schema(schema)
    roles = schema_roles(sch)
    path = Path(path)
    if detect_format(path) != "table":
        raise InvalidInputError("--schema applies to table inputs (CSV/TSV/Parquet); convert "
                                "the GeoLife/T-Drive files to a table first")
    frame = read_declared(path, sch, check_policy(on_invalid), delimiter=delimiter,
                          columns=[roles[r] for r in ("id", "time", "lat", "lon")])
    if len(frame) == 0:
        raise InvalidInputError("no fix left after fitting the table to the schema")
    return from_frame(frame, id_col=roles["id"], time_col=roles["time"], lat_col=roles["lat"],
                      lon_col=roles["lon"])
