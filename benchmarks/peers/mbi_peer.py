"""Runs inside a separate venv with `mbi==2.0.0` (private-pgm, JAX): never imported by privlab.

Two jobs, called by benchmarks/synth_pgm.py and benchmarks/synth.py with a JSON job file:

- "estimate": fit mbi's MirrorDescent to given noisy marginals (the ones privlab's AIM
  measured) and report its loss, its error on the true marginals and its time;
- "aim": the AIM mechanism of private-pgm's `mechanisms/aim.py` (the authors' example, written
  for mbi < 2), ported line by line to the mbi 2.0 API: same schedule, same candidates and
  weights, same scores, 1000 warm-started mirror-descent iterations per round, mbi's model-size
  filter and its `synthetic_data`. Wall-clock capped by the caller.

Setup (never in the project venv: mbi pulls jax):
    python3 -m venv /tmp/mbienv && /tmp/mbienv/bin/pip install mbi==2.0.0 pandas
"""

from __future__ import annotations

import itertools
import json
import sys
import time

import jax

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_enable_compilation_cache", False)

import numpy as np  # noqa: E402
from mbi import Dataset, Domain, LinearMeasurement, estimation  # noqa: E402
from mbi.junction_tree import hypothetical_model_size  # noqa: E402


def _names(d: int) -> list[str]:
    return [f"c{j}" for j in range(d)]


def _loss(model, meas: list[tuple[tuple[str, ...], np.ndarray, float]]) -> float:
    total = 0.0
    for cl, y, sigma in meas:
        diff = (np.asarray(model.project(cl).datavector()) - y.ravel()) / sigma
        total += 0.5 * float(diff @ diff)
    return total


def estimate(job: dict) -> dict:
    data = np.load(job["npz"])
    sizes = [int(s) for s in data["sizes"]]
    names = _names(len(sizes))
    domain = Domain(names, sizes)
    meas, lms = [], []
    for i in range(int(data["count"])):
        cl = tuple(names[a] for a in data[f"clique{i}"])
        y = data[f"y{i}"].astype(np.float64)
        sigma = float(data[f"sigma{i}"])
        meas.append((cl, y, sigma))
        lms.append(LinearMeasurement(y.ravel(), cl, stddev=sigma))
    out = {"iters": job["iters"], "runs": []}
    for _ in range(job.get("repeats", 1)):
        t0, c0 = time.perf_counter(), time.process_time()
        model = estimation.MirrorDescent().estimate(domain, lms, iters=job["iters"])
        jax.block_until_ready(model.marginals)
        t1, c1 = time.perf_counter(), time.process_time()
        out["runs"].append({"seconds": t1 - t0, "cpu_s": c1 - c0, "loss": _loss(model, meas)})
        with open(job["result"], "w") as fh:  # keep the timings if a later step dies
            json.dump(out, fh)
    # error of the fitted model on the true marginals
    errs = []
    for k in range(int(data["true_count"])):
        cl = tuple(names[a] for a in data[f"tclique{k}"])
        x = data[f"tx{k}"].ravel()
        est = np.asarray(model.project(cl).datavector())
        errs.append(0.5 * float(np.abs(est / est.sum() - x / x.sum()).sum()))
    out["true_tvd_mean"] = float(np.mean(errs))
    out["true_tvd"] = errs
    return out


# ------------------------------------------------------------------------------------------
# AIM, ported from private-pgm mechanisms/aim.py to mbi 2.0
# ------------------------------------------------------------------------------------------


def _powerset(s):
    s = list(s)
    return itertools.chain.from_iterable(itertools.combinations(s, r)
                                         for r in range(1, len(s) + 1))


def _downward_closure(ws):
    ans = set()
    for proj in ws:
        ans.update(_powerset(proj))
    return sorted(ans, key=len)


def _compile_workload(workload):
    def score(cl):
        return sum(len(set(cl) & set(ax)) for ax in workload)
    return {cl: score(cl) for cl in _downward_closure(workload)}


