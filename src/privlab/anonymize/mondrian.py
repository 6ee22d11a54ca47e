"""Mondrian multidimensional k-anonymity (LeFevre, DeWitt, Ramakrishnan, ICDE 2006).

Strict top-down partitioning: a partition is split on the quasi-identifier with the widest
normalized range, at the cut closest to the median that leaves both halves with at least k
records (and, when asked, at least l distinct sensitive values); when no dimension allows a
cut the partition becomes an equivalence class. Values are coded in sorted order, so numbers
split by value and categories by label order. Each class is then published as ranges `[lo, hi]`
(numbers) or sets `{a, b}` (categories).

With a declared schema (`schema=`), the rows are conformed to it first, its identifier and
text columns are dropped from the output (and refused as a quasi-identifier or sensitive
attribute), and numeric generalisation is cut over the declared domain instead of the data:
the root of every declared integer / numeric QI is its declared `[LO, HI]`, each split divides
the parent's region, and a class publishes its region. The classes of a QI then tile the
declared range (an integer column as `[17, 34]`, `[35, 90]`; a numeric one as `[0, 2.5]`,
`(2.5, 10]`), so the published table does not reveal the data's min or max. A categorical QI is
coded over its declared categories and a class publishes the categories it holds (publishing
its whole region would list every declared category for a class never split on that QI: on
Adult, 41 countries for 8,585 records that are nearly all United-States); its NCP is
normalised by the declared category count. NCP of a numeric QI is normalised by the declared
range. A datetime QI is cut like a numeric one over its declared bounds and published as
ISO times (`[2020-01-01, 2020-03-14]`, `(2020-03-14, 2021-01-01]`).

Rows whose numeric QIs are missing are partitioned in their own block (the missing QIs stay
`<missing>`); a block too small to reach k (or l) is suppressed (its rows are left out). The
output is checked with `privlab.assess` before it is returned: a result that misses k or l is
a bug and raises.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from privlab.assess.encode import MISSING_LABEL, EncodedColumn, encode_column
from privlab.assess.models import evaluate_privacy, pair_counts
from privlab.core.guarantee import PrivacyGuarantee
from privlab.data.io import require_columns
from privlab.errors import InvalidInputError, PrivlabError
from privlab.schema.model import OTHER, Schema

NOT_DP_REASON = ("k-anonymity and l-diversity are syntactic models: they limit linkage on the "
                 "chosen quasi-identifiers but give no bound against background knowledge or "
                 "composition")


@dataclass
class _Dim:
    """One QI prepared for partitioning."""

    name: str
    col: EncodedColumn
    numeric: bool
    values: np.ndarray  # numeric value of each code (numeric dims)
    global_span: float  # numeric: max - min; categorical: distinct - 1 (declared: domain's)
    #: with a schema, numeric and datetime QIs: the root region (declared [LO, HI]); None:
    #: the class publishes the values it holds
    root: tuple[float, float] | None = None
    integer: bool = False
    datetime: bool = False  # values are seconds since the epoch; published as ISO times


@dataclass
class AnonymizationResult:
    """The anonymized table and what it cost."""

    frame: pd.DataFrame
    quasi_identifiers: list[str]
    k: int
    l_div: int | None
    sensitive: str | None
    rows_in: int
    suppressed: int
    classes: int
    ncp: float
    ncp_by_attribute: dict[str, float]
    discernibility: int
    avg_class_size_ratio: float
    achieved: dict[str, Any]
    class_table: pd.DataFrame
    warnings: list[str] = field(default_factory=list)
    guarantee: PrivacyGuarantee = field(default_factory=lambda: PrivacyGuarantee.not_private(
        "mondrian", NOT_DP_REASON))
    #: with a declared schema: its name, fingerprint, policy, rows and dropped identifiers
    schema: dict[str, Any] | None = None

    @property
    def rows_out(self) -> int:
        return len(self.frame)

    def to_dict(self, class_rows: int = 20) -> dict[str, Any]:
        return {
            "method": "Mondrian multidimensional partitioning (LeFevre et al. 2006)",
            "quasi_identifiers": self.quasi_identifiers,
            "sensitive": self.sensitive,
            "requested": {"k": self.k, "l": self.l_div},
            "achieved": self.achieved,
            "rows_in": self.rows_in,
            "rows_out": self.rows_out,
            "suppressed": self.suppressed,
            "classes": self.classes,
            "information_loss": {
                "ncp": self.ncp,
                "ncp_by_attribute": self.ncp_by_attribute,
                "discernibility": self.discernibility,
                "avg_class_size_ratio": self.avg_class_size_ratio,
                "meaning": "ncp: mean normalized certainty penalty over records and QIs (0 = "
                           "exact, 1 = fully generalized; suppressed records count 1); "
                           "discernibility: sum of squared class sizes + suppressed x rows; "
                           "avg_class_size_ratio: (records / classes) / k (1 is ideal)",
            },
            "classes_preview": [
                {k: (v.item() if isinstance(v, np.generic) else v) for k, v in r.items()}
                for r in self.class_table.head(class_rows).to_dict(orient="records")],
            "warnings": self.warnings,
            "guarantee": self.guarantee.to_dict(),
            **({"schema": self.schema} if self.schema is not None else {}),
        }


def _declared_categorical(series: pd.Series, name: str, domain: list[str],
                          with_missing: bool) -> EncodedColumn:
    """Codes over the declared categories (sorted, as encode_column orders labels): the span
    (NCP) is the declared domain's, not the count of values the rows happen to hold."""
    codes = pd.Categorical(series, categories=domain).codes.astype(np.int64)
    labels: list[Any] = list(domain)
    missing_code = None
    if with_missing or (codes < 0).any():
        missing_code = len(domain)
        codes = np.where(codes < 0, missing_code, codes)
        labels.append(None)
    return EncodedColumn(name=name, codes=codes, labels=np.asarray(labels, dtype=object),
                         kind="categorical", n_missing=int((codes == missing_code).sum()),
                         missing_code=missing_code,
                         value_counts=np.bincount(codes, minlength=len(labels)))


