"""`privlab assess --schema` on the grouped path, timed against the same run without a schema
and against the pandas path with the schema (docs/assess.md, "A declared schema").

Builds an Adult replica of --rows rows (`benchmarks/assess.py`'s `replicate_adult`: Adult's
complete rows tiled, numeric attributes jittered) as one Parquet file, then runs each command
once as a child process and reports its wall time and CPU time (user + system of the child)
with the 1-minute load average before each run:

    .venv/bin/python benchmarks/assess_schema.py --rows 1000000

The two runs with the schema (`--on-invalid coerce`: the replica's jitter pushes a few capital
gains past the declared bound) must give the same attributes, or the script exits 1.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from assess import replicate_adult  # noqa: E402

#: The replica's jitter pushes a few capital gains past the declared 99999: coerce clamps them
#: (refuse would stop at the first), so both schema runs do the full conforming work.
SCHEMA = ["--schema", "adult", "--on-invalid", "coerce"]
RUNS = {"duckdb --schema adult": ["--engine", "duckdb", *SCHEMA],
        "duckdb, no schema": ["--engine", "duckdb"],
        "pandas --schema adult": ["--engine", "pandas", *SCHEMA]}
CLI = "import sys; from privlab.cli.main import main; sys.exit(main(sys.argv[1:]))"


def timed(argv: list[str]) -> tuple[dict, float, float, float]:
    """(JSON, wall s, CPU s of the child, load average before) of one `privlab` run."""
    load = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", CLI, *argv, "--json"], check=True,
                         capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return json.loads(out.stdout), wall, cpu, load


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "adult.parquet"
        replicate_adult(args.rows).to_parquet(path, index=False)
        results, distinct = [], {}
        for name, opts in RUNS.items():
            doc, wall, cpu, load = timed(["assess", str(path), *opts])
            distinct[name] = [(a["name"], a["distinct"], a["k"], round(a["richness"], 9))
                              for a in doc["attributes"]]
            results.append({"run": name, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
                            "load_1min": round(load, 2)})
    print(json.dumps({"rows": args.rows, "cpus": os.cpu_count(), "runs": results}, indent=1))
    same = distinct["duckdb --schema adult"] == distinct["pandas --schema adult"]
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
