"""Benchmark: DP-SGD accounting accuracy and sigma-calibration speed (privlab.core.accounting).

For the case q = 0.01, sigma = 1.0, 10,000 steps, delta = 1e-5 it prints, from ONE run:
  * epsilon by privlab (default adaptive PLD grid), by dp-accounting's own PLDAccountant at
    fine grids (1e-4 = its default, and 5e-5), by dp-accounting's RDP accountant and by
    Opacus' RDP accountant, with relative differences to the finest dp-accounting PLD value;
  * privlab's sigma calibration wall time (median and max over --repeats cold-cache runs, and
    CPU time) for target epsilon = that fine PLD value, 1, 3 and 8, with the epsilon at the
    returned sigma, the grid it was solved on and the RDP-calibrated sigma for comparison;
  * the grid trade-off: epsilon and time per fixed PLD grid, privlab's construction vs
    dp-accounting's PLDAccountant;
  * optionally (--library-calibration) dp-accounting's generic `calibrate_dp_mechanism` with
    a PLDAccountant at 1e-3, the straightforward way to do the same job.

Timings depend on machine load; the load average is printed with them.

Usage:  .venv/bin/python benchmarks/accounting.py [--repeats 5] [--library-calibration]
        [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import statistics
import time
import warnings

from dp_accounting.pld.pld_privacy_accountant import PLDAccountant
from dp_accounting.rdp.rdp_privacy_accountant import RdpAccountant

from privlab.core import accounting as acc
from privlab.core import pld_adapter
from privlab.core.accounting import base as acc_base  # the private helpers it times
from privlab.core.accounting import events as acc_events
from privlab.core.accounting import pld as acc_pld
from privlab.core.accounting import rdp as acc_rdp
from privlab.utils.atomic import atomic_write_text

Q, SIGMA, STEPS, DELTA = 0.01, 1.0, 10_000, 1e-5


def _clear_caches() -> None:
    acc_pld._pld_value.cache_clear()
    acc_rdp._rdp_value.cache_clear()


def _timed(fn, *args, **kwargs):
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - wall, time.process_time() - cpu


def epsilons() -> dict:
    event = acc.dpsgd_event(SIGMA, Q, STEPS)
    rows: dict[str, dict] = {}
    _clear_caches()
    est, wall, _ = _timed(acc_events._estimate, event, "epsilon", DELTA, "pld", "add_remove_record",
                          None, acc.DEFAULT_REL_ACCURACY)
    rows["privlab PLD (adaptive grid)"] = {"epsilon": est.value, "seconds": wall,
                                           "grid": est.interval}
    for interval in (1e-4, 5e-5):
        pld = PLDAccountant(value_discretization_interval=interval)
        (_, wall, _) = _timed(pld.compose, event)
        eps, wall2, _ = _timed(pld.get_epsilon, DELTA)
        rows[f"dp-accounting PLD (grid {interval:g})"] = {
            "epsilon": eps, "seconds": wall + wall2, "grid": interval}
    rdp = RdpAccountant()
    (_, wall, _) = _timed(rdp.compose, event)
    eps, wall2, _ = _timed(rdp.get_epsilon, DELTA)
    rows["dp-accounting RDP"] = {"epsilon": eps, "seconds": wall + wall2, "grid": None}
    from opacus.accountants import RDPAccountant  # heavy (torch): only here

    op = RDPAccountant()
    op.history = [(SIGMA, Q, STEPS)]
    eps, wall, _ = _timed(op.get_epsilon, DELTA)
    rows["Opacus RDP (RDPAccountant)"] = {"epsilon": eps, "seconds": wall, "grid": None}
    ref = rows["dp-accounting PLD (grid 5e-05)"]["epsilon"]
    for row in rows.values():
        row["rel_diff_vs_fine_pld"] = row["epsilon"] / ref - 1
    return rows


def grid_tradeoff(reference: float) -> list[dict]:
    """Epsilon and time per PLD grid: privlab's fast construction vs dp-accounting's own."""
    event = acc.dpsgd_event(SIGMA, Q, STEPS)
    relation = acc_base._relation("add_remove_record")
    rows = []
    for interval in (1e-2, 5e-3, 2.5e-3, 1.25e-3, 6.25e-4, 3.125e-4, 1.5625e-4, 1e-4):
        _clear_caches()
        ours, wall, _ = _timed(acc_pld._pld_value, acc_base._key(event), relation, interval,
                               "epsilon", DELTA)
        pld = PLDAccountant(value_discretization_interval=interval)
        (_, lib_wall, _) = _timed(pld.compose, event)
        lib, lib_wall2, _ = _timed(pld.get_epsilon, DELTA)
        rows.append({"grid": interval, "epsilon_privlab": ours, "seconds_privlab": wall,
                     "epsilon_dp_accounting": lib, "seconds_dp_accounting": lib_wall + lib_wall2,
                     "rel_error": ours / reference - 1})
    return rows


def calibrations(targets: list[float], repeats: int) -> list[dict]:
    out = []
    for target in targets:
        walls, cpus, cal = [], [], None
        for _ in range(repeats):
            _clear_caches()
            cal, wall, cpu = _timed(acc.calibrate_dpsgd, target, DELTA, Q, STEPS)
            walls.append(wall)
            cpus.append(cpu)
        _clear_caches()
        check = acc.dpsgd_epsilon(cal.noise_multiplier, Q, STEPS, DELTA)
        below = acc.dpsgd_epsilon(cal.noise_multiplier * (1 - cal.rel_tol), Q, STEPS, DELTA)
        rdp, rdp_wall, _ = _timed(acc.calibrate_dpsgd, target, DELTA, Q, STEPS, "rdp")
        out.append({
            "target_epsilon": target,
            "sigma_pld": cal.noise_multiplier,
            "epsilon_at_sigma": check,
            "epsilon_at_sigma_times_1_minus_tol": below,
            "grid": cal.value_discretization_interval,
            "evaluations": cal.evaluations,
            "wall_median_s": statistics.median(walls),
            "wall_max_s": max(walls),
            "cpu_median_s": statistics.median(cpus),
            "sigma_rdp": rdp.noise_multiplier,
            "rdp_calibration_s": rdp_wall,
            "rdp_over_pld_sigma": rdp.noise_multiplier / cal.noise_multiplier,
        })
    return out


def library_calibration(target: float) -> dict:
    """dp-accounting's generic calibration (bisection) with a PLDAccountant at grid 1e-3."""
    from dp_accounting import mechanism_calibration

    def make_event(sigma: float):
        return acc.dpsgd_event(sigma, Q, STEPS)

    sigma, wall, cpu = _timed(
        mechanism_calibration.calibrate_dp_mechanism,
        lambda: PLDAccountant(value_discretization_interval=1e-3), make_event, target, DELTA,
        mechanism_calibration.LowerEndpointAndGuess(0.1, 1.0), tol=1e-3)
    return {"target_epsilon": target, "sigma": sigma, "wall_s": wall, "cpu_s": cpu}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--library-calibration", action="store_true")
    parser.add_argument("--json", default=None, help="also write the results here")
    args = parser.parse_args()
    logging.getLogger("absl").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore")

    acc.dpsgd_epsilon(SIGMA, Q, 100, DELTA)  # import and first-call costs out of the timings
    load = os.getloadavg()
    print(f"# privlab accounting benchmark: q={Q}, sigma={SIGMA}, steps={STEPS:,}, "
          f"delta={DELTA:g}")
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, load "
          f"average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; dp-accounting "
          f"{pld_adapter.dp_accounting_version()}\n")

    eps = epsilons()
    print("| accountant | epsilon | vs dp-accounting PLD (5e-5) | grid | seconds |")
    print("|---|---|---|---|---|")
    for name, row in eps.items():
        grid = "-" if row["grid"] is None else f"{row['grid']:.3g}"
        print(f"| {name} | {row['epsilon']:.5f} | {row['rel_diff_vs_fine_pld']:+.3%} | {grid} "
              f"| {row['seconds']:.3f} |")

    fine = eps["dp-accounting PLD (grid 5e-05)"]["epsilon"]
    grid = grid_tradeoff(fine)
    print("\nPLD grid trade-off (one fixed grid each; pessimistic, so every row is an upper "
          "bound):\n")
    print("| grid | eps privlab | vs PLD 5e-5 | s privlab | eps dp-accounting | s dp-accounting |")
    print("|---|---|---|---|---|---|")
    for r in grid:
        print(f"| {r['grid']:.4g} | {r['epsilon_privlab']:.5f} | {r['rel_error']:+.3%} | "
              f"{r['seconds_privlab']:.3f} | {r['epsilon_dp_accounting']:.5f} | "
              f"{r['seconds_dp_accounting']:.3f} |")

    targets = [round(fine, 6), 1.0, 3.0, 8.0]
    cals = calibrations(targets, args.repeats)
    print(f"\nsigma calibration, privlab PLD (rel_tol {acc.DEFAULT_SIGMA_TOL:g}, cold caches, "
          f"{args.repeats} runs each) vs privlab RDP:\n")
    print("| target eps | sigma (PLD) | eps(sigma) | eps(sigma*(1-tol)) | grid | evals "
          "| wall median / max (s) | CPU median (s) | sigma (RDP) | RDP/PLD sigma |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for c in cals:
        print(f"| {c['target_epsilon']:g} | {c['sigma_pld']:.5f} | {c['epsilon_at_sigma']:.5f} | "
              f"{c['epsilon_at_sigma_times_1_minus_tol']:.5f} | {c['grid']:.3g} | "
              f"{c['evaluations']} | {c['wall_median_s']:.3f} / {c['wall_max_s']:.3f} | "
              f"{c['cpu_median_s']:.3f} | {c['sigma_rdp']:.5f} | "
              f"{c['rdp_over_pld_sigma']:.4f} |")

    result = {"case": {"q": Q, "sigma": SIGMA, "steps": STEPS, "delta": DELTA},
              "load_average": load, "epsilons": eps, "grid_tradeoff": grid,
              "calibrations": cals}
    if args.library_calibration:
        lib = library_calibration(targets[0])
        result["library_calibration"] = lib
        print(f"\ndp-accounting calibrate_dp_mechanism (PLDAccountant grid 1e-3, tol 1e-3) for "
              f"target {lib['target_epsilon']:g}: sigma {lib['sigma']:.5f} in "
              f"{lib['wall_s']:.2f} s wall ({lib['cpu_s']:.2f} s CPU)")
    print(f"\n# load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.json:
        atomic_write_text(args.json, json.dumps(result, indent=2, default=str))


if __name__ == "__main__":
    main()