def _prepare(frame: pd.DataFrame, qis: Sequence[str],
             schema: Schema | None = None) -> list[_Dim]:
    dims = []
    for q in qis:
        decl = schema.column(q) if schema is not None else None
        if decl is not None and decl.type == "categorical":
            domain = sorted([*decl.categories, *([OTHER] if decl.other else [])])
            col = _declared_categorical(frame[q], q, domain, decl.missing)
            dims.append(_Dim(q, col, False, np.arange(col.card, dtype=float),
                             float(col.card - 1)))
            continue
        if decl is not None and decl.type == "datetime":
            col, _ = encode_column(_epoch_seconds(frame[q]), q)
            lo, hi = (_epoch_seconds(pd.Series([b])).iloc[0]
                      for b in decl.bounds)  # type: ignore[union-attr]
            vals = np.asarray([np.nan if v is None else v for v in col.labels], dtype=float)
            dims.append(_Dim(q, col, True, vals, hi - lo, root=(lo, hi), datetime=True))
            continue
        col, _ = encode_column(frame[q], q)
        if decl is not None and decl.is_numeric and col.kind == "numeric":
            lo, hi = (float(b) for b in decl.bounds)  # type: ignore[union-attr]
            vals = np.asarray([np.nan if v is None else v for v in col.labels], dtype=float)
            dims.append(_Dim(q, col, True, vals, hi - lo, root=(lo, hi),
                             integer=decl.type == "integer"))
            continue
        numeric = col.kind == "numeric"
        if numeric:
            vals = np.asarray([np.nan if v is None else v for v in col.labels], dtype=float)
            present = vals[~np.isnan(vals)]
            span = float(present.max() - present.min()) if len(present) else 0.0
        else:
            vals = np.arange(col.card, dtype=float)
            span = float(col.card - 1)
        dims.append(_Dim(q, col, numeric, vals, span))
    return dims


