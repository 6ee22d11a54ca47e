"""Syntactic privacy models on a quasi-identifier (QI) set and a sensitive attribute
(as surveyed in the review "Differential Privacy in Deep Learning", docs/references.md).

k-anonymity (smallest equivalence class), l-diversity (distinct, entropy, recursive (c,l)),
t-closeness (earth mover's distance: ordered distance for numbers, equal distance for
categories), delta-presence against a population table, and re-identification risk
(prosecutor, journalist, marketer). Equivalence classes are dense codes; every per-class figure
is a `bincount` over (class, sensitive value) pairs, so a million rows take well under a second.

Definitions follow pycanon 1.3.6 where it is right (k, l, entropy l, t) and the original
papers where it is not: recursive (c,l) uses the counts sorted in *descending* order
(Machanavajjhala et al. 2007); pycanon sorts them ascending. None of these models is
differential privacy: results carry `PrivacyGuarantee.not_private`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd

from privlab.assess.encode import (
    EncodedColumn,
    MissingPolicy,
    combine_codes,
    distinct_tuples,
    encode_table,
    representatives,
)
from privlab.data.io import require_columns
from privlab.errors import InvalidInputError

SensitiveKind = Literal["auto", "numeric", "categorical"]


@dataclass
class Grouping:
    """Equivalence classes of a table on its QIs, with the sensitive attribute's pair counts."""

    qis: list[str]
    n: int
    n_groups: int
    sizes: np.ndarray
    class_codes: list[np.ndarray]  # per QI: the code of each class
    qi_columns: list[EncodedColumn]
    sensitive: EncodedColumn | None = None
    pair_group: np.ndarray | None = None
    pair_value: np.ndarray | None = None
    pair_count: np.ndarray | None = None

    @classmethod
    def build(cls, frame: pd.DataFrame, qis: Sequence[str], sensitive: str | None = None,
              missing: MissingPolicy = "value", weights: Any = None) -> Grouping:
        """Classes from the distinct (QI..., sensitive) tuples: one pass over the rows, then
        every class figure is computed on that small table.

        `weights`: each row of `frame` stands for that many records (a table of group-by
        counts from DuckDB or Spark: `privlab.assess.grouped`), so the records themselves
        never have to reach this process."""
        qis = _check_qis(frame, qis, sensitive)
        cols = list(qis) + ([sensitive] if sensitive else [])
        # classes numbered in value order, whatever the row order (a table of counts from
        # an engine comes back in any order; ties in the details must read the same)
        table = encode_table(frame, cols, missing=missing, min_rows=1, with_counts=False,
                             ordered_categories=True)
        qcols = [table[q] for q in qis]
        used = qcols + ([table[sensitive]] if sensitive else [])
        n = table.n
        if weights is None:
            parts, counts = distinct_tuples([c.codes for c in used], [c.card for c in used])
        else:
            w = _weights(weights, len(frame))
            if table.kept is not None:
                w = w[table.kept]
            # two rows may encode alike (NaN and None are one missing value): merge them
            full, n_full = combine_codes([c.codes for c in used], [c.card for c in used])
            counts = np.bincount(full, weights=w, minlength=n_full)
            counts = np.rint(counts).astype(np.int64)
            rep = representatives(full, n_full)
            parts = [c.codes[rep] for c in used]
            n = int(counts.sum())
        nq = len(qcols)
        group, n_groups = combine_codes(parts[:nq], [c.card for c in qcols])
        sizes = np.bincount(group, weights=counts, minlength=n_groups).astype(np.int64)
        rep = representatives(group, n_groups)
        g = cls(list(qis), n, n_groups, sizes, [p[rep] for p in parts[:nq]], qcols)
        if sensitive:
            order = np.lexsort((parts[nq], group))
            g.sensitive = table[sensitive]
            g.pair_group = group[order]
            g.pair_value = parts[nq][order]
            g.pair_count = counts[order]
        return g

    def row_groups(self) -> np.ndarray:
        """The class of every row (same numbering: lexicographic order of the QI codes)."""
        group, n_groups = combine_codes([c.codes for c in self.qi_columns],
                                        [c.card for c in self.qi_columns])
        assert n_groups == self.n_groups
        return group

    def _need_sensitive(self) -> EncodedColumn:
        if self.sensitive is None:
            raise InvalidInputError("this model needs a sensitive attribute; pass --sensitive")
        return self.sensitive

    # -- per-class figures ---------------------------------------------------------------
    def distinct_sensitive(self) -> np.ndarray:
        self._need_sensitive()
        return np.bincount(self.pair_group, minlength=self.n_groups)

    def entropy(self) -> np.ndarray:
        self._need_sensitive()
        q = self.pair_count / self.sizes[self.pair_group]
        return -np.bincount(self.pair_group, weights=q * np.log(q), minlength=self.n_groups)

    def recursive_ratio(self, l_div: int) -> np.ndarray:
        """Per class r_1 / (r_l + ... + r_m) with r sorted descending (inf if < l values)."""
        self._need_sensitive()
        if l_div < 1:
            raise InvalidInputError(f"l must be >= 1, got {l_div}")
        gi, c = self.pair_group, self.pair_count
        order = np.lexsort((-c, gi))
        gs, cs = gi[order], c[order]
        distinct = np.bincount(gi, minlength=self.n_groups)
        starts = np.concatenate(([0], np.cumsum(distinct)[:-1]))
        rank = np.arange(len(gs)) - starts[gs]
        r1 = cs[rank == 0]
        top_mask = rank < l_div - 1
        top = np.bincount(gs[top_mask], weights=cs[top_mask], minlength=self.n_groups)
        tail = self.sizes - np.rint(top).astype(np.int64)
        with np.errstate(divide="ignore"):
            return np.where(tail > 0, r1 / np.maximum(tail, 1), np.inf)

    def emd(self, kind: SensitiveKind = "auto") -> tuple[np.ndarray, str]:
        """Per-class earth mover's distance to the whole table's sensitive distribution."""
        s = self._need_sensitive()
        resolved = s.kind if kind == "auto" else kind
        if resolved not in ("numeric", "categorical"):
            raise InvalidInputError(f"sensitive kind must be auto, numeric or categorical, got "
                                    f"{kind!r}")
        gi, si, c = self.pair_group, self.pair_value, self.pair_count
        global_counts = np.bincount(si, weights=c, minlength=s.card)  # the pairs cover all rows
        if resolved == "categorical":
            p = global_counts / self.n
            q = c / self.sizes[gi]
            part = np.abs(q - p[si]) - p[si]
            per = np.bincount(gi, weights=part, minlength=self.n_groups)
            return np.maximum(0.5 * (per + float(p.sum())), 0.0), resolved
        return _ordered_emd(gi, si, c, self.sizes, global_counts, self.n), resolved

    def class_values(self) -> pd.DataFrame:
        """The QI values of each class (one row per class, in class order)."""
        data = {}
        for col, codes in zip(self.qi_columns, self.class_codes, strict=True):
            labels = col.label_list()
            data[col.name] = [labels[i] for i in codes]
        return pd.DataFrame(data)


