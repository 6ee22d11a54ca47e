"""Geometry for trajectories: haversine distances, bearings, public boxes and the local metric
projection that planar Laplace works in.

Why a projection fixed by a *public* box: planar Laplace is defined in a plane. Projecting each
point around itself would make the output distribution depend on the point in more than a
translation, and the privacy-loss ratio would be unbounded far from the point. One
equirectangular projection per release, fixed by the public box, keeps the mechanism exactly
planar Laplace; taking its reference latitude at the poleward edge of the box makes projected
distances never longer than true local distances inside the box, so "within r metres" in the
guarantee holds in true metres (on the mean-radius sphere) and not only in the plane.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from privlab.errors import InvalidInputError

#: Mean Earth radius (IUGG), metres: the sphere all distances in this package are measured on.
EARTH_RADIUS_M = 6_371_008.8
_DEG = math.pi / 180.0


def haversine_m(lat1: np.ndarray, lon1: np.ndarray, lat2: np.ndarray,
                lon2: np.ndarray) -> np.ndarray:
    """Great-circle distance in metres between arrays of points given in degrees."""
    p1 = np.radians(lat1)
    p2 = np.radians(lat2)
    dp = p2 - p1
    dl = np.radians(np.asarray(lon2, dtype=np.float64) - np.asarray(lon1, dtype=np.float64))
    a = np.sin(dp / 2) ** 2 + np.cos(p1) * np.cos(p2) * np.sin(dl / 2) ** 2
    return 2 * EARTH_RADIUS_M * np.arcsin(np.sqrt(np.clip(a, 0.0, 1.0)))


def bearing_deg(lat1: np.ndarray, lon1: np.ndarray, lat2: np.ndarray,
                lon2: np.ndarray) -> np.ndarray:
    """Initial bearing from point 1 to point 2 in degrees, 0 = north, clockwise, in [0, 360)."""
    p1 = np.radians(lat1)
    p2 = np.radians(lat2)
    dl = np.radians(np.asarray(lon2, dtype=np.float64) - np.asarray(lon1, dtype=np.float64))
    y = np.sin(dl) * np.cos(p2)
    x = np.cos(p1) * np.sin(p2) - np.sin(p1) * np.cos(p2) * np.cos(dl)
    return np.mod(np.degrees(np.arctan2(y, x)), 360.0)


def metres_per_degree(lat: np.ndarray | float) -> tuple[np.ndarray, np.ndarray]:
    """Local metres per degree of latitude and of longitude at `lat` (spherical Earth)."""
    north = np.full(np.shape(lat), EARTH_RADIUS_M * _DEG)
    east = EARTH_RADIUS_M * _DEG * np.cos(np.radians(lat))
    return north, east


@dataclass(frozen=True)
class BBox:
    """A public bounding box in degrees: lat0 <= lat <= lat1, lon0 <= lon <= lon1."""

    lat0: float
    lon0: float
    lat1: float
    lon1: float

    def __post_init__(self) -> None:
        vals = (self.lat0, self.lon0, self.lat1, self.lon1)
        if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in vals):
            raise InvalidInputError(f"--bbox must be four finite numbers, got {vals}")
        if not (-90 <= self.lat0 < self.lat1 <= 90):
            raise InvalidInputError(
                f"--bbox latitudes must satisfy -90 <= LAT0 < LAT1 <= 90, got {self.lat0}, "
                f"{self.lat1} (order is LAT0,LON0,LAT1,LON1)")
        if not (-180 <= self.lon0 < self.lon1 <= 180):
            raise InvalidInputError(
                f"--bbox longitudes must satisfy -180 <= LON0 < LON1 <= 180, got {self.lon0}, "
                f"{self.lon1} (a box across the antimeridian is not supported)")
        if max(abs(self.lat0), abs(self.lat1)) >= 89.0:
            raise InvalidInputError("--bbox reaches a pole (|lat| >= 89): the local metric "
                                    "projection is undefined there; use a smaller box")

    @classmethod
    def parse(cls, text: str | tuple[float, ...] | list[float] | BBox | None) -> BBox | None:
        """Parse 'LAT0,LON0,LAT1,LON1' (or a 4-tuple), south-west corner first.

        Reversed corners are refused, not swapped: a reversed longitude pair may mean a box
        across the antimeridian (unsupported), and guessing would filter the wrong area."""
        if text is None or isinstance(text, BBox):
            return text
        if isinstance(text, str):
            parts = [p.strip() for p in text.split(",")]
            try:
                vals = [float(p) for p in parts]
            except ValueError:
                raise InvalidInputError(
                    f"--bbox must be LAT0,LON0,LAT1,LON1 (four numbers), got {text!r}") from None
        else:
            vals = [float(v) for v in text]
        if len(vals) != 4:
            raise InvalidInputError(
                f"--bbox must be LAT0,LON0,LAT1,LON1 (four numbers), got {text!r}")
        a, b, c, d = vals
        if a > c or b > d:
            raise InvalidInputError(
                f"--bbox corners are reversed ({a:g},{b:g},{c:g},{d:g}): give the south-west "
                f"corner first, LAT0,LON0,LAT1,LON1 = {min(a, c):g},{min(b, d):g},"
                f"{max(a, c):g},{max(b, d):g}")
        return cls(a, b, c, d)

    @property
    def width_lat(self) -> float:
        return self.lat1 - self.lat0

    @property
    def width_lon(self) -> float:
        return self.lon1 - self.lon0

    def contains(self, lat: np.ndarray, lon: np.ndarray) -> np.ndarray:
        return (lat >= self.lat0) & (lat <= self.lat1) & (lon >= self.lon0) & (lon <= self.lon1)

    def to_list(self) -> list[float]:
        return [self.lat0, self.lon0, self.lat1, self.lon1]

    def __str__(self) -> str:
        return ",".join(f"{v:g}" for v in self.to_list())


@dataclass(frozen=True)
class LocalProjection:
    """Equirectangular projection: x = R cos(lat_ref) (lon - lon0), y = R (lat - lat0), metres.

    Affine in (lat, lon), so the projection of a window mean is the mean of the projections.
    """

    lat0: float
    lon0: float
    lat_ref: float

    @classmethod
    def for_bbox(cls, box: BBox) -> LocalProjection:
        """Reference latitude at the poleward edge: projected <= true distances in the box."""
        poleward = box.lat1 if abs(box.lat1) >= abs(box.lat0) else box.lat0
        return cls(lat0=(box.lat0 + box.lat1) / 2, lon0=(box.lon0 + box.lon1) / 2,
                   lat_ref=poleward)

    @classmethod
    def around(cls, lat: float, lon: float) -> LocalProjection:
        """A projection centred on (lat, lon); for evaluation metrics, not for releases."""
        return cls(lat0=lat, lon0=lon, lat_ref=lat)

    @property
    def _kx(self) -> float:
        return EARTH_RADIUS_M * _DEG * math.cos(math.radians(self.lat_ref))

    @property
    def _ky(self) -> float:
        return EARTH_RADIUS_M * _DEG

    def forward(self, lat: np.ndarray, lon: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return (np.asarray(lon) - self.lon0) * self._kx, (np.asarray(lat) - self.lat0) * self._ky

    def inverse(self, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.lat0 + np.asarray(y) / self._ky, self.lon0 + np.asarray(x) / self._kx

    def max_stretch(self, box: BBox) -> float:
        """Largest ratio projected / true local length over the box (<= 1 for `for_bbox`)."""
        lat_eq = 0.0 if box.lat0 <= 0 <= box.lat1 else min(abs(box.lat0), abs(box.lat1))
        lat_far = max(abs(box.lat0), abs(box.lat1))
        ratios = [math.cos(math.radians(self.lat_ref)) / math.cos(math.radians(v))
                  for v in (lat_eq, lat_far)]
        return max(1.0, *ratios)

    def to_dict(self) -> dict[str, float | str]:
        return {"kind": "equirectangular", "lat0": self.lat0, "lon0": self.lon0,
                "lat_ref": self.lat_ref, "earth_radius_m": EARTH_RADIUS_M}