class _Partitioner:
    def __init__(self, dims: list[_Dim], active: list[int], k: int, l_div: int | None,
                 sa_codes: np.ndarray | None, sa_card: int) -> None:
        self.dims, self.active, self.k, self.l_div = dims, active, k, l_div
        self.sa, self.sa_card = sa_codes, sa_card

    def _l_ok(self, idx: np.ndarray) -> bool:
        if self.l_div is None:
            return True
        return len(np.unique(self.sa[idx])) >= self.l_div

    def spread(self, d: _Dim, v: np.ndarray) -> float:
        if d.global_span <= 0:
            return 0.0
        lo, hi = int(v.min()), int(v.max())
        if d.numeric:
            return float(d.values[hi] - d.values[lo]) / d.global_span
        return float(np.count_nonzero(np.bincount(v - lo)) - 1) / d.global_span

    def cut(self, v: np.ndarray, idx: np.ndarray) -> int | None:
        """Code c such that left = v <= c; the allowable cut nearest the median, or None."""
        n, k = len(v), self.k
        lo = int(v.min())
        counts = np.bincount(v - lo)
        left = np.cumsum(counts)[:-1]  # left size when cutting after code lo + j
        ok = (left >= k) & (n - left >= k)
        if self.l_div is not None:
            s = self.sa[idx]
            minv = np.full(self.sa_card, np.iinfo(np.int64).max)
            maxv = np.full(self.sa_card, -1)
            np.minimum.at(minv, s, v - lo)
            np.maximum.at(maxv, s, v - lo)
            seen = maxv >= 0
            span = len(counts)
            first = np.cumsum(np.bincount(minv[seen], minlength=span))[:-1]
            last = np.cumsum(np.bincount(maxv[seen], minlength=span))[:-1]
            left_distinct = first
            right_distinct = int(seen.sum()) - last
            ok &= (left_distinct >= self.l_div) & (right_distinct >= self.l_div)
        cand = np.flatnonzero(ok)
        if len(cand) == 0:
            return None
        best = cand[np.argmin(np.abs(left[cand] - n / 2))]
        return lo + int(best)

    def _split_region(self, region: dict[int, tuple[float, float, bool]], j: int,
                      c: int) -> tuple[dict, dict]:
        """The two halves of a declared numeric region when dim j is cut after code c: left
        `[lo, x]`, right `[x + 1, hi]` (integers) or `(x, hi]`, x the cut's value."""
        d = self.dims[j]
        if j not in region:
            return region, region
        lo, hi, lo_open = region[j]
        x = float(d.values[c])
        left, right = (lo, x, lo_open), ((x + 1, hi, False) if d.integer else (x, hi, True))
        return {**region, j: left}, {**region, j: right}

    def run_regions(self, rows: np.ndarray) -> list[tuple[np.ndarray, dict]]:
        """Leaves and, for the declared dims, the region each leaf covers: {dim: (lo, hi,
        lo_open)}, the root being the declared range (empty without a schema)."""
        leaves = []
        root = {j: (d.root[0], d.root[1], False) for j, d in enumerate(self.dims)
                if d.root is not None}
        stack: list[tuple[np.ndarray, dict]] = [(rows, root)]
        k = self.k
        while stack:
            idx, region = stack.pop()
            split = None
            if len(idx) >= 2 * k:
                order = []
                for j in self.active:
                    d = self.dims[j]
                    v = d.col.codes[idx]
                    sp = self.spread(d, v)
                    if sp > 0:
                        order.append((-sp, j, v))
                order.sort(key=lambda t: (t[0], t[1]))
                for _, j, v in order:
                    c = self.cut(v, idx)
                    if c is not None:
                        mask = v <= c
                        left, right = self._split_region(region, j, c)
                        split = ((idx[mask], left), (idx[~mask], right))
                        break
            if split is None:
                leaves.append((idx, region))
            else:
                stack.extend(split)
        return leaves


