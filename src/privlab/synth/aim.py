"""AIM (McKenna, Mullins, Sheldon & Miklau 2022, "AIM: An Adaptive and Iterative Mechanism
for Differentially Private Synthetic Data", VLDB), implemented here.

Input: a declared workload of marginals (default: every 2- and 3-way marginal over the
columns) and a public domain. Candidates are the workload's marginals and all their subsets;
candidate r has weight w_r = sum over workload marginals s of |r & s| (AIM, Sec. 4).

1. Measure every 1-way marginal with discrete Gaussian noise at the round sigma.
2. Rounds (at most T = 16 d; the paper's budget schedule):
   sigma = sqrt(T / (2 * 0.9 * rho)), epsilon = sqrt(8 * 0.1 * rho / T) to start.
   a. Candidates whose model would stay under the size cap (max_model_cells x rho_used /
      rho, AIM's growing limit), or that are already inside the model, are scored
      w_r (||x_r - model_r||_1 - sqrt(2/pi) sigma |r|): the error of the current model on
      that marginal minus the expected error of measuring it. Sensitivity max_r w_r.
   b. Select one with the exponential mechanism at epsilon (eps^2/8-zCDP).
   c. Measure it with discrete Gaussian noise at sigma (1/(2 sigma^2)-zCDP, sensitivity 1).
   d. Re-estimate the graphical model from all noisy measurements (`privlab.synth.pgm`,
      mirror descent warm-started from the previous round).
   e. If the model's marginal on the selected clique moved by less than the expected noise
      (sqrt(2/pi) sigma |r|), halve sigma and double epsilon (AIM's annealing).
   When the budget left is below two rounds' cost, the last round spends exactly what is
   left (0.9 on the measurement, 0.1 on the selection).
3. Final estimate (more iterations) and ancestral sampling from the junction tree.

Exact marginals come from `privlab.synth.marginals` (one bincount per maximal candidate);
the model and the sampler only see the noisy measurements. Accounting is zCDP, one line per
selection and per measurement; the total equals the rho of (epsilon, delta) exactly (tested).
"""

from __future__ import annotations

import itertools
import json
import math
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from privlab.core.mechanisms import exponential_mechanism
from privlab.core.samplers import discrete_gaussian
from privlab.errors import InvalidInputError
from privlab.synth.base import Prepared, Synthesizer
from privlab.synth.domain import ColumnPlan
from privlab.synth.marginals import CodeMarginals, MarginalSource, narrow
from privlab.synth.pgm import (
    Clique,
    Measurement,
    ModelSizer,
    cells,
    mirror_descent,
)

#: Model-size cap: 8 MB of float64 cells (1,048,576). AIM's paper and private-pgm use 80 MB;
#: on 2 cores that lets the pool hold candidates whose model marginal, computed on a large
#: junction tree, costs seconds each (one full-Adult run at epsilon 4 took over 13 CPU-minutes
#: with 80 MB, 45 CPU-seconds with 8 MB; docs/synth.md). `--max-model-mb` raises it.
MAX_MODEL_CELLS = 8 * 2 ** 20 // 8
#: Mirror-descent iterations per round (warm-started) and for the final model: caps.
ROUND_ITERS = 100
FINAL_ITERS = 1000
#: Early stop of each fit once the loss fell by less than this fraction of itself over the
#: last CONVERGENCE_WINDOW iterations (`pgm.mirror_descent`'s `tol`). The loss reads only
#: the noisy measurements and the model, never the rows: where a fit stops is
#: post-processing. Off (0) by default: on 200k x 20 the rounds never stall at 1% (the
#: loss still falls 2-5% per 10 iterations at the 100th), and fewer round iterations
#: (round_iters=50) cost fit at epsilon 4 (workload error 0.140 vs 0.133 on Adult: a round's
#: fit decides AIM's annealing). Evidence: benchmarks/results/synth_convergence_2026-11-28.json,
#: docs/synth.md.
ROUND_TOL = 0.0
FINAL_TOL = 0.0
CONVERGENCE_WINDOW = 10
#: Rounds per column (AIM: T = 16 d).
ROUNDS_PER_COLUMN = 16
MEASURE_SHARE = 0.9


