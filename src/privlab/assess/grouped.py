"""The assessment from group-by counts: the same `Assessment` as `assess()`, computed by a SQL
engine (DuckDB over Parquet on one machine, Spark on a cluster) so that only counts reach
this process, never the records.

Everything `assess()` reports is a function of counts:
- an attribute set's richness, unique share, k and largest class come from its value counts,
  and those reduce inside the engine to five numbers (distinct, sum of squared counts,
  records in classes of one, smallest and largest class): one `GROUP BY GROUPING SETS`
  query per Apriori level computes them for every set of the level in one scan;
- k / l / t / delta-presence and the risks need the distinct (QI..., sensitive) tuples with
  their counts, which `privlab.assess.models` takes as a weighted table (`weights=`): one
  group-by, collected as Arrow. Its size is the number of distinct tuples, not of rows.

Missing values follow the same policy (`value`: NULL and NaN are one more value; `drop`:
rows with a missing assessed attribute are left out) and numeric binning uses the same
edges (`np.linspace(min, max, N + 1)`, right-closed last bin) as the in-memory path.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from privlab.assess.combinations import CombinationResult, SetStats, apriori
from privlab.assess.declared import DeclaredBins
from privlab.assess.encode import MISSING_LABEL, MissingPolicy
from privlab.assess.models import SensitiveKind, evaluate_privacy
from privlab.assess.pipeline import assess_steps, combination_progress
from privlab.assess.recommend import recommend
from privlab.assess.result import NOT_DP_REASON, Assessment, AttributeResult
from privlab.assess.richness import Thresholds, parse_thresholds, resolve_bounds
from privlab.assess.sources import (  # re-exported: the sources' import path before issue 31
    CountSource,
    DuckDBSource,
    SparkSource,
    is_parquet,
    lit,
    q,
)
from privlab.engines.base import GROUPED_COUNTS
from privlab.errors import InvalidInputError
from privlab.schema.model import Schema

#: Grouping sets per query: Spark expands every row once per set, so a level with many sets
#: is cut into batches of this many.
SETS_PER_QUERY = 24


@dataclass
class _Prepared:
    exprs: dict[str, str]  # attribute -> SQL expression (NaN as NULL, bins applied)
    raw: dict[str, str]  # attribute -> SQL expression without bins
    numeric: dict[str, bool]
    binned: dict[str, bool]
    where: str  # the rows used ('TRUE' unless missing='drop')
    rows_in: int
    rows_used: int
    missing: dict[str, int]


def _prepare(src: CountSource, attrs: list[str], missing: MissingPolicy,
             bins: int | Mapping[str, int | Sequence[float]] | None) -> _Prepared:
    raw: dict[str, str] = {}
    numeric: dict[str, bool] = {}
    for a in attrs:
        kind = src.kind(a)
        numeric[a] = kind in ("int", "float")
        raw[a] = f"CASE WHEN isnan({q(a)}) THEN NULL ELSE {q(a)} END" if kind == "float" \
            else q(a)
    aggs = ["COUNT(*)"] + [f"SUM(CASE WHEN {raw[a]} IS NULL THEN 1 ELSE 0 END)" for a in attrs]
    to_bin = {}
    for a in attrs:
        b = bins.get(a) if isinstance(bins, Mapping) else bins
        if b is None:
            continue
        if not numeric[a] and not (isinstance(b, DeclaredBins) and b.datetime):
            if isinstance(bins, Mapping):
                raise InvalidInputError(f"cannot bin {a!r}: it is not numeric; drop it from "
                                        "the bins option")
            continue
        to_bin[a] = b
        if isinstance(b, int):
            aggs += [f"MIN({raw[a]})", f"MAX({raw[a]})"]
    row = src.sql(f"SELECT {', '.join(aggs)} FROM __data")[0]
    rows_in = int(row[0])
    if rows_in < 2:
        raise InvalidInputError(f"the table has {rows_in} row(s); the assessment needs at least "
                                "2 rows")
    missing_counts = {a: int(row[1 + i] or 0) for i, a in enumerate(attrs)}
    for a, m in missing_counts.items():
        if m == rows_in:
            raise InvalidInputError(f"column {a!r} is entirely missing; leave it out of the "
                                    "assessed attributes or fill it")
    exprs = dict(raw)
    pos = 1 + len(attrs)
    for a, b in to_bin.items():
        if isinstance(b, int):
            if b < 1:
                raise InvalidInputError(f"bins must be >= 1, got {b}")
            lo, hi = float(row[pos]), float(row[pos + 1])
            pos += 2
            if hi == lo:
                hi = lo + 1.0
            edges = [lit(e) for e in np.linspace(lo, hi, b + 1)]
        else:
            edges = _edge_literals(b)
        # searchsorted(edges, x, side="right") - 1, clipped to [0, N-1]: the in-memory rule
        whens = " ".join(f"WHEN {raw[a]} >= {edges[i]} THEN {i}"
                         for i in range(len(edges) - 2, 0, -1))
        exprs[a] = f"CASE WHEN {raw[a]} IS NULL THEN NULL {whens} ELSE 0 END"
    where = "TRUE"
    rows_used = rows_in
    if missing == "drop":
        where = " AND ".join(f"{raw[a]} IS NOT NULL" for a in attrs)
        rows_used = int(src.sql(f"SELECT COUNT(*) FROM __data WHERE {where}")[0][0])
        if rows_used < 2:
            raise InvalidInputError(f"only {rows_used} row(s) have no missing value; drop "
                                    "--drop-missing (count missing as a value) or fill the gaps")
    return _Prepared(exprs, raw, numeric, {a: a in to_bin for a in attrs}, where, rows_in,
                     rows_used, missing_counts)


def _edge_literals(bins: Sequence[float] | DeclaredBins) -> list[str]:
    """SQL literals of explicit bin edges (declared bins: numbers or timestamps)."""
    if isinstance(bins, DeclaredBins) and bins.datetime:
        return [f"CAST('{t.isoformat(sep=' ')}' AS TIMESTAMP)" for t in bins.timestamps()]
    edges = np.asarray(bins.edges if isinstance(bins, DeclaredBins) else bins, dtype=float)
    if edges.ndim != 1 or len(edges) < 2 or np.any(np.diff(edges) <= 0):
        raise InvalidInputError("bin edges must be an increasing list of at least two "
                                "numbers")
    return [lit(e) for e in edges]


def set_stats(src: CountSource, prep: _Prepared,
              sets: Sequence[tuple[str, ...]]) -> dict[tuple[str, ...], SetStats]:
    """SetStats of every attribute set, SETS_PER_QUERY sets per scan (GROUPING SETS)."""
    out: dict[tuple[str, ...], SetStats] = {}
    n = prep.rows_used
    for start in range(0, len(sets), SETS_PER_QUERY):
        batch = list(sets[start:start + SETS_PER_QUERY])
        cols = sorted({a for s in batch for a in s})
        index = {a: i for i, a in enumerate(cols)}
        alias = {a: f"__a{i}" for i, a in enumerate(cols)}
        inner = ", ".join(f"{prep.exprs[a]} AS {alias[a]}" for a in cols)
        gid = " + ".join(f"GROUPING({alias[a]}) * {2 ** index[a]}" for a in cols)
        gsets = ", ".join("(" + ", ".join(alias[a] for a in s) + ")" for s in batch)
        text = (f"SELECT __gid, COUNT(*), SUM(CAST(__c AS DOUBLE) * CAST(__c AS DOUBLE)), "
                f"SUM(CASE WHEN __c = 1 THEN 1 ELSE 0 END), MIN(__c), MAX(__c) FROM ("
                f"SELECT {gid} AS __gid, COUNT(*) AS __c FROM (SELECT {inner} FROM __data "
                f"WHERE {prep.where}) AS __r GROUP BY GROUPING SETS ({gsets})) AS __g "
                f"GROUP BY __gid")
        rows = {int(r[0]): r for r in src.sql(text)}
        full = 2 ** len(cols) - 1
        for s in batch:
            key = full - sum(2 ** index[a] for a in s)
            _, distinct, sq, uniq, kmin, kmax = rows[key]
            out[tuple(s)] = SetStats(attributes=tuple(s), distinct=int(distinct),
                                     richness=1.0 - float(sq) / (float(n) * float(n)),
                                     unique_share=float(uniq) / n, k=int(kmin),
                                     max_support=int(kmax))
    return out


def _combinations(src: CountSource, prep: _Prepared, attrs: list[str], tiers: dict[str, str],
                  bounds: Any, max_size: int, max_sets: int = 20000,
                  on_level: Callable[[int], None] | None = None) -> CombinationResult:
    """`privlab.assess.combinations.apriori` with one GROUPING SETS scan per level."""
    candidates = [a for a in attrs if tiers.get(a) in ("none", "low")]
    return apriori(candidates, tiers, bounds, max_size, max_sets,
                   lambda sets: set_stats(src, prep, sets), on_level)


def _grouped_frame(src: CountSource, prep: _Prepared | None, cols: list[str]) -> pd.DataFrame:
    """The distinct tuples of `cols` (NaN as missing) with their record counts `__w`."""
    exprs = []
    for c in cols:
        kind = src.kind(c)
        e = f"CASE WHEN isnan({q(c)}) THEN NULL ELSE {q(c)} END" if kind == "float" else q(c)
        exprs.append(f"{e} AS {q(c)}")
    where = prep.where if prep is not None else "TRUE"
    keys = ", ".join(q(c) for c in cols)
    frame = src.frame(f"SELECT {', '.join(exprs)}, COUNT(*) AS __w FROM __data WHERE {where} "
                      f"GROUP BY {keys}")
    for c in cols:  # nullable integers come back as pandas' masked type: match read_parquet
        if isinstance(frame[c].dtype, pd.api.extensions.ExtensionDtype) and \
                pd.api.types.is_integer_dtype(frame[c].dtype):
            frame[c] = frame[c].astype("float64") if frame[c].isna().any() \
                else frame[c].astype("int64")
    return frame


def _check_columns(src: CountSource, attributes: Sequence[str] | None,
                   qis: Sequence[str] | None, sensitive: str | None) -> list[str]:
    """The assessed attributes (default: every column); every named column must exist."""
    have = list(src.columns)
    attrs = have if attributes is None else list(attributes)
    if not attrs:
        raise InvalidInputError("no attributes to assess; pass at least one column")
    for field_name, cols in (("attribute", attrs), ("quasi-identifier", qis or []),
                             ("sensitive attribute", [sensitive] if sensitive else [])):
        for c in cols:
            if c not in src.columns:
                raise InvalidInputError(f"unknown {field_name} {c!r}; the table has: "
                                        f"{', '.join(have[:20])}")
    return attrs


def assess_grouped(src: CountSource, *, attributes: Sequence[str] | None = None,
                   quasi_identifiers: Sequence[str] | None = None,
                   sensitive: str | None = None,
                   thresholds: str | Thresholds | None = "thirds",
                   max_combination_size: int = 2, missing: MissingPolicy = "value",
                   bins: int | Mapping[str, int | Sequence[float]] | None = None,
                   population: CountSource | None = None,
                   sensitive_kind: SensitiveKind = "auto", recursive_l: int | None = None,
                   risk_threshold: float = 0.2, target_k: int = 5, source: str = "<table>",
                   progress: Callable[[str, int, int], None] | None = None,
                   schema: Schema | None = None, on_invalid: str = "refuse") -> Assessment:
    """`assess()` over an engine: same arguments (population as a CountSource), same result
    (and the same progress steps). With a declared `schema` the rows are conformed inside
    the engine (`privlab.assess.declared_sql`), as `assess()` conforms them in memory."""
    for engine in (src, population):
        if engine is not None:
            engine.require(GROUPED_COUNTS, "assess_grouped")
    total = assess_steps(max_combination_size, quasi_identifiers is not None)
    report = progress or (lambda _stage, _done, _total: None)
    if max_combination_size < 1:
        raise InvalidInputError(f"--max-combination-size must be >= 1, got "
                                f"{max_combination_size}")
    if missing not in ("value", "drop"):
        raise InvalidInputError(f"missing policy must be 'value' or 'drop', got {missing!r}")
    bounds_spec = parse_thresholds(thresholds)
    if sensitive is not None and quasi_identifiers is None:
        raise InvalidInputError("--sensitive needs --quasi-identifiers (the classes it is "
                                "measured in)")
    attrs = _check_columns(src, attributes, quasi_identifiers, sensitive)
    schema_info, direct = None, []
    if schema is not None:
        from privlab.assess.declared_sql import conformed_sources

        src, population, attrs, bins, schema_info, direct = conformed_sources(
            src, population, schema, on_invalid, attributes, quasi_identifiers, sensitive,
            bins)
    report(f"counting on {src.name}", 0, total)
    prep = _prepare(src, attrs, missing, bins)
    report("domain richness", 1, total)
    single = set_stats(src, prep, [(a,) for a in attrs])
    bounds = resolve_bounds([single[(a,)].richness for a in attrs], bounds_spec)
    results = []
    for a in attrs:
        s = single[(a,)]
        kind = "numeric" if prep.numeric[a] and not prep.binned[a] else "categorical"
        b = bins.get(a) if isinstance(bins, Mapping) else None
        labels = tuple(b.labels()) if isinstance(b, DeclaredBins) else None
        results.append(AttributeResult(a, kind, s.distinct, s.richness, bounds.tier(s.richness),
                                       s.unique_share, s.k, prep.missing[a], prep.binned[a],
                                       declared_bins=labels))
    warnings: list[str] = [bounds.note] if bounds.note else []
    tiers = {a.name: a.tier for a in results}
    combos = _combinations(src, prep, attrs, tiers, bounds, max_combination_size,
                           on_level=combination_progress(report, total))
    warnings.extend(combos.warnings)
    if missing == "drop":
        statement = (f"rows with a missing value in any assessed attribute were dropped "
                     f"({prep.rows_in - prep.rows_used:,} of {prep.rows_in:,}; "
                     f"{prep.rows_used:,} rows used)")
    else:
        statement = (f"missing values were counted as one more value '{MISSING_LABEL}' of "
                     f"their attribute ({sum(prep.missing.values()):,} missing cells; all "
                     f"{prep.rows_used:,} rows used)")
    result = Assessment(source=source, rows_in=prep.rows_in, rows_used=prep.rows_used,
                        missing_policy=missing, missing_statement=statement,
                        attributes=results, bounds=bounds, combinations=combos,
                        warnings=warnings, schema=schema_info, direct_identifiers=direct)
    if quasi_identifiers is not None:
        report("privacy models", total - 1, total)
        qis = list(quasi_identifiers)
        cols = qis + ([sensitive] if sensitive and sensitive not in qis else [])
        frame = _grouped_frame(src, prep, cols)
        pop_frame = pop_w = None
        if population is not None:
            for c in qis:
                if c not in population.columns:
                    raise InvalidInputError(f"unknown population column {c!r}; the table has: "
                                            f"{', '.join(list(population.columns)[:20])}")
            pop_frame = _grouped_frame(population, None, qis)
            pop_w = pop_frame.pop("__w").to_numpy()
        weights = frame.pop("__w").to_numpy()
        result.privacy_models = evaluate_privacy(
            frame, qis, sensitive, population=pop_frame, sensitive_kind=sensitive_kind,
            recursive_l=recursive_l, risk_threshold=risk_threshold, missing=missing,
            weights=weights, population_weights=pop_w)
    result.target_k = target_k
    result.recommendations = recommend(result, target_k=target_k)
    result.warnings.append("not differential privacy: " + NOT_DP_REASON)
    return result



__all__ = ["CountSource", "DuckDBSource", "SparkSource", "assess_grouped", "is_parquet",
           "set_stats"]