def _weights(weights: Any, n: int) -> np.ndarray:
    w = np.asarray(weights, dtype=np.float64).ravel()
    if len(w) != n or not np.all(np.isfinite(w)) or np.any(w < 1) \
            or not np.all(w == np.rint(w)):
        raise InvalidInputError("weights must give a positive integer count for every row")
    return w


def pair_counts(group: np.ndarray, n_groups: int, values: np.ndarray,
                n_values: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Nonzero (class, value, count) triples sorted by class then value."""
    key = group.astype(np.int64) * n_values + values
    total = n_groups * n_values
    if total <= max(4 * len(group), 1 << 22):
        counts = np.bincount(key, minlength=total)
        nz = np.flatnonzero(counts)
        return nz // n_values, nz % n_values, counts[nz]
    uniq, counts = np.unique(key, return_counts=True)
    return uniq // n_values, uniq % n_values, counts


def _ordered_emd(gi: np.ndarray, si: np.ndarray, c: np.ndarray, sizes: np.ndarray,
                 global_counts: np.ndarray, n: int) -> np.ndarray:
    """Ordered-distance EMD (Li et al. 2007): sum_i |Q_i - P_i| / (m - 1), Q, P the class and
    table CDFs over the m ordered values. Each class CDF is a step function, so the sum over i
    splits into segments of constant Q; within a segment P is monotone, so the |.| splits at one
    point found by binary search, and prefix sums of P finish it: O(pairs log m), no G x m."""
    m = len(global_counts)
    n_groups = len(sizes)
    if m <= 1:
        return np.zeros(n_groups)
    cdf = np.cumsum(global_counts) / n
    prefix = np.concatenate(([0.0], np.cumsum(cdf)))
    cum_int = np.cumsum(c)
    class_end = np.cumsum(np.bincount(gi, minlength=n_groups))
    class_start = class_end - np.bincount(gi, minlength=n_groups)
    before = np.where(class_start[gi] > 0, cum_int[np.maximum(class_start[gi] - 1, 0)], 0)
    q = (cum_int - before) / sizes[gi]
    is_last = np.ones(len(gi), dtype=bool)
    is_last[:-1] = gi[1:] != gi[:-1]
    a = si
    b = np.where(is_last, m, np.roll(si, -1))
    cut = np.clip(np.searchsorted(cdf, q, side="right"), a, b)
    seg = (q * (cut - a) - (prefix[cut] - prefix[a])
           + (prefix[b] - prefix[cut]) - q * (b - cut))
    total = np.bincount(gi, weights=seg, minlength=n_groups)
    first_value = si[class_start]
    total += prefix[first_value]
    return np.maximum(total, 0.0) / (m - 1)


def _check_qis(frame: pd.DataFrame, qis: Sequence[str], sensitive: str | None) -> list[str]:
    qis = [str(q) for q in qis]
    if not qis:
        raise InvalidInputError("--quasi-identifiers needs at least one column")
    dupes = sorted({q for q in qis if qis.count(q) > 1})
    if dupes:
        raise InvalidInputError(f"quasi-identifier listed twice: {', '.join(dupes)}")
    require_columns(frame, qis, "quasi-identifier")
    if sensitive is not None:
        require_columns(frame, [sensitive], "sensitive attribute")
        if sensitive in qis:
            raise InvalidInputError(f"sensitive attribute {sensitive!r} is also a "
                                    "quasi-identifier; choose one role for it")
    if len(frame) == 0:
        raise InvalidInputError("the table has no rows")
    return qis


# -- one-number functions (pycanon-style names) ---------------------------------------------
def k_anonymity(frame: pd.DataFrame, qis: Sequence[str], missing: MissingPolicy = "value") -> int:
    """k: the size of the smallest equivalence class on the QIs."""
    qis = _check_qis(frame, qis, None)
    table = encode_table(frame, qis, missing=missing, min_rows=1, with_counts=False)
    _, counts = distinct_tuples([table[q].codes for q in qis], [table[q].card for q in qis])
    return int(counts.min())


def l_diversity(frame: pd.DataFrame, qis: Sequence[str], sensitive: str,
                missing: MissingPolicy = "value") -> int:
    """Distinct l: the fewest distinct sensitive values in any class."""
    return int(Grouping.build(frame, qis, sensitive, missing).distinct_sensitive().min())


def entropy_l_diversity(frame: pd.DataFrame, qis: Sequence[str], sensitive: str,
                        missing: MissingPolicy = "value") -> float:
    """Entropy l: exp(min over classes of the sensitive attribute's entropy), a real number."""
    return float(math.exp(Grouping.build(frame, qis, sensitive, missing).entropy().min()))


def recursive_cl_diversity(frame: pd.DataFrame, qis: Sequence[str], sensitive: str,
                           l_div: int | None = None,
                           missing: MissingPolicy = "value") -> tuple[float, int]:
    """(c, l): the table is recursive (c,l)-diverse for every c > the returned c (inf: never).

    `l_div` defaults to the distinct l of the table (as pycanon does)."""
    g = Grouping.build(frame, qis, sensitive, missing)
    l_div = int(g.distinct_sensitive().min()) if l_div is None else int(l_div)
    return float(g.recursive_ratio(l_div).max()), l_div


def t_closeness(frame: pd.DataFrame, qis: Sequence[str], sensitive: str,
                kind: SensitiveKind = "auto", missing: MissingPolicy = "value") -> float:
    """t: the largest EMD between a class's sensitive distribution and the table's."""
    emd, _ = Grouping.build(frame, qis, sensitive, missing).emd(kind)
    return float(emd.max())


# -- delta-presence and risk ----------------------------------------------------------------
@dataclass
class PopulationCounts:
    """Each sample class's count in the population table (same QI representation)."""

    population_rows: int
    sample_counts: np.ndarray  # f_j per joint class
    population_counts: np.ndarray  # F_j per joint class
    sample_group: np.ndarray  # sample row -> joint class


def population_counts(frame: pd.DataFrame, population: pd.DataFrame,
                      qis: Sequence[str], weights: Any = None,
                      population_weights: Any = None) -> PopulationCounts:
    """Join sample and population on exact QI values (both must use the same generalization).
    `weights` / `population_weights`: records per row (group-by counts), as in `Grouping`."""
    require_columns(population, list(qis), "population column")
    if len(population) == 0:
        raise InvalidInputError("the population table has no rows")
    both = pd.concat([frame[list(qis)].reset_index(drop=True),
                      population[list(qis)].reset_index(drop=True)], ignore_index=True)
    for q in qis:
        if frame[q].dtype != population[q].dtype:
            both[q] = both[q].astype(str).where(both[q].notna(), None)
    table = encode_table(both, list(qis), missing="value", min_rows=1)
    group, n_groups = combine_codes([table[q].codes for q in qis],
                                    [table[q].card for q in qis])
    n = len(frame)
    ws = None if weights is None else _weights(weights, n)
    wp = None if population_weights is None else _weights(population_weights, len(population))
    f = np.rint(np.bincount(group[:n], weights=ws, minlength=n_groups)).astype(np.int64)
    big_f = np.rint(np.bincount(group[n:], weights=wp, minlength=n_groups)).astype(np.int64)
    bad = np.flatnonzero(f > big_f)
    if len(bad):
        raise InvalidInputError(
            f"the sample is not a subset of the population: {int(f[bad[0]])} sample record(s) "
            f"but {int(big_f[bad[0]])} population record(s) share one QI combination; pass the "
            "population the sample was drawn from, generalized the same way")
    pop_rows = len(population) if wp is None else int(wp.sum())
    return PopulationCounts(pop_rows, f, big_f, group[:n])


@dataclass
class DeltaPresence:
    delta_min: float
    delta_max: float
    population_rows: int
    sample_rows: int
    classes: int

    def to_dict(self) -> dict[str, Any]:
        return {"delta_min": self.delta_min, "delta_max": self.delta_max,
                "population_rows": self.population_rows, "sample_rows": self.sample_rows,
                "population_classes": self.classes,
                "meaning": "for every population record, P(record is in the released table) "
                           "lies in [delta_min, delta_max] (Nergiz et al. 2007)"}


def delta_presence(frame: pd.DataFrame, population: pd.DataFrame,
                   qis: Sequence[str], weights: Any = None,
                   population_weights: Any = None) -> DeltaPresence:
    """(delta_min, delta_max)-presence of the sample `frame` within `population`."""
    _check_qis(frame, qis, None)
    pc = population_counts(frame, population, qis, weights, population_weights)
    mask = pc.population_counts > 0
    ratio = pc.sample_counts[mask] / pc.population_counts[mask]
    rows = len(frame) if weights is None else int(pc.sample_counts.sum())
    return DeltaPresence(float(ratio.min()), float(ratio.max()), pc.population_rows, rows,
                         int(mask.sum()))


def _risk_block(f: np.ndarray, big_f: np.ndarray, n: int, threshold: float) -> dict[str, Any]:
    risk = 1.0 / big_f
    return {
        "highest": float(risk.max()),
        "average": float((f * risk).sum() / n),
        "records_at_highest_risk": float(f[risk == risk.max()].sum() / n),
        "records_above_threshold": float(f[risk > threshold].sum() / n),
    }


def reidentification_risk(frame: pd.DataFrame, qis: Sequence[str],
                          population: pd.DataFrame | None = None, threshold: float = 0.2,
                          missing: MissingPolicy = "value") -> dict[str, Any]:
    """Prosecutor, journalist and marketer risk (El Emam's definitions, as ARX reports them)."""
    g = Grouping.build(frame, qis, missing=missing)
    pc = population_counts(frame, population, qis) if population is not None else None
    return _risk(g, pc, threshold)


def _risk(g: Grouping, pc: PopulationCounts | None, threshold: float) -> dict[str, Any]:
    if not 0 < threshold <= 1:
        raise InvalidInputError(f"risk threshold must be in (0, 1], got {threshold}")
    f = g.sizes
    out: dict[str, Any] = {
        "threshold": threshold,
        "prosecutor": _risk_block(f, f, g.n, threshold),
        "unique_share": float((f == 1).sum() / g.n),
        "classes": int(g.n_groups),
    }
    if pc is None:
        out["journalist"] = dict(out["prosecutor"],
                                 note="no population table: bounded by the prosecutor risk "
                                      "(the sample treated as the population)")
        out["marketer"] = {"average": float(g.n_groups / g.n),
                           "note": "no population table: classes / records"}
    else:
        fs, fp = pc.sample_counts, pc.population_counts
        present = fs > 0
        out["journalist"] = _risk_block(fs[present], fp[present], g.n, threshold)
        out["marketer"] = {"average": float((fs[present] / fp[present]).sum() / g.n)}
        out["population_unique_share"] = float(fs[present & (fp == 1)].sum() / g.n)
    out["meaning"] = {
        "prosecutor": "the attacker knows the target is in the table: risk 1/|class|",
        "journalist": "the attacker does not know: risk 1/|population class|",
        "marketer": "expected share of records re-identified by linking every record",
    }
    return out


# -- everything at once ---------------------------------------------------------------------
@dataclass
class PrivacyModelReport:
    """All models on one QI set (and sensitive attribute), with per-class details."""

    qis: list[str]
    sensitive: str | None
    n: int
    k: int
    classes: int
    details: pd.DataFrame
    l_distinct: int | None = None
    entropy_l: float | None = None
    recursive_l: int | None = None
    recursive_c: float | None = None
    t: float | None = None
    t_distance: str | None = None
    delta: DeltaPresence | None = None
    risk: dict[str, Any] = field(default_factory=dict)
    detail_rows: int = 20

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "quasi_identifiers": self.qis,
            "sensitive": self.sensitive,
            "rows": self.n,
            "classes": self.classes,
            "k_anonymity": {"k": self.k},
            "reidentification_risk": self.risk,
        }
        if self.sensitive is not None:
            out["l_diversity"] = {
                "distinct_l": self.l_distinct,
                "entropy_l": self.entropy_l,
                "recursive": {"l": self.recursive_l, "c": self.recursive_c,
                              "meaning": "recursive (c,l)-diverse for every c greater than this"},
            }
            out["t_closeness"] = {"t": self.t, "distance": self.t_distance}
        if self.delta is not None:
            out["delta_presence"] = self.delta.to_dict()
        worst = self.details.head(self.detail_rows)
        out["class_details"] = {
            "shown": len(worst),
            "order": "smallest classes first, then largest t",
            "rows": _records(worst),
        }
        return out


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    recs = []
    for row in frame.to_dict(orient="records"):
        recs.append({k: (v.item() if isinstance(v, np.generic) else v) for k, v in row.items()})
    return recs


def evaluate_privacy(frame: pd.DataFrame, qis: Sequence[str], sensitive: str | None = None, *,
                     population: pd.DataFrame | None = None,
                     sensitive_kind: SensitiveKind = "auto", recursive_l: int | None = None,
                     risk_threshold: float = 0.2, missing: MissingPolicy = "value",
                     detail_rows: int = 20, weights: Any = None,
                     population_weights: Any = None) -> PrivacyModelReport:
    """k, l (three kinds), t, delta-presence and re-identification risk in one pass.
    `weights` / `population_weights`: records per row when the frames hold group-by counts."""
    if missing == "drop":
        used = list(qis) + ([sensitive] if sensitive else [])
        require_columns(frame, used, "column")
        complete = frame[used].notna().all(axis=1).to_numpy()
        if weights is not None:
            weights = _weights(weights, len(frame))[complete]
        frame = frame[complete].reset_index(drop=True)
        if len(frame) == 0:
            raise InvalidInputError("no row is complete on the quasi-identifiers and sensitive "
                                    "attribute; count missing as a value instead")
    g = Grouping.build(frame, qis, sensitive, "value", weights=weights)
    details = g.class_values()
    details["size"] = g.sizes
    details["prosecutor_risk"] = 1.0 / g.sizes
    report = PrivacyModelReport(list(g.qis), sensitive, g.n, int(g.sizes.min()),
                                int(g.n_groups), details, detail_rows=detail_rows)
    sort_cols = ["size"]
    ascending = [True]
    if sensitive is not None:
        distinct = g.distinct_sensitive()
        entropy = g.entropy()
        report.l_distinct = int(distinct.min())
        report.entropy_l = float(math.exp(entropy.min()))
        report.recursive_l = report.l_distinct if recursive_l is None else int(recursive_l)
        ratio = g.recursive_ratio(report.recursive_l)
        report.recursive_c = float(ratio.max())
        emd, kind = g.emd(sensitive_kind)
        report.t, report.t_distance = float(emd.max()), (
            "ordered distance (numeric)" if kind == "numeric" else "equal distance (categorical)")
        details["distinct_sensitive"] = distinct
        details["entropy_l"] = np.exp(entropy)
        details["recursive_c"] = ratio
        details["t"] = emd
        sort_cols.append("t")
        ascending.append(False)
    pc = None
    if population is not None:
        pc = population_counts(frame, population, g.qis, weights, population_weights)
        report.delta = delta_presence(frame, population, g.qis, weights, population_weights)
        # population size of each sample class (classes of g map 1:1 to the joint classes)
        joint_of_class = np.empty(g.n_groups, dtype=np.int64)
        joint_of_class[g.row_groups()] = pc.sample_group
        details["population_size"] = pc.population_counts[joint_of_class]
        details["delta"] = g.sizes / details["population_size"].to_numpy()
    report.risk = _risk(g, pc, risk_threshold)
    report.details = details.sort_values(sort_cols, ascending=ascending, kind="stable")
    return report
