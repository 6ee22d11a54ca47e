"""Helpers for the trajectory tests: small synthetic trajectories inside a public box."""

from __future__ import annotations

import numpy as np
import pandas as pd

from privlab.trajectory.geo import BBox

BOX = BBox(39.80, 116.20, 40.10, 116.60)


def make_trajectories(n_ids: int = 6, trips: int = 2, points: int = 40, seed: int = 0,
                      step_s: int = 5) -> pd.DataFrame:
    """Random walks well inside BOX: each id has `trips` trips separated by a 2-hour gap."""
    rng = np.random.default_rng(seed)
    rows = []
    base = pd.Timestamp("2020-01-01 08:00:00")
    for i in range(n_ids):
        for k in range(trips):
            lat0 = rng.uniform(39.85, 40.05)
            lon0 = rng.uniform(116.25, 116.55)
            lat = lat0 + np.cumsum(rng.normal(0, 2e-4, points))
            lon = lon0 + np.cumsum(rng.normal(0, 2e-4, points))
            start = base + pd.Timedelta(hours=3 * k, minutes=i)
            times = start + pd.to_timedelta(np.arange(points) * step_s, unit="s")
            rows.append(pd.DataFrame({"uid": f"u{i:03d}", "datetime": times, "lat": lat,
                                      "lng": lon}))
    return pd.concat(rows, ignore_index=True)
