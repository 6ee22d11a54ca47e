"""How much CPU does `privlab demo` take, on the machine as it is and under contention?

Runs the full default demo (`privlab demo`, nothing shortened) in a fresh temporary folder as
a child process, twice: once with the machine as it is, once with two extra CPU-bound busy
loops running for the whole run. For each run: CPU seconds of the demo process (user + system,
`resource.getrusage(RUSAGE_CHILDREN)`, measured around the child only), wall seconds, the
1-minute load average before and after, the usable cores, the recommended epsilon, and the
exit code. Target (issue 23): at most 60 CPU-seconds in both runs. The figures go to stdout
and to benchmarks/results/demo_cpu.json.

Usage: PYTHONPATH=src .venv/bin/python benchmarks/demo_cpu.py
       [--json benchmarks/results/demo_cpu.json] [--busy 2] [--only idle|busy]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

DEMO = "import sys; from privlab.cli.main import main; sys.exit(main(sys.argv[1:]))"


def busy_loop() -> None:  # pragma: no cover - runs in a child until terminated
    x = 0
    while True:
        x = (x + 1) % 1_000_003


def run_demo() -> dict:
    """One `privlab demo` in a fresh folder; CPU of that child only (rusage difference)."""
    with tempfile.TemporaryDirectory(prefix="privlab-demo-bench-") as tmp:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        load_before = os.getloadavg()[0]
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, "-c", DEMO, "demo", "--out",
                               str(Path(tmp) / "out"), "--json"],
                              capture_output=True, text=True, cwd=tmp)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        load_after = os.getloadavg()[0]
    user = after.ru_utime - before.ru_utime
    system = after.ru_stime - before.ru_stime
    result = {"exit_code": proc.returncode, "cpu_s": round(user + system, 1),
              "user_s": round(user, 1), "system_s": round(system, 1), "wall_s": round(wall, 1),
              "load_1min_before": round(load_before, 2),
              "load_1min_after": round(load_after, 2)}
    if proc.returncode != 0:
        result["stderr_tail"] = proc.stderr[-2000:]
        return result
    summary = json.loads(proc.stdout)
    ce = summary.get("choose_epsilon") or {}
    result["recommended_epsilon"] = ce.get("chosen_epsilon")
    result["reason"] = ce.get("reason")
    result["accuracy"] = {f"{r['epsilon']:g}": round(r["accuracy"], 3)
                          for r in ce.get("per_epsilon", [])}
    return result


def run_busy(extra: int) -> dict:
    """The demo while `extra` busy-loop processes compete for the cores."""
    ctx = mp.get_context("spawn")
    loops = [ctx.Process(target=busy_loop, daemon=True) for _ in range(extra)]
    for p in loops:
        p.start()
    try:
        time.sleep(2.0)  # the loops are running before the demo starts
        result = run_demo()
    finally:
        for p in loops:
            p.terminate()
        for p in loops:
            p.join()
    result["extra_busy_processes"] = extra
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, default=Path("benchmarks/results/demo_cpu.json"))
    ap.add_argument("--busy", type=int, default=2, help="extra busy-loop processes")
    ap.add_argument("--only", choices=("idle", "busy"), default=None)
    args = ap.parse_args()
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover
        cores = os.cpu_count() or 1
    doc: dict = {"benchmark": "privlab demo CPU time (default settings)",
                 "date_utc": datetime.now(UTC).isoformat(timespec="seconds"),
                 "machine": {"usable_cores": cores, "cpu_count": os.cpu_count(),
                             "platform": platform.platform(), "python": sys.version.split()[0]},
                 "target_cpu_s": 60, "runs": {}}
    if args.only in (None, "idle"):
        doc["runs"]["as_is"] = run_demo()
        print(json.dumps({"as_is": doc["runs"]["as_is"]}), flush=True)
    if args.only in (None, "busy"):
        doc["runs"][f"with_{args.busy}_busy_loops"] = run_busy(args.busy)
        print(json.dumps({"busy": doc["runs"][f"with_{args.busy}_busy_loops"]}), flush=True)
    doc["within_target"] = all(r["exit_code"] == 0 and r["cpu_s"] <= 60
                               for r in doc["runs"].values())
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(doc, indent=2) + "\n")
    print(json.dumps(doc, indent=2))


if __name__ == "__main__":
    main()