def parse_workload(spec: str | Sequence[Sequence[str]] | None, names: Sequence[str]
                   ) -> list[tuple[str, ...]]:
    """The workload as column-name tuples. None or "3way": every 2- and 3-way marginal;
    "2way": every 2-way marginal; a path to a JSON list of column lists; or such a list."""
    if spec is None or spec == "3way":
        return [tuple(c) for k in (2, 3) for c in itertools.combinations(names, k)]
    if spec == "2way":
        return [tuple(c) for c in itertools.combinations(names, 2)]
    if isinstance(spec, str):
        path = Path(spec)
        if not path.is_file():
            raise InvalidInputError(f"--workload {spec!r} is neither 2way, 3way nor a JSON file "
                                    "with a list of column lists")
        try:
            spec = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise InvalidInputError(f"--workload {path}: not readable JSON ({exc})") from None
    if not isinstance(spec, list) or not spec:
        raise InvalidInputError("workload must be a non-empty list of column lists")
    out = []
    for item in spec:
        if (not isinstance(item, (list, tuple)) or not item
                or not all(isinstance(c, str) for c in item) or len(set(item)) != len(item)):
            raise InvalidInputError(f"workload entry {item!r} must be a list of distinct "
                                    "column names")
        unknown = [c for c in item if c not in names]
        if unknown:
            raise InvalidInputError(f"workload names columns that are not synthesized: "
                                    f"{unknown}")
        out.append(tuple(item))
    return out


def candidate_weights(workload: Sequence[Clique]) -> dict[Clique, float]:
    """Every non-empty subset of a workload marginal, weighted sum_s |r & s| (AIM Sec. 4)."""
    closure: set[Clique] = set()
    for s in workload:
        for k in range(1, len(s) + 1):
            closure.update(itertools.combinations(sorted(s), k))
    # sum_s |r & s| = sum over a in r of (marginals s holding a): linear, not candidates x
    # workload (104 s at 40 columns)
    holding = Counter(a for s in workload for a in set(s))
    return {r: float(sum(holding[a] for a in r))
            for r in sorted(closure, key=lambda c: (len(c), c))}


