"""Synthetic Turkish census (the PIA article, Tables 3-4 and 6): 300 adults by default.

The PIA article tests its attribute-richness method on a 300-record population register generated
from TÜİK statistics (TCKNO, name, surname, age, sex, hometown, marital status) and reports
the Gini richness K = 1 - sum_j (count_j / n)^2 of each attribute (Table 6). The PIA article's
data are not published, so this module regenerates an equivalent register from frequency
tables shipped in `privlab/data/bundled/census/` (see its README.txt):

- `ages.csv`: working-age adults 18-64 by sex in 5-year bands (thousands), approximate
  TÜİK address-based register figures (general knowledge, rounded). Every age the PIA article
  shows lies in 18-55.
- `marital.csv`: share of Bekâr (never married) / Evli (married) / Dul (widowed or
  divorced, the PIA article's three categories) by sex and age band; approximate TÜİK shares.
- `first_names.csv`, `surnames.csv`: the most common Turkish first names (by sex) and
  surnames in their well-known rank order, weighted by a Zipf-Mandelbrot law over the rank
  (not official counts). Like the PIA article, only common names are drawn, so names are far
  more concentrated than in the whole population.
- `provinces.csv`: the 81 provinces with their approximate 2020 resident population
  (thousands). Hometown (memleket, the province of family registration) is drawn with
  weight population ** HOMETOWN_EXPONENT: registration is flatter than residence because
  most residents of the big cities are registered in other provinces.

The Zipf parameters and HOMETOWN_EXPONENT were tuned (the tables, not the seed) so that 300
rows reproduce Table 6 within 0.02 for every seed in 1..100 (age, from the realistic age
table, sits about 0.005 above the PIA article). Sex, age band and marital status are drawn as a
representative (quota) sample, as the PIA article describes its data, so their richness barely
moves between seeds; the joint richness of (marital_status, sex) lands near the PIA article's
0.750 (the attribute-based PIA article, section 4.3.2).

TCKNO: the PIA article truncates the 11-digit T.C. identity number to 10 digits; we draw 9 random
digits (first non-zero) and append the real TCKNO's 10th (check) digit, so ids look real,
are unique within a table, and are random (any match with a real number is chance).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import pandas as pd

from privlab.core.rng import RngLike, make_rng
from privlab.data.bundled import bundled_path
from privlab.errors import InvalidInputError

COLUMNS = ["tckno", "name", "surname", "age", "sex", "hometown", "marital_status"]
SEXES = ("Erkek", "Kadın")
MARITAL_STATUSES = ("Bekâr", "Evli", "Dul")
HOMETOWN_EXPONENT = 0.84
MAX_ROWS = 1_000_000


#: Each bundled table's column types, declared (README.txt): counts and bounds integers,
#: shares floats, the rest text. Nothing is guessed from the cells.
TABLE_TYPES: dict[str, dict[str, str]] = {
    "ages": {"age_from": "int64", "age_to": "int64", "male_thousands": "int64",
             "female_thousands": "int64"},
    "marital": {"age_from": "int64", "age_to": "int64", "sex": "str", "Bekâr": "float64",
                "Evli": "float64", "Dul": "float64"},
    "first_names": {"sex": "str", "name": "str", "weight": "int64"},
    "surnames": {"surname": "str", "weight": "int64"},
    "provinces": {"plate": "int64", "province": "str", "population_thousands": "int64"},
}


def _table(name: str) -> pd.DataFrame:
    """A bundled table read as text and converted by `TABLE_TYPES` (a cell that is not of
    its column's type fails loudly: the package's data is broken)."""
    types = TABLE_TYPES[name.removesuffix(".csv")]
    frame = pd.read_csv(bundled_path("census", name), encoding="utf-8", dtype=str,
                        keep_default_na=False)
    if list(frame.columns) != list(types):
        raise InvalidInputError(f"bundled census table {name} has columns "
                                f"{list(frame.columns)}, expected {list(types)}")
    return frame.astype(types)


@lru_cache(maxsize=1)
def census_tables() -> dict[str, pd.DataFrame]:
    """The bundled frequency tables (read once; callers must not modify them)."""
    return {key: _table(f"{key}.csv")
            for key in ("ages", "marital", "first_names", "surnames", "provinces")}


def _allocate(weights: np.ndarray, total: int, rng: np.random.Generator) -> np.ndarray:
    """Integer counts summing to `total`, each within 1 of total * share (randomised rounding).

    This is how a representative (quota) sample is drawn: the floor of every expected count,
    then the leftover units to cells chosen with probability proportional to their fraction.
    """
    expected = total * weights / weights.sum()
    counts = np.floor(expected).astype(np.int64)
    left = int(total - counts.sum())
    if left:
        frac = expected - counts + 1e-12
        counts[rng.choice(len(frac), size=left, replace=False, p=frac / frac.sum())] += 1
    return counts


def _weighted_pick(candidates: np.ndarray, weights: np.ndarray, size: int,
                   rng: np.random.Generator) -> np.ndarray:
    """`size` distinct candidates, chosen with probability proportional to `weights`."""
    if size == 0:
        return candidates[:0]
    w = np.maximum(weights, 1e-9)
    return rng.choice(candidates, size=size, replace=False, p=w / w.sum())


def _tckno(n: int, rng: np.random.Generator) -> np.ndarray:
    """n distinct 10-digit ids: 9 random digits (leading non-zero) + the TCKNO check digit."""
    base = rng.choice(900_000_000, size=n, replace=False).astype(np.int64) + 100_000_000
    digits = [(base // 10 ** (8 - i)) % 10 for i in range(9)]  # d1 .. d9
    odd = digits[0] + digits[2] + digits[4] + digits[6] + digits[8]
    even = digits[1] + digits[3] + digits[5] + digits[7]
    check = (odd * 7 - even) % 10
    return (base * 10 + check).astype(str)


def generate_census(n: int = 300, seed: RngLike = 1) -> pd.DataFrame:
    """A synthetic Turkish population register of `n` adults (the PIA article's census data).

    Deterministic for an integer `seed`; `seed=None` draws from the secure generator.
    Columns: tckno (10-digit string, unique), name, surname, age (18-64), sex (Erkek/Kadın),
    hometown (one of the 81 provinces), marital_status (Bekâr/Evli/Dul).
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise InvalidInputError(f"census n must be a whole number of rows, got {n!r}")
    n = int(n)
    if n < 1 or n > MAX_ROWS:
        raise InvalidInputError(f"census n must be between 1 and {MAX_ROWS:,}, got {n}")
    rng = make_rng(seed)
    t = census_tables()
    ages, marital = t["ages"], t["marital"]

    # Sex x age band: a quota sample proportional to the population table.
    cell_weights = np.concatenate([ages["male_thousands"], ages["female_thousands"]]).astype(float)
    counts = _allocate(cell_weights, n, rng)
    n_bands = len(ages)
    cell = np.repeat(np.arange(2 * n_bands), counts)
    band = cell % n_bands
    sex_idx = cell // n_bands
    lo = ages["age_from"].to_numpy()[band]
    hi = ages["age_to"].to_numpy()[band]
    age = rng.integers(lo, hi + 1)

    # Marital status: per sex, quota counts from the age-specific shares of the people drawn,
    # then given to individuals in proportion to their own age-specific probability.
    status = np.empty(n, dtype=object)
    for s, sex in enumerate(SEXES):
        rows = np.flatnonzero(sex_idx == s)
        if rows.size == 0:
            continue
        shares = marital[marital["sex"] == sex].set_index("age_from")
        probs = shares.loc[ages["age_from"].to_numpy()[band[rows]], list(MARITAL_STATUSES)]
        probs = probs.to_numpy(dtype=float)
        quota = _allocate(probs.sum(axis=0), rows.size, rng)
        free = np.ones(rows.size, dtype=bool)
        for k in (2, 1):  # Dul, then Evli; whoever is left is Bekâr
            pool = np.flatnonzero(free)
            chosen = _weighted_pick(pool, probs[pool, k], int(quota[k]), rng)
            status[rows[chosen]] = MARITAL_STATUSES[k]
            free[chosen] = False
        status[rows[free]] = MARITAL_STATUSES[0]

    # Names by sex, surnames and hometowns: independent draws from the frequency tables.
    names = np.empty(n, dtype=object)
    first = t["first_names"]
    for s, sex in enumerate(SEXES):
        rows = np.flatnonzero(sex_idx == s)
        table = first[first["sex"] == sex]
        w = table["weight"].to_numpy(dtype=float)
        names[rows] = rng.choice(table["name"].to_numpy(dtype=object), size=rows.size,
                                 p=w / w.sum())
    sw = t["surnames"]["weight"].to_numpy(dtype=float)
    surname = rng.choice(t["surnames"]["surname"].to_numpy(dtype=object), size=n,
                         p=sw / sw.sum())
    hw = t["provinces"]["population_thousands"].to_numpy(dtype=float) ** HOMETOWN_EXPONENT
    hometown = rng.choice(t["provinces"]["province"].to_numpy(dtype=object), size=n,
                          p=hw / hw.sum())
    tckno = _tckno(n, rng)

    order = rng.permutation(n)
    frame = pd.DataFrame({
        "tckno": tckno[order],
        "name": names[order],
        "surname": surname[order],
        "age": age[order].astype(np.int64),
        "sex": np.asarray(SEXES, dtype=object)[sex_idx][order],
        "hometown": hometown[order],
        "marital_status": status[order],
    })
    for col in ("tckno", "name", "surname", "sex", "hometown", "marital_status"):
        frame[col] = frame[col].astype("str")
    return frame[COLUMNS]
