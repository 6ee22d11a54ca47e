"""Exact marginal counts of the encoded table, computed by DuckDB.

AIM scores every candidate marginal against the real data each round, so it needs the exact
counts of hundreds of marginals (all 2- and 3-way ones on Adult: 560). They are computed
once, in the project's SQL engine (DuckDB), with GROUPING SETS: one scan of the table per
batch of marginals instead of one pass per marginal. The counts are private: they only leave
through the exponential mechanism (scores) and the Gaussian measurements in `privlab.synth.aim`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np
import pandas as pd

from privlab.utils.closing import Closing

#: Marginals per GROUPING SETS query (each query is one scan of the table).
BATCH = 64


class DuckDBMarginals(Closing):
    """Exact counts of marginals of an (n, d) integer code matrix, via DuckDB (an in-memory
    database: `close()` it, or use `with`)."""

    def __init__(self, codes: np.ndarray, sizes: Sequence[int]) -> None:
        from privlab.utils.duck import connect

        self.sizes = list(sizes)
        self.d = codes.shape[1]
        self._con = connect(":memory:", config={"threads": 1})  # no progress bar
        self._hold(self._con.close, "DuckDBMarginals")
        frame = pd.DataFrame({f"c{j}": codes[:, j].astype(np.int32) for j in range(self.d)})
        self._con.register("codes", frame)
        self.queries = 0

    def counts(self, cliques: Sequence[tuple[int, ...]]) -> dict[tuple[int, ...], np.ndarray]:
        """Dense count arrays (axes in clique order) for every clique."""
        out: dict[tuple[int, ...], np.ndarray] = {}
        todo = list(dict.fromkeys(tuple(c) for c in cliques))
        cols = [f"c{j}" for j in range(self.d)]
        for s in range(0, len(todo), BATCH):
            batch = todo[s:s + BATCH]
            sets = ", ".join("(" + ", ".join(cols[a] for a in cl) + ")" for cl in batch)
            used = sorted({a for cl in batch for a in cl})
            grouping = ", ".join(cols[a] for a in used)
            sql = (f"SELECT {grouping}, GROUPING({grouping}) AS g, COUNT(*) AS n "
                   f"FROM codes GROUP BY GROUPING SETS ({sets})")
            res = self._con.execute(sql).df()
            self.queries += 1
            g = res["g"].to_numpy()
            # GROUPING(): bit set (first argument = most significant) when NOT grouped
            for cl in batch:
                mask = sum(1 << (len(used) - 1 - used.index(a)) for a in used if a not in cl)
                rows = res[g == mask]
                arr = np.zeros([self.sizes[a] for a in cl], dtype=np.float64)
                if len(rows):
                    idx = tuple(rows[cols[a]].to_numpy(dtype=np.int64) for a in cl)
                    arr[idx] = rows["n"].to_numpy(dtype=np.float64)
                out[cl] = arr
        return out


class MarginalSource(Protocol):
    """What AIM asks of the exact marginals (`AIMSynthesizer._marginal_source`): dense count
    arrays (axes in clique order) for a list of cliques, then `close`. Implemented here in
    memory and by `privlab.synth.spark.SparkMarginals` on a cluster."""

    def counts(self, cliques: Sequence[tuple[int, ...]]) -> dict[tuple[int, ...], np.ndarray]:
        ...

    def close(self) -> None:
        ...
