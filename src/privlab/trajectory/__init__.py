"""Trajectory publishing with local DP: the window-averaging model of Akın, Canbay & Sağıroğlu
(2021, Algorithm 1) with sound noise (planar Laplace / geo-indistinguishability, or per-axis
Laplace with a public box), the authors' data-dependent setting as a labelled non-DP
comparison, readers and filters, utility and re-identification metrics, plots and maps.
"""

from privlab.trajectory.geo import BBox, LocalProjection, haversine_m
from privlab.trajectory.io import from_frame, read_trajectories
from privlab.trajectory.preprocess import Filters, Prepared, prepare
from privlab.trajectory.publish import (
    BEIJING_BBOX,
    NotPrivateWarning,
    TrajectoryRelease,
    anonymize,
    make_windows,
    write_release,
)

__all__ = [
    "BBox", "LocalProjection", "haversine_m", "from_frame", "read_trajectories", "Filters",
    "Prepared", "prepare", "BEIJING_BBOX", "NotPrivateWarning", "TrajectoryRelease", "anonymize",
    "make_windows", "write_release",
]
