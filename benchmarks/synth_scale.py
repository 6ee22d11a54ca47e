"""AIM at scale: generated mixed tables (200k x 20, 1M x 40) through `privlab synth`, with the
wall time, CPU seconds and peak RSS of the child process that ran it.

The tables: a latent factor z ~ N(0, 1) per row drives every column (so the marginals are
correlated, as real data is), mixed types in rotation: bounded integers, bounded floats and
categoricals of 2 to 30 values. The schema declares every bound and category (public), so the
run measures AIM, not domain estimation. Data and schema are written once per shape under
--data-dir (Parquet + JSON) and reused.

Each run is `python -c "privlab.cli.main synth ..."` in a child process whose PYTHONPATH is
the source tree under test, so an old and a new commit can be alternated on the same files:
CPU seconds and peak RSS are read when the child
exits: `os.wait4` returns that child's own rusage (ru_maxrss: its peak resident set, KiB).

    python benchmarks/synth.py --scale --shapes 200000x20 --sources old=../privlab-old/src,new=src
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

KINDS = ("integer", "numeric", "categorical")


def make_table(rows: int, cols: int, seed: int = 0) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The mixed table and its declared schema (see the module docstring)."""
    gen = np.random.default_rng(seed)
    z = gen.standard_normal(rows)
    data: dict[str, Any] = {}
    columns: dict[str, Any] = {}
    for j in range(cols):
        kind = KINDS[j % 3]
        load = 0.4 + 0.5 * gen.random()  # how strongly the column follows z
        x = load * z + np.sqrt(1 - load * load) * gen.standard_normal(rows)
        name = f"{kind[:3]}{j:02d}"
        if kind == "integer":
            hi = int(gen.integers(10, 120))
            data[name] = np.clip(np.rint((x + 3) / 6 * hi), 0, hi).astype(np.int64)
            columns[name] = {"type": "integer", "bounds": [0, hi], "missing": False}
        elif kind == "numeric":
            lo, width = float(gen.integers(-50, 50)), float(gen.integers(5, 500))
            data[name] = np.clip(lo + (x + 3) / 6 * width, lo, lo + width)
            columns[name] = {"type": "numeric", "bounds": [lo, lo + width], "missing": False}
        else:
            k = int(gen.integers(2, 31))
            cuts = np.sort(gen.standard_normal(k - 1))
            cats = [f"v{i}" for i in range(k)]
            data[name] = np.array(cats, dtype=object)[np.searchsorted(cuts, x)]
            columns[name] = {"type": "categorical", "categories": cats, "missing": False}
    return pd.DataFrame(data), {"name": f"scale_{rows}x{cols}", "columns": columns}


def ensure_table(data_dir: Path, rows: int, cols: int) -> tuple[Path, Path]:
    """Write (once) the Parquet table and its JSON schema; return their paths."""
    data_dir.mkdir(parents=True, exist_ok=True)
    table, schema_path = (data_dir / f"mixed_{rows}x{cols}.parquet",
                          data_dir / f"mixed_{rows}x{cols}.schema.json")
    if not (table.exists() and schema_path.exists()):
        frame, schema = make_table(rows, cols)
        frame.to_parquet(table, index=False)
        schema_path.write_text(json.dumps(schema, indent=1), encoding="utf-8")
    return table, schema_path


def run_child(src: str, table: Path, schema: Path, epsilon: float, seed: int,
              timeout: float) -> dict[str, Any]:
    """One `privlab synth --method aim` run in a child; wall, CPU and peak RSS of that child."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "synth.csv"
        argv = ["synth", str(table), "--method", "aim", "--epsilon", str(epsilon), "--rows",
                "1000", "--out", str(out), "--schema", str(schema), "--seed", str(seed)]
        code = f"import sys; from privlab.cli.main import main; sys.exit(main({argv!r}))"
        env = dict(os.environ, PYTHONPATH=str(Path(src).resolve()))
        with open(Path(tmp) / "stderr", "w+", encoding="utf-8") as err:
            start = time.perf_counter()
            proc = subprocess.Popen([sys.executable, "-c", code], env=env, stderr=err,
                                    stdout=subprocess.DEVNULL)
            timer = threading.Timer(timeout, proc.kill)
            timer.start()
            _, status, usage = os.wait4(proc.pid, 0)  # this child's own rusage
            timer.cancel()
            wall = time.perf_counter() - start
            proc.returncode = os.waitstatus_to_exitcode(status)
            err.seek(0)
            tail = err.read()[-400:]
        rc: int | str = "killed (timeout)" if proc.returncode == -9 else proc.returncode
    return {"rc": rc, "wall_s": round(wall, 2),
            "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
            "peak_rss_gib": round(usage.ru_maxrss / 2**20, 3),  # ru_maxrss is in KiB on Linux
            "stderr_tail": tail,
            "load_average": os.getloadavg()}


def scale(shapes: list[tuple[int, int]], sources: dict[str, str], data_dir: Path,
          epsilon: float, repeats: int, seed: int, timeout: float) -> dict[str, Any]:
    """Every shape, the sources alternated `repeats` times (old, new, old, new, ...)."""
    results: dict[str, Any] = {"epsilon": epsilon, "seed": seed, "runs": []}
    for rows, cols in shapes:
        table, schema = ensure_table(data_dir, rows, cols)
        for rep in range(repeats):
            for label, src in sources.items():
                res = run_child(src, table, schema, epsilon, seed, timeout)
                res.update(shape=f"{rows}x{cols}", source=label, repeat=rep)
                results["runs"].append(res)
                print(f"{rows}x{cols} {label:6s} rc={res['rc']} wall {res['wall_s']:8.1f} s  "
                      f"CPU {res['cpu_s']:8.1f} s  peak {res['peak_rss_gib']:.2f} GiB  "
                      f"load {res['load_average'][0]:.2f}", flush=True)
    return results
