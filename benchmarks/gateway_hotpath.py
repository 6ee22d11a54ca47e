"""Where a gateway query's CPU goes, in process: old sources vs new, alternated (issue 32).

Each phase is a fresh subprocess running `Gateway.query_json` sequentially on the Adult
DuckDB (SQLite ledger holding the audit log: the one-commit path, as served), with the
process CPU of three segments timed around their functions: the engine (`engine.run`), the
noise (`answer`) and the joint charge + audit commit (the group commit's batch function);
"rest" is everything else (planning, validation, the budget view, JSON). Phases alternate
old, new, old, new, ... so a change in machine load hits both sides alike.

    git archive <base> src | tar -x -C /tmp/gwbase
    .venv/bin/python benchmarks/gateway_hotpath.py --old /tmp/gwbase/src --new src \
        --pairs 3 --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

_PHASE = r"""
import functools, json, sys, tempfile, time
from pathlib import Path
QUERY, N = sys.argv[1], int(sys.argv[2])
sys.path.insert(0, sys.argv[3])
import gateway as B
import privlab.query.gateway as G
from privlab.query.demo import load_adult_duckdb
work = Path(tempfile.mkdtemp(prefix="privlab-hotpath-"))
duck = str(load_adult_duckdb(work / "adult.duckdb"))
cfg = B.inprocess_config(duck, str(work / "ledger.db"), work, type("A", (), {"analysts": 8}))
gw = G.Gateway(cfg)
analyst = gw.config.analysts["bench"]
spent = {}
def timed(name, f):
    @functools.wraps(f)
    def wrapper(*args, **kwargs):
        t = time.process_time()
        try:
            return f(*args, **kwargs)
        finally:
            spent[name] = spent.get(name, 0.0) + time.process_time() - t
    return wrapper
gw.engine.run = timed("engine", gw.engine.run)
gw.joint._group.write_many = timed("commit", gw.joint._group.write_many)
G.answer = timed("noise", G.answer)
template = B.SPEED_QUERIES[QUERY]
for i in range(200):
    gw.query_json(analyst, template.format(i=i), 0.01)
spent.clear()
t = time.process_time()
for i in range(N):
    gw.query_json(analyst, template.format(i=1000 + i), 0.01)
total = time.process_time() - t
gw.close()
out = {k: round(1e6 * v / N, 1) for k, v in spent.items()}
out["total"] = round(1e6 * total / N, 1)
out["rest"] = round(out["total"] - sum(v for k, v in out.items() if k != "total"), 1)
print(json.dumps(out))
"""


def phase(src: str, query: str, n: int) -> dict[str, float]:
    """One subprocess on `src`: microseconds of CPU per query, by segment."""
    env = {**os.environ, "PYTHONPATH": str(Path(src).resolve())}
    done = subprocess.run([sys.executable, "-c", _PHASE, query, str(n),
                           str(Path(__file__).parent)], env=env, capture_output=True,
                          text=True, check=True)
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--old", required=True, help="the anchor's src folder")
    p.add_argument("--new", default=str(Path(__file__).parent.parent / "src"))
    p.add_argument("--pairs", type=int, default=3)
    p.add_argument("--queries", type=int, default=3000, help="per phase")
    p.add_argument("--query", default="count", choices=("count", "sum", "group_by"))
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args()
    runs: dict[str, list[dict[str, float]]] = {"old": [], "new": []}
    load = [os.getloadavg()]
    for _ in range(args.pairs):
        for side in ("old", "new"):
            runs[side].append(phase(getattr(args, side), args.query, args.queries))
            print(f"{side}: {runs[side][-1]}", flush=True)
    load.append(os.getloadavg())
    medians = {side: {k: statistics.median(r[k] for r in rs) for k in rs[0]}
               for side, rs in runs.items()}
    ratio = round(medians["new"]["total"] / medians["old"]["total"], 3)
    print(f"median CPU per {args.query}: old {medians['old']['total']} us, new "
          f"{medians['new']['total']} us (new / old = {ratio})")
    if args.json:
        args.json.write_text(json.dumps({"settings": {k: str(v) for k, v in vars(args).items()},
                                         "load_average_start_end": load, "runs": runs,
                                         "medians_us": medians, "new_over_old": ratio},
                                        indent=1))


if __name__ == "__main__":
    main()
