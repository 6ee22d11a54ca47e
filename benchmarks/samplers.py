"""Benchmark: exact noise samplers beside NumPy and OpenDP, as ratios of CPU time.

Part 1, 1,000,000 Laplace draws (a 1M-cell histogram's noise), in one run:
  * privlab `discrete_laplace` on the default CSPRNG (`make_rng(None)`, ChaCha20) at
    1024 grid steps (Laplace(1) on the grid 2^-10), EXACT (integer arithmetic only);
  * privlab `laplace_mechanism` on a 1M vector (rounding onto the grid, noise, guarantee);
  * NumPy `Generator.laplace` on PCG64 (the speed floor: float, not secure, Mironov-attackable)
    and on the same ChaCha20 generator;
  * OpenDP's vector Laplace, integer (`atom_domain(T=int)`, scale 1024) and float
    (`atom_domain(T=float)`, scale 1): exact samplers too (`--opendp-n` draws, per-draw CPU
    scaled to n; they take seconds).
Part 2, one Gaussian query: privlab `gaussian_mechanism` on a scalar (sensitivity 1,
epsilon 1, delta 1e-6) with a kept CSPRNG generator and with the default (a fresh CSPRNG per
call), beside OpenDP's scalar Gaussian measurement (float and int), per query.

The fast phases are alternated `--repeats` times (privlab, NumPy, privlab, ...) and each
phase's best CPU time (`time.process_time`, all threads) is kept: background load on a shared
machine moves absolute times, far less the ratios. Claims checked: privlab's 1M exact draws
within 3x NumPy's float PCG64 Laplace, and one Gaussian query no slower than OpenDP's draw.

    .venv/bin/python benchmarks/samplers.py --json benchmarks/results/samplers.json
    .venv/bin/python benchmarks/samplers.py --opendp-n 100000   # quicker
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from privlab.core.mechanisms import gaussian_mechanism, laplace_mechanism
from privlab.core.rng import make_rng
from privlab.core.samplers import discrete_laplace

GRID = 2.0**-10  # grid of the secure sampler: Laplace(1) noise as k * 2^-10


def cpu(fn: Callable[[], object], calls: int = 1) -> float:
    """CPU seconds per call of `fn` over `calls` calls."""
    start = time.process_time()
    for _ in range(calls):
        fn()
    return (time.process_time() - start) / calls


def alternate(fns: dict[str, Callable[[], object]], repeats: int, calls: int = 1
              ) -> dict[str, float]:
    """Best CPU time per call of each function, the functions interleaved `repeats` times."""
    best = {name: float("inf") for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            best[name] = min(best[name], cpu(fn, calls))
    return best


def opendp_vector(kind: str, n: int) -> Callable[[], object]:
    import opendp.prelude as dp

    dp.enable_features("contrib")
    if kind == "int":
        meas = dp.m.make_laplace(dp.vector_domain(dp.atom_domain(T=int)),
                                 dp.l1_distance(T=int), scale=1024.0)
        data: list[object] = [0] * n
    else:
        meas = dp.m.make_laplace(dp.vector_domain(dp.atom_domain(T=float, nan=False)),
                                 dp.l1_distance(T=float), scale=1.0)
        data = [0.0] * n
    return lambda: meas(data)


def opendp_scalar_gaussian(kind: str) -> Callable[[], object]:
    import opendp.prelude as dp

    dp.enable_features("contrib")
    if kind == "int":
        meas = dp.m.make_gaussian(dp.atom_domain(T=int), dp.absolute_distance(T=int),
                                  scale=5.0)
        return lambda: meas(10)
    meas = dp.m.make_gaussian(dp.atom_domain(T=float, nan=False),
                              dp.absolute_distance(T=float), scale=5.0)
    return lambda: meas(10.0)


def main(argv: list[str] | None = None) -> dict[str, object]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="draws per vector call")
    parser.add_argument("--repeats", type=int, default=7, help="alternations of fast phases")
    parser.add_argument("--opendp-n", type=int, default=None,
                        help="draws per OpenDP vector call (default n; CPU scaled to n)")
    parser.add_argument("--skip-opendp", action="store_true")
    parser.add_argument("--queries", type=int, default=300, help="Gaussian queries per phase")
    parser.add_argument("--json", default=None, help="write the results here")
    args = parser.parse_args(argv)
    n = args.n
    secure = make_rng(None)
    numpy_rng = np.random.default_rng(12345)
    zeros = np.zeros(n)

    vector = alternate({
        "privlab_discrete_laplace": lambda: discrete_laplace(1 / GRID, size=n, rng=secure),
        "numpy_laplace_pcg64": lambda: numpy_rng.laplace(0.0, 1.0, size=n),
        "privlab_laplace_mechanism": lambda: laplace_mechanism(zeros, 1.0, 1.0, rng=secure),
        "numpy_laplace_chacha20": lambda: secure.laplace(0.0, 1.0, size=n),
    }, args.repeats)
    scalar = {
        "privlab_gaussian_mechanism_kept_csprng": lambda: gaussian_mechanism(
            10.0, 1.0, 1.0, 1e-6, rng=secure),
        "privlab_gaussian_mechanism_fresh_csprng": lambda: gaussian_mechanism(
            10.0, 1.0, 1.0, 1e-6),
    }
    if not args.skip_opendp:
        scalar["opendp_gaussian_float"] = opendp_scalar_gaussian("float")
        scalar["opendp_gaussian_int"] = opendp_scalar_gaussian("int")
    for fn in scalar.values():  # warm: the first privlab query calibrates sigma (cached)
        fn()
    one_query = alternate(scalar, args.repeats, calls=args.queries)
    if not args.skip_opendp:
        m = args.opendp_n or n
        for kind in ("int", "float"):
            vector[f"opendp_laplace_{kind}"] = cpu(opendp_vector(kind, m)) * n / m

    numpy_t = vector["numpy_laplace_pcg64"]
    ratios = {f"{name}/numpy_laplace_pcg64": t / numpy_t for name, t in vector.items()}
    for kind in ("int", "float"):
        if f"opendp_laplace_{kind}" in vector:
            ratios[f"opendp_laplace_{kind}/privlab_discrete_laplace"] = (
                vector[f"opendp_laplace_{kind}"] / vector["privlab_discrete_laplace"])
    if "opendp_gaussian_float" in one_query:
        for name in ("privlab_gaussian_mechanism_kept_csprng",
                     "privlab_gaussian_mechanism_fresh_csprng"):
            ratios[f"{name}/opendp_gaussian_float"] = (one_query[name]
                                                       / one_query["opendp_gaussian_float"])
    claims = {f"{n:,} exact draws within 3x NumPy": ratios[
        "privlab_discrete_laplace/numpy_laplace_pcg64"] <= 3.0}
    if "opendp_gaussian_float" in one_query:
        claims["one Gaussian query no slower than OpenDP"] = (
            one_query["privlab_gaussian_mechanism_kept_csprng"]
            <= one_query["opendp_gaussian_float"])
    result: dict[str, object] = {
        "n": n, "repeats": args.repeats, "queries_per_phase": args.queries,
        "cpu_seconds_per_vector_call": vector, "cpu_seconds_per_query": one_query,
        "ratios": ratios, "claims": claims, "load_average": os.getloadavg(),
        "machine": platform.processor() or platform.machine(), "numpy": np.__version__}

    print(f"{n:,} Laplace draws, CPU ms per call (best of {args.repeats} alternated):")
    for name, sec in vector.items():
        print(f"  {name:32s} {sec * 1e3:10.1f} ms  {sec / numpy_t:7.2f}x NumPy PCG64")
    print(f"one Gaussian query, CPU us ({args.queries} per phase, best of {args.repeats}):")
    for name, sec in one_query.items():
        print(f"  {name:42s} {sec * 1e6:8.1f} us")
    for claim, ok in claims.items():
        print(f"  claim: {claim} -> {'holds' if ok else 'FAILS'}")
    print(f"  load average {os.getloadavg()[0]:.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return result


if __name__ == "__main__":
    main()