def _filter_candidates(candidates, domain, cliques, size_limit):
    ans = {}
    free = _downward_closure(cliques)
    for cl in candidates:
        cond1 = hypothetical_model_size(domain, list(cliques) + [cl]) <= size_limit
        if cond1 or cl in free:
            ans[cl] = candidates[cl]
    return ans


def aim(job: dict) -> dict:
    prng = np.random.default_rng(job["seed"])
    codes = np.load(job["codes"])
    sizes = job["sizes"]
    names = _names(len(sizes))
    domain = Domain(names, sizes)
    data = Dataset({n: codes[:, j] for j, n in enumerate(names)}, domain)
    rho = job["rho"]
    max_iters = job.get("max_iters", 1000)
    max_model_size = job.get("max_model_size", 80)
    workload = [tuple(names[a] for a in w) for w in job["workload"]]
    t_start = time.perf_counter()
    log = []

    def note(msg):
        log.append([round(time.perf_counter() - t_start, 2), msg])
        print(json.dumps(log[-1]), file=sys.stderr, flush=True)

    rounds = 16 * len(names)
    candidates = _compile_workload(workload)
    answers = {cl: np.asarray(data.project(cl).datavector()) for cl in candidates}
    oneway = [cl for cl in candidates if len(cl) == 1]
    sigma = np.sqrt(rounds / (2 * 0.9 * rho))
    epsilon = np.sqrt(8 * 0.1 * rho / rounds)
    measurements = []
    rho_used = len(oneway) * 0.5 / sigma ** 2
    for cl in oneway:
        x = answers[cl]
        y = x + prng.normal(0, sigma, x.size)
        measurements.append(LinearMeasurement(y, cl, stddev=sigma))
    est = estimation.MirrorDescent()
    model = est.estimate(domain, measurements, iters=max_iters)
    note("initial model")
    t = 0
    terminate = False
    while not terminate:
        t += 1
        if rho - rho_used < 2 * (0.5 / sigma ** 2 + 1.0 / 8 * epsilon ** 2):
            remaining = rho - rho_used
            sigma = np.sqrt(1 / (2 * 0.9 * remaining))
            epsilon = np.sqrt(8 * 0.1 * remaining)
            terminate = True
        rho_used += 1.0 / 8 * epsilon ** 2 + 0.5 / sigma ** 2
        size_limit = max_model_size * rho_used / rho
        cliques = [m.clique for m in measurements]
        small = _filter_candidates(candidates, domain, cliques, size_limit)
        errors, sens = {}, {}
        for cl in small:
            wgt = small[cl]
            bias = np.sqrt(2 / np.pi) * sigma * domain.size(cl)
            xest = np.asarray(model.project(cl).datavector())
            errors[cl] = wgt * (np.linalg.norm(answers[cl] - xest, 1) - bias)
            sens[cl] = abs(wgt)
        keys = list(errors)
        q = np.array([errors[k] for k in keys])
        q = q - q.max()
        p = np.exp(0.5 * epsilon / max(sens.values()) * q)
        cl = keys[prng.choice(p.size, p=p / p.sum())]
        n = domain.size(cl)
        y = answers[cl] + prng.normal(0, sigma, n)
        measurements.append(LinearMeasurement(y, cl, stddev=sigma))
        z = np.asarray(model.project(cl).datavector())
        model = est.estimate(domain, measurements, iters=max_iters, warm_start=model)
        w = np.asarray(model.project(cl).datavector())
        note(f"round {t}: {cl}")
        if np.linalg.norm(w - z, 1) <= sigma * np.sqrt(2 / np.pi) * n:
            sigma /= 2
            epsilon *= 2
    model = est.estimate(domain, measurements, iters=max_iters, warm_start=model)
    synth = model.synthetic_data(rows=job["rows"])
    out_codes = np.column_stack([np.asarray(synth.data[n]) for n in names])
    np.save(job["out"], out_codes)
    return {"rounds": t, "seconds": time.perf_counter() - t_start, "log": log}


def main() -> int:
    with open(sys.argv[1]) as fh:
        job = json.loads(fh.read())
    result = {"estimate": estimate, "aim": aim}[job["job"]](job)
    with open(job["result"], "w") as fh:
        json.dump(result, fh)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
