"""Per-user local-DP trajectory publishing on Spark: `groupBy(id).applyInPandas(...)`.

Local DP is per user by construction: each user's windows are averaged and noised from that
user's fixes alone, so the work splits by user with no communication. Every group runs the
same `anonymize` as the single-machine path (same mechanisms, same grids); the output is
written as Parquet by the executors with the JSON sidecar next to it.

Noise: a fresh CSPRNG per user group; with `seed` (tests only) user u's stream is
PCG64([seed, crc32(u)]), so a run is reproducible and equals `anonymize(rows of u,
rng=default_rng([seed, crc32(u)]))` user by user (the check in the tests).

The guarantee is the single-machine one: per fix from (epsilon, window, stride); per trip
from the longest trip's window count, which is read from the *published* output (the numbers
of windows are published unchanged and say so in the guarantee).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import uuid
import zlib
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd

from privlab.errors import InvalidInputError
from privlab.trajectory.geo import BBox
from privlab.trajectory.publish import (
    _guarantees,
    anonymize,
    check_window,
    sidecar_path,
    windows_per_fix,
)

OUTPUT_SCHEMA = "id string, trip long, window long, time timestamp, lat double, lon double"


def user_rng(seed: int, user: str) -> np.random.Generator:
    return np.random.default_rng([int(seed), zlib.crc32(str(user).encode("utf-8"))])


def _noise_info(window: int, stride: int, epsilon: float, mechanism: str, radius: float,
                box: BBox, sensitivity: str) -> dict[str, Any]:
    """The noise description, which depends only on the public parameters: taken from a run
    on a public, synthetic one-window track at the box centre."""
    lat = (box.lat0 + box.lat1) / 2
    lon = (box.lon0 + box.lon1) / 2
    times = pd.Timestamp("2000-01-01") + pd.to_timedelta(np.arange(window), unit="s")
    probe = pd.DataFrame({"id": "probe", "time": times, "lat": lat, "lon": lon})
    rel = anonymize(probe, window=window, stride=stride, epsilon=epsilon, mechanism=mechanism,
                    radius=radius, bbox=box, sensitivity=sensitivity, rng=0,
                    keep_averaged=False)
    return rel.noise


def publish_spark(data: Any, out: str | Path, *, window: int, epsilon: float,
                  stride: int = 1, mechanism: str = "planar", radius: float = 100.0,
                  bbox: BBox | str | tuple[float, float, float, float] | None = None,
                  sensitivity: str = "bbox", gap_minutes: float = 30.0,
                  id_column: str = "id", seed: int | None = None, spark: Any = None,
                  master: str | None = None) -> dict[str, Any]:
    """Publish every user's trajectories with local DP on Spark; write Parquet to `out` (a
    directory) and `<out>.json`; return the sidecar. `data`: a Spark DataFrame, a Parquet
    path or `table:NAME`, in any layout `privlab.trajectory.from_frame` reads."""
    from privlab.engines.spark import get_spark, read_source

    window, stride = check_window(window, stride)
    box = BBox.parse(bbox)
    if box is None:
        raise InvalidInputError("--bbox LAT0,LON0,LAT1,LON1 is required on Spark: it fixes the "
                                "projection / sensitivity and filters the fixes (public)")
    if mechanism == "laplace" and sensitivity == "paper":
        raise InvalidInputError("--sensitivity paper is not differentially private and is not "
                                "offered on Spark; use --sensitivity bbox")
    noise = _noise_info(window, stride, epsilon, mechanism, radius, box, sensitivity)
    spark = spark or get_spark(master)
    df = read_source(spark, data, what="DATA", columns=[id_column])
    params = dict(window=window, stride=stride, epsilon=epsilon, mechanism=mechanism,
                  radius=radius, bbox=box, sensitivity=sensitivity, gap_minutes=gap_minutes)

    def per_user(frame: pd.DataFrame) -> pd.DataFrame:
        user = str(frame[id_column].iloc[0])
        rng = None if seed is None else user_rng(seed, user)
        try:
            rel = anonymize(frame, rng=rng, keep_averaged=False, on_invalid="drop", **params)
        except InvalidInputError:  # no valid fix or no full window: nothing to publish
            return pd.DataFrame({c: pd.Series(dtype=t) for c, t in (
                ("id", "str"), ("trip", "int64"), ("window", "int64"),
                ("time", "datetime64[ns]"), ("lat", "float64"), ("lon", "float64"))})
        pub = rel.published
        return pd.DataFrame({"id": pub["id"].astype(str), "trip": pub["trip"].astype("int64"),
                             "window": pub["window"].astype("int64"), "time": pub["time"],
                             "lat": pub["lat"], "lon": pub["lon"]})

    published = df.groupBy(id_column).applyInPandas(per_user, schema=OUTPUT_SCHEMA)
    target = str(out)
    local = "://" not in target or target.startswith("file://")
    staging = f"{target}.tmp-{uuid.uuid4().hex[:8]}" if local else target
    if local and not Path(target).expanduser().resolve().parent.exists():
        raise InvalidInputError(f"output directory does not exist: {Path(target).parent}")
    published.write.mode("overwrite").parquet(staging)
    if local:  # swap in the finished directory (a failed job leaves the old output alone)
        if Path(target).exists():
            shutil.rmtree(target)
        os.replace(staging, target)
    from pyspark.sql import functions as F

    written = spark.read.parquet(target)
    per_trip = written.groupBy("id", "trip").count()
    stats = per_trip.agg(F.max("count").alias("w"), F.sum("count").alias("n"),
                         F.countDistinct("id").alias("u"), F.count("*").alias("t")).first()
    max_w = int(stats["w"] or 0)
    stub = SimpleNamespace(size=window, stride=stride,
                           counts={"max_windows_per_trip": max_w})
    g_fix, g_trip = _guarantees(mechanism, sensitivity, float(epsilon), float(radius), stub,
                                box, noise, seed is not None)
    sidecar = {
        "kind": "privlab.trajectory.release", "engine": "spark",
        "parameters": {"window": window, "stride": stride, "epsilon": float(epsilon),
                       "mechanism": mechanism,
                       "sensitivity": sensitivity if mechanism == "laplace" else None,
                       "radius_m": float(radius) if mechanism == "planar" else None,
                       "bbox": box.to_list(), "gap_minutes": float(gap_minutes),
                       "seeded": seed is not None,
                       "windows_per_fix": windows_per_fix(window, stride)},
        "guarantee": g_fix.to_dict(), "trip_guarantee": g_trip.to_dict(), "noise": noise,
        "counts": {"published_windows": int(stats["n"] or 0), "users": int(stats["u"] or 0),
                   "trips": int(stats["t"] or 0), "max_windows_per_trip": max_w},
        "columns": ["id", "trip", "window", "time", "lat", "lon"],
    }
    if local:
        from privlab.utils.atomic import atomic_write_text

        atomic_write_text(sidecar_path(target),
                          json.dumps(sidecar, indent=2, default=str) + "\n")
    with contextlib.suppress(Exception):
        written.unpersist()
    return sidecar
