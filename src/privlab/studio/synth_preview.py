"""The synthetic-data page's preview: MST's budget split and the noise of its marginals,
from public information only (the schema's domains, epsilon, delta, a guessed row count).

MST (privlab.synth.mst) converts (epsilon, delta) to a zCDP budget rho and spends a third
on the d one-way marginals (discrete Gaussian, sigma = sqrt(d / (2 rho/3)) per cell), a third
on choosing a spanning tree, a third on its d - 1 two-way marginals (sigma = sqrt((d - 1) /
(2 rho/3))). The expected total-variation distance that this noise alone puts on a one-way
marginal of k cells over n rows is about k sigma sqrt(2/pi) / (2 n). AIM spends the same rho
over adaptive rounds, so only its total is shown. Both first set aside the sampler reserve
for their public bound of shifted draws (MST 2d - 1, AIM d + 16 d; privlab.synth.budget), at
a smaller epsilon where the request is too large for it, as the fit does."""

from __future__ import annotations

import math
from typing import Any

from privlab.schema import Schema
from privlab.synth.aim import ROUNDS_PER_COLUMN
from privlab.synth.base import split_delta
from privlab.synth.budget import reserve_for, rho_within
from privlab.synth.domain import DEFAULT_BINS  # numeric columns' bins by default


def cells(schema: Schema, name: str) -> int:
    """Cells of a column's one-way marginal in the synthesizer's domain (approximate: a
    missing-value cell is counted when the schema allows missing values)."""
    col = schema.column(name)
    extra = 1 if col.missing else 0
    if col.type == "categorical":
        return len(col.categories) + (1 if col.other else 0) + extra
    return (col.bins or DEFAULT_BINS) + extra


def synth_preview(schema: Schema, method: str, columns: list[str], epsilon: float,
                  delta: float, rows: int | None) -> dict[str, Any]:
    d = len(columns)
    bound = 2 * d - 1 if method == "mst" else d + ROUNDS_PER_COLUMN * d
    sampler = reserve_for(epsilon, delta, bound)
    rho = rho_within(sampler.epsilon, split_delta(delta, 0.0, sampler.delta))
    out: dict[str, Any] = {"rho": rho, "columns": d, "split": [], "tvd": None,
                           "epsilon": sampler.epsilon,
                           "calibrated_below": sampler.epsilon < epsilon}
    if method != "mst":
        out["split"] = [("adaptive rounds: choose a marginal (exponential mechanism), measure "
                         "it (discrete Gaussian), until rho is spent", rho)]
        return out
    third = rho / 3
    sigma1 = math.sqrt(d / (2 * third))
    out["split"] = [(f"{d} one-way marginals (noise sigma {sigma1:.3g} per cell)", third),
                    (f"choosing the tree ({max(d - 1, 0)} rounds)", third)]
    if d > 1:
        sigma2 = math.sqrt((d - 1) / (2 * third))
        out["split"].append((f"{d - 1} two-way marginals (sigma {sigma2:.3g} per cell)", third))
    if rows:
        ks = [cells(schema, c) for c in columns]
        band = [k * sigma1 * math.sqrt(2 / math.pi) / (2 * rows) for k in (min(ks), max(ks))]
        out["tvd"] = (min(band[0], 1.0), min(band[1], 1.0))
    return out