def _generalize(d: _Dim, cid: np.ndarray, codes: np.ndarray,
                n_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """Per class: the published text (range or set) and its normalized certainty penalty."""
    gi, ci, _ = pair_counts(cid, n_classes, codes, d.col.card)
    distinct = np.bincount(gi, minlength=n_classes)
    end = np.cumsum(distinct)
    start = end - distinct
    lo, hi = ci[start], ci[end - 1]
    texts = np.empty(n_classes, dtype=object)
    if d.numeric:
        a, b = d.values[lo], d.values[hi]
        for c in range(n_classes):
            texts[c] = (_fmt_num(a[c]) if lo[c] == hi[c]
                        else f"[{_fmt_num(a[c])}, {_fmt_num(b[c])}]")
        loss = (b - a) / d.global_span if d.global_span > 0 else np.zeros(n_classes)
    else:
        names = [str(x) for x in d.col.label_list()]
        for c in range(n_classes):
            members = [names[x] for x in ci[start[c]:end[c]]]
            texts[c] = members[0] if len(members) == 1 else "{" + ", ".join(members) + "}"
        loss = ((distinct - 1) / d.global_span if d.global_span > 0
                else np.zeros(n_classes))
    return texts, np.asarray(loss, dtype=float)


def _epoch_seconds(series: pd.Series) -> pd.Series:
    """Datetimes as float seconds since the epoch (exact for whole seconds; NaT -> NaN)."""
    values = pd.to_datetime(series).astype("datetime64[ns]")
    out = values.to_numpy(dtype="datetime64[ns]").astype(np.int64) // 1_000_000_000
    return pd.Series(np.where(values.isna().to_numpy(), np.nan, out.astype(float)),
                     index=series.index, name=series.name)


def _fmt_time(x: float) -> str:
    stamp = pd.Timestamp(int(x), unit="s")
    return stamp.date().isoformat() if stamp == stamp.normalize() else stamp.isoformat()


def _generalize_declared(d: _Dim, regions: list[tuple[float, float, bool]]
                         ) -> tuple[np.ndarray, np.ndarray]:
    """Per class: its declared numeric region as an interval and its NCP."""
    texts = np.empty(len(regions), dtype=object)
    loss = np.zeros(len(regions))
    fmt = _fmt_time if d.datetime else _fmt_num
    for c, (lo, hi, lo_open) in enumerate(regions):
        texts[c] = fmt(lo) if lo == hi else f"{'(' if lo_open else '['}{fmt(lo)}, {fmt(hi)}]"
        loss[c] = (hi - lo) / d.global_span if d.global_span > 0 else 0.0
    return texts, loss


def _fmt_num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def mondrian(frame: pd.DataFrame, quasi_identifiers: Sequence[str], k: int,
             l_div: int | None = None, sensitive: str | None = None,
             drop: Sequence[str] = (), schema: Schema | None = None,
             on_invalid: str = "refuse") -> AnonymizationResult:
    """Anonymize `frame` to k-anonymity (and distinct l-diversity when `l_div` is given).

    With a declared `schema`: conform the rows (`on_invalid`), drop its identifier / text
    columns, and cut the generalisation over the declared domain (module docstring)."""
    qis = [str(q) for q in quasi_identifiers]
    if not qis:
        raise InvalidInputError("--quasi-identifiers needs at least one column")
    require_columns(frame, qis, "quasi-identifier")
    if len(set(qis)) != len(qis):
        raise InvalidInputError("a quasi-identifier is listed twice")
    if isinstance(k, bool) or int(k) != k or k < 2:
        raise InvalidInputError(f"--k must be an integer >= 2, got {k}")
    k = int(k)
    if l_div is not None:
        if isinstance(l_div, bool) or int(l_div) != l_div or l_div < 1:
            raise InvalidInputError(f"--l must be an integer >= 1, got {l_div}")
        l_div = int(l_div)
        if sensitive is None:
            raise InvalidInputError("--l needs --sensitive (the attribute that must be diverse)")
    if sensitive is not None:
        require_columns(frame, [sensitive], "sensitive attribute")
        if sensitive in qis:
            raise InvalidInputError(f"{sensitive!r} is both a quasi-identifier and the sensitive "
                                    "attribute; choose one role")
    require_columns(frame, list(drop), "column to drop")
    schema_info = None
    if schema is not None:
        frame, drop, schema_info = _apply_schema(frame, schema, on_invalid, qis, sensitive,
                                                 list(drop))
    n = len(frame)
    if n < k:
        raise InvalidInputError(f"the table has {n} rows, fewer than k = {k}: nothing can be "
                                "released")
    frame = frame.reset_index(drop=True)
    dims = _prepare(frame, qis, schema)
    sa_codes, sa_card = None, 0
    if sensitive is not None:
        sa_col, _ = encode_column(frame[sensitive], sensitive)
        sa_codes, sa_card = sa_col.codes, sa_col.card
        if l_div is not None and sa_card < l_div:
            raise InvalidInputError(f"{sensitive!r} has {sa_card} distinct value(s): "
                                    f"l = {l_div} is impossible; lower --l")
    # blocks by the missing-pattern of numeric QIs
    numeric_missing = np.column_stack(
        [d.col.codes == d.col.missing_code if (d.numeric and d.col.missing_code is not None)
         else np.zeros(n, dtype=bool) for d in dims])
    pattern_key = numeric_missing.astype(np.int64) @ (1 << np.arange(len(dims), dtype=np.int64))
    warnings: list[str] = []
    leaves: list[tuple[np.ndarray, list[int]]] = []
    regions: list[dict] = []
    suppressed_rows: list[np.ndarray] = []
    for key in np.unique(pattern_key):
        rows = np.flatnonzero(pattern_key == key)
        active = [j for j in range(len(dims)) if not (int(key) >> j) & 1]
        part = _Partitioner(dims, active, k, l_div, sa_codes, sa_card)
        if len(rows) < k or not part._l_ok(rows):
            suppressed_rows.append(rows)
            continue
        for leaf, region in part.run_regions(rows):
            leaves.append((leaf, active))
            regions.append(region)
    suppressed = int(sum(len(r) for r in suppressed_rows))
    if suppressed:
        warnings.append(f"suppressed {suppressed} record(s) whose missing numeric "
                        "quasi-identifiers leave a group smaller than k (or not l-diverse)")
    if not leaves:
        raise InvalidInputError("no group of records can reach the requested k / l; lower them")
    class_id = np.full(n, -1, dtype=np.int64)
    inactive = np.zeros((len(leaves), len(dims)), dtype=bool)
    for cid, (idx, active) in enumerate(leaves):
        class_id[idx] = cid
        inactive[cid] = [j not in active for j in range(len(dims))]
    kept = np.flatnonzero(class_id >= 0)
    cid_kept = class_id[kept]
    n_classes = len(leaves)
    sizes = np.bincount(cid_kept, minlength=n_classes)
    class_records: dict[str, Any] = {"class": np.arange(n_classes), "size": sizes}
    out_cols: dict[str, np.ndarray] = {}
    ncp = {d.name: np.zeros(n) for d in dims}
    for j, d in enumerate(dims):
        if d.root is not None:
            texts, loss = _generalize_declared(d, [r.get(j, (*d.root, False)) for r in regions])
        else:
            texts, loss = _generalize(d, cid_kept, d.col.codes[kept], n_classes)
        texts[inactive[:, j]] = MISSING_LABEL
        loss[inactive[:, j]] = 0.0
        col = np.empty(n, dtype=object)
        col[kept] = texts[cid_kept]
        out_cols[d.name] = col
        ncp[d.name][kept] = loss[cid_kept]
        class_records[d.name] = texts
    for rows in suppressed_rows:
        for d in dims:
            ncp[d.name][rows] = 1.0
    out = frame.copy()
    for d in dims:
        out[d.name] = pd.Series(out_cols[d.name], dtype=object)
    out = out.iloc[kept].drop(columns=list(drop)).reset_index(drop=True)
    ncp_by = {name: float(arr.mean()) for name, arr in ncp.items()}
    total_ncp = float(np.mean([arr.mean() for arr in ncp.values()]))
    result = AnonymizationResult(
        frame=out, quasi_identifiers=qis, k=k, l_div=l_div, sensitive=sensitive, rows_in=n,
        suppressed=suppressed, classes=len(leaves), ncp=total_ncp, ncp_by_attribute=ncp_by,
        discernibility=int((sizes.astype(np.int64) ** 2).sum() + suppressed * n),
        avg_class_size_ratio=float(len(kept) / len(leaves) / k), achieved={},
        class_table=pd.DataFrame(class_records).sort_values("size", kind="stable"),
        warnings=warnings, schema=schema_info)
    result.achieved = verify(result)
    return result


def verify(result: AnonymizationResult) -> dict[str, Any]:
    """Re-measure k (and l) on the published table with the assess checker; raise if missed."""
    check = evaluate_privacy(result.frame, result.quasi_identifiers,
                             result.sensitive if result.l_div is not None else None)
    achieved: dict[str, Any] = {"k": check.k, "classes": check.classes}
    if check.k < result.k:
        raise PrivlabError(f"internal error: Mondrian output is only {check.k}-anonymous "
                           f"(asked {result.k}); please report it")
    if result.l_div is not None:
        achieved["l"] = check.l_distinct
        if check.l_distinct < result.l_div:
            raise PrivlabError(f"internal error: Mondrian output is only {check.l_distinct}-"
                               f"diverse (asked {result.l_div}); please report it")
    return achieved


def _apply_schema(frame: pd.DataFrame, schema: Schema, on_invalid: str, qis: list[str],
                  sensitive: str | None, drop: list[str]
                  ) -> tuple[pd.DataFrame, list[str], dict[str, Any]]:
    """Conform the rows, refuse a direct identifier in a role, drop identifier / text."""
    from privlab.assess.declared import (
        conform_rows,
        direct_identifiers,
        refuse_direct,
        schema_summary,
    )
    from privlab.schema.conform import check_policy

    policy = check_policy(on_invalid)
    what = "anonymize drops it from the output"
    refuse_direct(schema, qis, "--quasi-identifiers", what)
    refuse_direct(schema, [sensitive] if sensitive is not None else None, "--sensitive", what)
    rows_read = len(frame)
    out = conform_rows(frame, schema, policy)
    direct = direct_identifiers(schema, [str(c) for c in out.columns])
    dropped = drop + [d["name"] for d in direct if d["name"] not in drop]
    info = schema_summary(schema, policy, rows_read, len(out), direct)
    info["dropped"] = dropped
    info["generalisation"] = ("integer / numeric / datetime QIs: regions cut over their "
                              "declared bounds; categorical QIs: the categories a class holds, "
                              "NCP over the declared categories")
    return out, dropped, info
