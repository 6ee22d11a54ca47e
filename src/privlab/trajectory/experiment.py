"""Akin et al.'s (2021) RMSE table (PB x epsilon) for each noise setting, on prepared data.

RMSE is Akin et al.'s: T'' against T' per coordinate in degrees (pooled over all windows of all
trajectories; with repeats, the mean squared error is averaged before the square root), plus
metres. Each row carries the guarantee that setting actually gives.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from privlab.core.rng import RngLike, make_rng
from privlab.errors import InvalidInputError
from privlab.trajectory.geo import BBox
from privlab.trajectory.metrics import window_errors
from privlab.trajectory.preprocess import Prepared
from privlab.trajectory.publish import NotPrivateWarning, anonymize

SETTINGS = {
    "planar": {"mechanism": "planar", "sensitivity": "bbox"},
    "laplace-bbox": {"mechanism": "laplace", "sensitivity": "bbox"},
    "laplace-paper": {"mechanism": "laplace", "sensitivity": "paper"},
}
PAPER_WINDOWS = (2, 3, 4)
PAPER_EPSILONS = (0.5, 1.0, 1.5, 2.0)


def rmse_table(p: Prepared, *, bbox: BBox, settings: Sequence[str] = tuple(SETTINGS),
               windows: Sequence[int] = PAPER_WINDOWS,
               epsilons: Sequence[float] = PAPER_EPSILONS, radius: float = 100.0,
               stride: int = 1, gap_minutes: float = 30.0, repeats: int = 1,
               rng: RngLike = None,
               progress: Callable[[], None] | None = None) -> pd.DataFrame:
    """One row per (setting, PB, epsilon): RMSE in degrees and metres and the guarantee."""
    unknown = [s for s in settings if s not in SETTINGS]
    if unknown:
        raise InvalidInputError(f"unknown setting {unknown[0]!r}; choose from "
                                f"{', '.join(SETTINGS)}")
    if repeats < 1:
        raise InvalidInputError(f"--repeats must be >= 1, got {repeats}")
    gen = make_rng(rng)
    rows: list[dict[str, Any]] = []
    for name in settings:
        for pb in windows:
            for eps in epsilons:
                acc: dict[str, list[float]] = {}
                release = None
                for _ in range(repeats):
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore", NotPrivateWarning)
                        release = anonymize(p, window=int(pb), stride=min(stride, int(pb)),
                                            epsilon=float(eps), radius=radius, bbox=bbox,
                                            gap_minutes=gap_minutes, rng=gen, **SETTINGS[name])
                    err = window_errors(release.averaged, release.published)
                    for key in ("rmse_lat_deg", "rmse_lon_deg", "rmse_m", "mean_haversine_m",
                                "share_exact_lat", "share_exact_lon"):
                        acc.setdefault(key, []).append(err[key])
                    if progress:
                        progress()
                assert release is not None
                g = release.guarantee
                row = {"setting": name, "window": int(pb), "epsilon": float(eps),
                       "radius_m": radius if name == "planar" else None}
                for key, vals in acc.items():
                    arr = np.asarray(vals)
                    row[key] = float(np.sqrt(np.mean(arr ** 2))) if key.startswith("rmse") \
                        else float(arr.mean())
                row.update({"windows": release.counts["windows"], "is_dp": g.is_dp,
                            # the claim on the locations (times are outside it: not_covered)
                            "epsilon_per_fix": g.epsilon if math.isfinite(g.epsilon) else None,
                            "neighbouring": g.neighbouring})
                rows.append(row)
    return pd.DataFrame(rows)