class AIMSynthesizer(Synthesizer):
    """Workload-adaptive marginal synthesizer (AIM) with a junction-tree graphical model."""

    method = "aim"
    mechanism = ("AIM (McKenna et al. 2022): noisy 1-way marginals, then rounds of "
                 "exponential-mechanism selection of a workload marginal and its discrete "
                 "Gaussian measurement; graphical-model estimation")

    def __init__(self, *, workload: str | Sequence[Sequence[str]] | None = None,
                 max_model_cells: int = MAX_MODEL_CELLS, rounds: int | None = None,
                 round_iters: int = ROUND_ITERS, final_iters: int = FINAL_ITERS,
                 round_tol: float = ROUND_TOL, final_tol: float = FINAL_TOL,
                 **options: Any) -> None:
        super().__init__(**options)
        if isinstance(max_model_cells, bool) or not isinstance(max_model_cells, int) \
                or max_model_cells < 1:
            raise InvalidInputError(f"max_model_cells must be a positive integer, got "
                                    f"{max_model_cells!r}")
        if rounds is not None and (isinstance(rounds, bool) or not isinstance(rounds, int)
                                   or rounds < 1):
            raise InvalidInputError(f"rounds must be a positive integer, got {rounds!r}")
        self.workload_spec = workload
        self.max_model_cells = max_model_cells
        self.rounds = rounds
        self.round_iters = int(round_iters)
        self.final_iters = int(final_iters)
        for name, tol in (("round_tol", round_tol), ("final_tol", final_tol)):
            if isinstance(tol, bool) or not isinstance(tol, (int, float)) \
                    or not 0 <= tol < 1:
                raise InvalidInputError(f"{name} must be a number in [0, 1), got {tol!r}")
        self.round_tol = float(round_tol)
        self.final_tol = float(final_tol)

    def max_rounds(self, d: int) -> int:
        """Rounds at most: `rounds`, else AIM's T = 16 d (the loop never runs more)."""
        return self.rounds or ROUNDS_PER_COLUMN * d

    def sampler_bound(self, plans: Sequence[ColumnPlan]) -> int:
        """The domain's histograms, the d 1-way marginals and one marginal per round: a row
        shifts one draw of each (which marginals, chosen under DP, never changes how many)."""
        d = len(plans)
        return super().sampler_bound(plans) + d + self.max_rounds(d)

    def _fit(self, prep: Prepared) -> None:
        if not prep.private:
            raise InvalidInputError("aim has no non-private mode: its rounds are set by the "
                                    "budget; use --method mst for a non-private baseline")
        gen = prep.gen
        rho, _, delta_z = self._private_budget(prep)
        assert self.domain is not None
        names, sizes = self.domain.names, self.domain.sizes
        d = len(names)
        self._check_rounds(d)
        workload = [tuple(sorted(names.index(c) for c in w))
                    for w in parse_workload(self.workload_spec, names)]
        cands = candidate_weights(workload)
        too_big = [c for c in cands if cells(sizes, c) > self.max_model_cells]
        for c in too_big:
            del cands[c]
        if too_big:
            self.warnings.append(f"{len(too_big)} workload marginal(s) exceed the model size "
                                 f"cap ({self.max_model_cells} cells) and are never measured")
        oracle = self._marginal_source(prep)
        try:
            self.progress("exact marginals", 0, 1)
            answers = oracle.counts(list(cands) + [(j,) for j in range(d)])
            self.progress("exact marginals", 1, 1)
        finally:
            oracle.close()
        self._run(answers, cands, sizes, names, rho, gen)
        self._guarantee = self.account.guarantee(delta_z, self.mechanism)

    def _check_rounds(self, d: int) -> None:
        """Refuse `rounds` below the column count before any count or spend: the
        noise scale gives each 1-way marginal 1/rounds of the measurement budget, so fewer
        rounds than columns would spend more than the whole budget on them."""
        if self.rounds is not None and self.rounds < d:
            raise InvalidInputError(
                f"rounds={self.rounds} is fewer than the {d} synthesized columns: AIM measures "
                f"every 1-way marginal at one round's cost first; use rounds >= {d} or leave "
                f"it unset ({ROUNDS_PER_COLUMN} x columns)")

    def _marginal_source(self, prep: Prepared) -> MarginalSource:
        """Where the exact marginals come from: the encoded rows in memory here;
        `privlab.synth.spark.SparkAIMSynthesizer` counts them on Spark (tables come back)."""
        assert self.domain is not None
        # one column at a time into its smallest dtype, counted by bincount (issue 32): the
        # codes never exist as an (n, d) int64 matrix
        return CodeMarginals([narrow(c.encode(prep.frame[c.name]), size) for c, size in
                              zip(self.domain.columns, self.domain.sizes, strict=True)],
                             self.domain.sizes)

    # ------------------------------------------------------------------ the AIM loop
    def _measure(self, clique: Clique, x: np.ndarray, sigma: float,
                 gen: np.random.Generator) -> Measurement:
        noise = discrete_gaussian(sigma, size=x.size, rng=gen).reshape(x.shape)
        # counts may be held as uint8/uint16/float32 (exact): the measurement is float64
        return Measurement(clique, np.asarray(x, dtype=np.float64) + noise, sigma)

    def _run(self, answers: dict[Clique, np.ndarray], cands: dict[Clique, float],
             sizes: list[int], names: list[str], rho: float, gen: np.random.Generator
             ) -> None:
        d = len(sizes)
        rounds = self.max_rounds(d)
        sigma = math.sqrt(rounds / (2 * MEASURE_SHARE * rho))
        eps = math.sqrt(8 * (1 - MEASURE_SHARE) * rho / rounds)
        label = {c: " x ".join(names[a] for a in c) for c in list(cands) + [
            (j,) for j in range(d)]}
        measurements = [self._measure((j,), answers[(j,)], sigma, gen) for j in range(d)]
        rho_used = d / (2 * sigma ** 2)
        self.account.spend(f"1-way marginals of {d} column(s)", rho_used,
                           detail=f"discrete Gaussian sigma={sigma:.4g} per cell",
                           vectors=d)
        model, stats = mirror_descent(sizes, measurements, iters=self.round_iters,
                                      tol=self.round_tol, window=CONVERGENCE_WINDOW)
        log: list[dict[str, Any]] = []
        sizer: ModelSizer | None = None
        sizer_edges: set[tuple[int, int]] = set()
        t = 0
        while True:
            t += 1
            terminate = False
            round_cost = 1 / (2 * sigma ** 2) + eps ** 2 / 8
            # the last round is forced at round `rounds`: sampler_bound counts no more
            if rho - rho_used < 2 * round_cost or t >= rounds:
                left = rho - rho_used
                sigma = math.sqrt(1 / (2 * MEASURE_SHARE * left))
                eps = math.sqrt(8 * (1 - MEASURE_SHARE) * left)
                terminate = True
            self.progress("AIM rounds", t, rounds)
            limit = self.max_model_cells * (rho_used + 1 / (2 * sigma ** 2) + eps ** 2 / 8) / rho
            inside = {r for m in model.regions for k in range(1, len(m) + 1)
                      for r in itertools.combinations(m, k)}
            base = [m.clique for m in measurements]
            edges = {e for c in base for e in itertools.combinations(c, 2)}
            if sizer is None or edges != sizer_edges:  # same graph: same sizes, keep them
                sizer, sizer_edges = ModelSizer(sizes, base), edges
            pool = [c for c in cands if c in inside or sizer.size(c) <= limit]
            # one batched pass: a candidate inside an asked superset is summed out of it
            # (float sums in another order than model.marginal(c); the scores only feed
            # the Gumbel argmax below)
            score: dict[Clique, float] = {}
            for c, fitted in model.candidate_marginals(pool):
                err = float(np.abs(answers[c] - fitted).sum())
                score[c] = cands[c] * (err - math.sqrt(2 / math.pi) * sigma * answers[c].size)
            scores = [score[c] for c in pool]
            sens = max(cands[c] for c in pool)
            pick = pool[int(exponential_mechanism(list(range(len(pool))), np.array(scores),
                                                  sens, eps, method="gumbel", rng=gen).value)]
            self.account.spend(f"round {t}: select {label[pick]}", eps ** 2 / 8,
                               detail=f"exponential mechanism (Gumbel) over {len(pool)} "
                                      f"candidates, epsilon={eps:.4g}, sensitivity {sens:g}",
                               vectors=0)
            before = model.marginal(pick)
            measurements.append(self._measure(pick, answers[pick], sigma, gen))
            self.account.spend(f"round {t}: measure {label[pick]}", 1 / (2 * sigma ** 2),
                               detail=f"discrete Gaussian sigma={sigma:.4g} per cell",
                               vectors=1)
            rho_used += eps ** 2 / 8 + 1 / (2 * sigma ** 2)
            model, stats = mirror_descent(sizes, measurements, iters=self.round_iters,
                                          warm=model, step=stats.step, tol=self.round_tol,
                                          window=CONVERGENCE_WINDOW)
            moved = float(np.abs(model.marginal(pick) - before).sum())
            log.append({"round": t, "selected": [names[a] for a in pick], "sigma": sigma,
                        "epsilon": eps, "candidates": len(pool), "model_cells":
                        model.tree.size, "iterations": stats.iterations})
            if terminate:
                break
            if moved <= math.sqrt(2 / math.pi) * sigma * before.size:
                sigma /= 2
                eps *= 2
        self.progress("final estimate", 0, 1)
        model, stats = mirror_descent(sizes, measurements, iters=self.final_iters, warm=model,
                                      step=stats.step, tol=self.final_tol,
                                      window=CONVERGENCE_WINDOW)
        self.progress("final estimate", 1, 1)
        self.model = model
        self.measurements = measurements  # noisy (DP) marginals: what the model was fitted to
        self.round_log = log
        self.model_cliques = [[names[a] for a in c] for c in model.tree.cliques]
        self.fit_stats = stats

    def _sample_codes(self, n: int, gen: np.random.Generator) -> np.ndarray:
        return self.model.sample(n, gen)

    def details(self) -> dict[str, Any]:
        if not hasattr(self, "model"):
            return {}
        return {"rounds": self.round_log, "model_cliques": self.model_cliques,
                "model_cells": self.model.tree.size, "max_model_cells": self.max_model_cells,
                "estimated_rows": self.model.total,
                "final_loss": self.fit_stats.loss,
                "final_iterations": self.fit_stats.iterations,
                "model": "graphical model on a junction tree of the measured cliques "
                         "(privlab.synth.pgm: mirror descent, ancestral sampling)"}

