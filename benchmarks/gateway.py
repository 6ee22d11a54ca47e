"""Benchmark of the DP query gateway, measured in ONE run on loopback (bounded in count and time).

1. Speed, DuckDB and PostgreSQL (Adult, 30,162 rows): for COUNT, SUM and GROUP BY queries,
   - in process: `Gateway.query` (plan, charge the ledger, run, noise, audit) vs executing the
     same SQL directly on the same engine connection;
   - over HTTP: `privlab serve` vs a bare FastAPI app that executes the same SQL directly
     on the same DuckDB file (same uvicorn, same worker count, same keep-alive clients),
     the two phases alternated `--rounds` times (default 3): per phase the server's CPU per
     request (its process tree from /proc, not the clients'), throughput and p50 / p99
     latency under C concurrent clients; medians over the rounds and their ratios. Every
     request carries a different literal, so the gateway parses and plans every query.
   `--part layers`: where the gateway's time goes over HTTP, as server CPU per request
   (one worker, COUNT): the gateway app with its query path stubbed (HTTP, front door,
   routing, strict body parsing), with the query path replaced by the bare engine call, and
   the full DP path; the bare FastAPI baseline beside them. `--part inprocess`: the
   in-process comparison alone (DuckDB, no HTTP, seconds); `--part plan`: Planner.plan alone.
2. Accuracy next to SmartNoise SQL at equal epsilon: the same Adult queries answered R times by
   both; mean absolute error against the true answer (+- its standard error). SmartNoise's
   privacy cost of each query (`get_privacy_cost`) is the epsilon given to privlab, so both
   spend the same total epsilon (SmartNoise also spends a delta; privlab spends none here).

SmartNoise pins old opendp / pandas, so it runs in its own virtualenv, in a subprocess running
this same file (`--snsql-worker`). Create it once:

    python3 -m venv /tmp/snsql-venv && /tmp/snsql-venv/bin/pip install smartnoise-sql

Usage:
    .venv/bin/python benchmarks/gateway.py [--part all|speed|accuracy|plan|layers|inprocess]
        [--clients 8] [--workers 1] [--analysts 8] [--seconds 4] [--max-requests 3000]
        [--repeats 40] [--inproc 200]
        [--pg-url postgresql+psycopg://privlab:privlab@127.0.0.1:5433/privlab_test]
        [--snsql-python /tmp/snsql-venv/bin/python] [--json OUT.json]
PostgreSQL is used when --pg-url or PRIVLAB_TEST_POSTGRES_URL is set (a database
`privlab_bench` is created there); otherwise that part is skipped and says so.
"""

import argparse
import http.client
import itertools
import json
import math
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

KEY = "pk_bench_analyst_key_0000000000000"


def bench_key(i: int) -> str:
    return f"{KEY}_{i}"
SPEED_QUERIES = {
    "count": "SELECT COUNT(*) FROM adult WHERE fnlwgt > {i}",
    "sum": "SELECT SUM(\"hours-per-week\") FROM adult WHERE sex = 'Female' AND fnlwgt > {i}",
    "group_by": "SELECT race, COUNT(*), AVG(age) FROM adult WHERE fnlwgt > {i} GROUP BY race",
}
# (privlab SQL, SmartNoise SQL): same query, SmartNoise wants schema.table and no hyphens
ACCURACY_QUERIES = [
    ("SELECT COUNT(*) FROM adult", "SELECT COUNT(*) FROM public.adult"),
    ("SELECT COUNT(*) FROM adult WHERE age > 40",
     "SELECT COUNT(*) FROM public.adult WHERE age > 40"),
    ("SELECT SUM(age) FROM adult", "SELECT SUM(age) FROM public.adult"),
    ("SELECT AVG(age) FROM adult", "SELECT AVG(age) FROM public.adult"),
    ("SELECT sex, COUNT(*) FROM adult GROUP BY sex",
     "SELECT sex, COUNT(*) FROM public.adult GROUP BY sex"),
    ("SELECT race, AVG(\"hours-per-week\") FROM adult GROUP BY race",
     "SELECT race, AVG(hours_per_week) FROM public.adult GROUP BY race"),
    ("SELECT COUNT(*), AVG(age) FROM adult WHERE sex = 'Female'",
     "SELECT COUNT(*), AVG(age) FROM public.adult WHERE sex = 'Female'"),
]
ADULT_CSV_COLUMNS = [
    "age", "workclass", "fnlwgt", "education", "education-num", "marital-status",
    "occupation", "relationship", "race", "sex", "capital-gain", "capital-loss",
    "hours-per-week", "native-country", "salary",
]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --------------------------------------------------------------------------- raw baseline

def raw_app_factory() -> Any:
    """The baseline: the same SQL executed directly on the same engine, no DP, no checks."""
    from fastapi import FastAPI, Request

    from privlab.engines import open_engine

    engine = open_engine(os.environ["PRIVLAB_BENCH_DATABASE"])
    app = FastAPI()

    @app.post("/raw")
    async def raw(request: Request) -> Any:
        body = await request.json()
        from starlette.concurrency import run_in_threadpool

        rows = await run_in_threadpool(engine.run, body["sql"])
        return {"rows": [list(r) for r in rows]}

    return app


def wait_up(port: int, proc: subprocess.Popen[bytes], timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/healthz")
            conn.getresponse().read()
            return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError("server did not start")


def start_gateway(config: Path, workers: int) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-c", "from privlab.cli.main import run; run()", "serve", "--config",
         str(config), "--port", str(port), "--workers", str(workers)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_up(port, proc)
    return proc, port


def start_raw(database: str, workers: int) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    code = ("import uvicorn, sys; uvicorn.run('gateway:raw_app_factory', factory=True, "
            f"host='127.0.0.1', port={port}, workers={workers}, log_level='warning', "
            f"access_log=False, app_dir={str(Path(__file__).parent)!r})")
    env = {**os.environ, "PRIVLAB_BENCH_DATABASE": database}
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    # the raw app has no /healthz: any HTTP answer means it is up
    deadline = time.monotonic() + 90
    while True:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/")
            conn.getresponse().read()
            return proc, port
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("raw server did not start") from None
            time.sleep(0.2)


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()


def load(port: int, path: str, make_body: Any, headers: list[dict[str, str]], clients: int,
         seconds: float, max_requests: int, offset: int) -> dict[str, Any]:
    """Closed loop: `clients` threads, each with a keep-alive connection, until the time or
    the request budget runs out. Latency is measured at the client."""
    counter = itertools.count()
    latencies: list[float] = []
    errors = [0]
    lock = threading.Lock()
    stop_at = time.monotonic() + seconds

    def worker(c: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        my_headers = headers[c % len(headers)]
        mine: list[float] = []
        while time.monotonic() < stop_at:
            i = next(counter)
            if i >= max_requests:
                break
            body = json.dumps(make_body(offset + i)).encode()
            t0 = time.perf_counter()
            conn.request("POST", path, body=body, headers=my_headers)
            resp = conn.getresponse()
            resp.read()
            mine.append(time.perf_counter() - t0)
            if resp.status != 200:
                with lock:
                    errors[0] += 1
        conn.close()
        with lock:
            latencies.extend(mine)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(c,)) for c in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t0
    return {"requests": len(latencies), "seconds": round(elapsed, 3),
            "qps": round(len(latencies) / elapsed, 1),
            "p50_ms": round(1e3 * pct(latencies, 50), 2),
            "p99_ms": round(1e3 * pct(latencies, 99), 2), "errors": errors[0]}


def in_process(config: Any, n: int) -> dict[str, Any]:
    """Gateway.query vs the same SQL on the same engine connection, sequentially."""
    from privlab.query.gateway import Gateway

    gw = Gateway(config)
    analyst = gw.config.analysts["bench"]
    out: dict[str, Any] = {}
    for name, template in SPEED_QUERIES.items():
        for cached in (True, False):
            raw_t, dp_t = [], []
            for i in range(n):
                sql = template.format(i=0 if cached else 10_000 + i)
                t0 = time.perf_counter()
                gw.engine.run(sql)
                raw_t.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                gw.query(analyst, sql, 0.01)
                dp_t.append(time.perf_counter() - t0)
            out[f"{name}{'' if cached else ' (new SQL each time)'}"] = {
                "raw_p50_ms": round(1e3 * statistics.median(raw_t), 3),
                "gateway_p50_ms": round(1e3 * statistics.median(dp_t), 3),
                "gateway_p99_ms": round(1e3 * pct(dp_t, 99), 3),
                "ratio_p50": round(statistics.median(dp_t) / statistics.median(raw_t), 2)}
    gw.close()
    return out


def plan_speed(database: str, workdir: Path, n: int) -> dict[str, Any]:
    """Planner.plan p50 for queries differing only in a WHERE literal (a dashboard's
    stream): with the normalised plan cache, and without it (a fresh template store each
    time: tokenize + parse + plan)."""
    from privlab.query.config import hash_key, parse_config
    from privlab.query.demo import adult_config
    from privlab.query.planner import Planner

    cfg = parse_config(adult_config(database, str(workdir / "plan-ledger.db"),
                                    {"bench": {"key_sha256": hash_key(KEY), "epsilon": 1.0}}))
    out: dict[str, Any] = {}
    for name, template in SPEED_QUERIES.items():
        reuse, fresh = Planner(cfg), Planner(cfg)
        t_reuse, t_fresh = [], []
        for i in range(n):
            sql = template.format(i=100_000 + i)
            t0 = time.perf_counter()
            reuse.plan(sql)
            t_reuse.append(time.perf_counter() - t0)
            fresh._templates.clear()
            t0 = time.perf_counter()
            fresh.plan(sql)
            t_fresh.append(time.perf_counter() - t0)
        out[name] = {"reuse_p50_us": round(1e6 * statistics.median(t_reuse), 1),
                     "full_p50_us": round(1e6 * statistics.median(t_fresh), 1)}
    return out


def _people(args: argparse.Namespace) -> dict[str, Any]:
    from privlab.query.config import hash_key

    people = {"bench": {"key_sha256": hash_key(KEY), "epsilon": 1e6}}
    people.update({f"bench{i}": {"key_sha256": hash_key(bench_key(i)), "epsilon": 1e6}
                   for i in range(args.analysts)})
    return people


def _raw_config(database: str, ledger: str, args: argparse.Namespace) -> dict[str, Any]:
    from privlab.query.demo import adult_config

    return adult_config(database, ledger, _people(args),
                        limits={"rate_per_second": 1e6, "burst": 1_000_000,
                                "max_epsilon_per_query": 5})


def _inprocess_config(raw_cfg: dict[str, Any], workdir: Path, backend: str) -> Any:
    """In process: a Python-built config has no audit key, so its audit rows go to a log of
    their own (`privlab serve` verifies its keyed log at start-up). A SQLite ledger gets a
    file of its own too, holding that log (the default one-commit setup, as served)."""
    from privlab.query.config import parse_config

    if "://" not in raw_cfg["ledger"]:
        return parse_config(dict(raw_cfg, ledger=str(workdir / f"inproc-ledger-{backend}.db")))
    return parse_config(dict(raw_cfg, audit=str(workdir / f"inproc-audit-{backend}.db")))


def inprocess_config(database: str, ledger: str, workdir: Path,
                     args: argparse.Namespace) -> Any:
    return _inprocess_config(_raw_config(database, ledger, args), workdir, "duckdb")


def speed(backend: str, database: str, ledger: str, workdir: Path,
          args: argparse.Namespace) -> dict[str, Any]:
    import yaml

    raw_cfg = _raw_config(database, ledger, args)
    config_path = workdir / f"gateway-{backend}.yaml"
    config_path.write_text(yaml.safe_dump(raw_cfg))
    result: dict[str, Any] = {"in_process": in_process(
        _inprocess_config(raw_cfg, workdir, backend), args.inproc)}
    auth = [{"Authorization": f"Bearer {bench_key(i)}", "Content-Type": "application/json"}
            for i in range(args.analysts)]
    plain = [{"Content-Type": "application/json"}]
    gw_proc, gw_port = start_gateway(config_path, args.workers)
    raw_proc, raw_port = start_raw(database, args.workers)
    http_results: dict[str, Any] = {}
    try:
        offset = 0
        for name, template in SPEED_QUERIES.items():
            def dp_body(i: int, t: str = template) -> dict[str, Any]:
                return {"sql": t.format(i=i), "epsilon": 0.01}

            def raw_body(i: int, t: str = template) -> dict[str, Any]:
                return {"sql": t.format(i=i)}

            load(gw_port, "/v1/queries", dp_body, auth, args.clients, 1.0, 50, 900_000)
            load(raw_port, "/raw", raw_body, plain, args.clients, 1.0, 50, 900_000)
            rounds: list[dict[str, Any]] = []
            for _ in range(args.rounds):  # raw and gateway alternated: load drifts cancel
                raw = phase(raw_proc, raw_port, "/raw", raw_body, plain, args, offset)
                dp = phase(gw_proc, gw_port, "/v1/queries", dp_body, auth, args, offset)
                offset += args.max_requests
                rounds.append({"raw": raw, "gateway": dp})
            http_results[name] = summary = summarise(rounds)
            print(f"  {backend} {name}: server CPU/request gateway "
                  f"{summary['gateway']['server_cpu_ms_per_request']} ms vs raw "
                  f"{summary['raw']['server_cpu_ms_per_request']} ms = x"
                  f"{summary['cpu_ratio']} | q/s {summary['gateway']['qps']} vs "
                  f"{summary['raw']['qps']} (x{summary['throughput_ratio']}) | p50 "
                  f"{summary['gateway']['p50_ms']} vs {summary['raw']['p50_ms']} ms "
                  f"(x{summary['latency_ratio_p50']})", flush=True)
    finally:
        stop(gw_proc)
        stop(raw_proc)
    result["http"] = http_results
    return result


def phase(proc: subprocess.Popen[bytes], port: int, path: str, make_body: Any,
          headers: list[dict[str, str]], args: argparse.Namespace,
          offset: int) -> dict[str, Any]:
    """One load phase, with the CPU the server's process tree (not the clients) spent."""
    pids = _process_tree(proc.pid)
    before = _cpu_seconds(pids)
    r = load(port, path, make_body, headers, args.clients, args.seconds, args.max_requests,
             offset)
    used = _cpu_seconds(pids) - before
    r["server_cpu_ms_per_request"] = round(1e3 * used / max(r["requests"], 1), 3)
    return r


def summarise(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over the alternated rounds, their ratios (gateway / raw), and every round."""
    keys = ("server_cpu_ms_per_request", "qps", "p50_ms", "p99_ms")
    med = {side: {k: round(statistics.median(r[side][k] for r in rounds), 3) for k in keys}
           for side in ("raw", "gateway")}
    cpu = [r["gateway"]["server_cpu_ms_per_request"] / r["raw"]["server_cpu_ms_per_request"]
           for r in rounds if r["raw"]["server_cpu_ms_per_request"] > 0]
    return {**med,
            "cpu_ratio": round(statistics.median(cpu), 2) if cpu else None,
            "cpu_ratio_per_round": [round(x, 2) for x in cpu],
            "throughput_ratio": round(med["raw"]["qps"] / med["gateway"]["qps"], 2),
            "latency_ratio_p50": round(med["gateway"]["p50_ms"] / med["raw"]["p50_ms"], 2),
            "errors": sum(r[s]["errors"] for r in rounds for s in ("raw", "gateway")),
            "rounds": rounds}


def _process_tree(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            children.setdefault(int(stat[1]), []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def _cpu_seconds(pids: list[int]) -> float:
    """User + system CPU of these processes so far (Linux /proc)."""
    total = 0
    for p in pids:
        try:
            stat = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(stat[11]) + int(stat[12])
    return total / os.sysconf("SC_CLK_TCK")


LAYER_STUBS = {
    # the gateway app, its query path replaced: what HTTP + front door + parsing cost
    "http layer only (query path stubbed)":
        "Gateway.query_json = lambda self, *a, **k: b'{\"rows\":[[1]]}'",
    # the gateway app answering with the bare engine: HTTP + the same DuckDB statement
    "http layer + engine (no DP path)":
        "Gateway.query_json = lambda self, a, sql, *r, **k: "
        "__import__('json').dumps({'rows': self.engine.run(sql)}).encode()",
    "full gateway": "pass",
}


def layers(database: str, workdir: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Server CPU milliseconds per COUNT request, one worker process (so a stub patched into
    it applies), fixed request count: the gateway's layers and the raw baseline."""
    import yaml

    from privlab.query.config import hash_key
    from privlab.query.demo import adult_config

    people = {f"bench{i}": {"key_sha256": hash_key(bench_key(i)), "epsilon": 1e6}
              for i in range(args.analysts)}
    cfg = adult_config(database, str(workdir / "layers-ledger.db"), people,
                       limits={"rate_per_second": 1e6, "burst": 1_000_000,
                               "max_epsilon_per_query": 5})
    config_path = workdir / "gateway-layers.yaml"
    config_path.write_text(yaml.safe_dump(cfg))
    auth = [{"Authorization": f"Bearer {bench_key(i)}", "Content-Type": "application/json"}
            for i in range(args.analysts)]
    template = SPEED_QUERIES["count"]
    out: dict[str, Any] = {}

    def measure(proc: subprocess.Popen[bytes], port: int, path: str, body: Any,
                headers: list[dict[str, str]]) -> dict[str, Any]:
        load(port, path, body, headers, args.clients, 1.0, 200, 900_000)  # warm up
        pids = _process_tree(proc.pid)
        before = _cpu_seconds(pids)
        r = load(port, path, body, headers, args.clients, 60.0, args.max_requests, 0)
        used = _cpu_seconds(pids) - before
        stop(proc)
        return {"server_cpu_ms_per_request": round(1e3 * used / r["requests"], 3),
                "qps": r["qps"], "p50_ms": r["p50_ms"], "requests": r["requests"]}

    for name, stub in LAYER_STUBS.items():
        port = free_port()
        code = (f"from privlab.query.gateway import Gateway\n{stub}\n"
                "import sys\nfrom privlab.cli.main import run\n"
                f"sys.argv = ['privlab', 'serve', '--config', {str(config_path)!r}, "
                f"'--port', '{port}', '--workers', '1']\nrun()")
        proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        wait_up(port, proc)
        out[name] = measure(proc, port, "/v1/queries",
                            lambda i: {"sql": template.format(i=i), "epsilon": 0.01}, auth)
        print(f"  {name}: {out[name]}", flush=True)
    proc, port = start_raw(database, 1)
    out["raw FastAPI baseline"] = measure(proc, port, "/raw",
                                          lambda i: {"sql": template.format(i=i)},
                                          [{"Content-Type": "application/json"}])
    print(f"  raw FastAPI baseline: {out['raw FastAPI baseline']}", flush=True)
    return out


def audit_append(workdir: Path, n: int) -> dict[str, Any]:
    """CPU microseconds per audit row (SQLite, keyed, checkpointed), appended one at a time
    by one writer, and by two writers on the same host taking turns (each append then
    checks the other's row before chaining: the multi-worker case)."""
    from privlab.query.audit import AuditLog

    result = {"columns": ["n"], "rows": [[30162.4]]}
    out: dict[str, Any] = {}
    for name, writers in (("one writer", 1), ("two writers taking turns", 2)):
        target = str(workdir / f"audit-append-{writers}.db")
        logs = [AuditLog(target, key=b"k" * 40, checkpoint=workdir / f"head-{writers}.json")
                for _ in range(writers)]
        for i in range(50):  # warm up
            logs[i % writers].record(f"w{i}", "released", analyst="a", sql="SELECT 1",
                                     epsilon=0.01, result=result)
        walls = []
        cpu = time.process_time()
        for i in range(n):
            t = time.perf_counter()
            logs[i % writers].record(f"q{i}", "released", analyst="bench",
                                     sql=f"SELECT COUNT(*) FROM adult WHERE age > {i}",
                                     epsilon=0.01, ledger_entry_id=i, epsilon_spent=0.01,
                                     delta_spent=0.0, result=result)
            walls.append(time.perf_counter() - t)
        cpu = time.process_time() - cpu
        out[name] = {"rows": n, "cpu_us_per_row": round(1e6 * cpu / n, 1),
                     "p50_ms": round(1e3 * statistics.median(walls), 3)}
        for log in logs:
            log.close()
    return out


def prepare_postgres(url: str) -> str:
    import sqlalchemy as sa

    from privlab.query.demo import load_adult_postgres

    admin = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql("DROP DATABASE IF EXISTS privlab_bench WITH (FORCE)")
        conn.exec_driver_sql("CREATE DATABASE privlab_bench")
    admin.dispose()
    bench = url.rsplit("/", 1)[0] + "/privlab_bench"
    load_adult_postgres(bench, schema="public")
    return bench


# --------------------------------------------------------------------------- accuracy

def snsql_worker(spec_text: str) -> None:
    """Runs inside the SmartNoise venv: answers each query `repeats` times, prints JSON."""
    import pandas as pd
    import snsql
    from snsql import Privacy

    spec = json.loads(spec_text)
    df = pd.read_csv(spec["csv"], skipinitialspace=True, na_values=["?"], header=0)
    df.columns = spec["columns"]
    df = df.dropna().reset_index(drop=True)
    df = df.rename(columns={c: c.replace("-", "_") for c in df.columns})
    df = df[["age", "hours_per_week", "sex", "race"]]
    meta = {"Database": {"public": {"adult": {
        "row_privacy": True, "censor_dims": False,
        "age": {"type": "int", "lower": 17, "upper": 90, "nullable": False},
        "hours_per_week": {"type": "int", "lower": 1, "upper": 99, "nullable": False},
        "sex": {"type": "string", "nullable": False},
        "race": {"type": "string", "nullable": False}}}}}
    reader = snsql.from_df(df, privacy=Privacy(epsilon=spec["epsilon"], delta=spec["delta"]),
                           metadata=meta)
    out = []
    for sql in spec["queries"]:
        cost = [float(c) for c in reader.get_privacy_cost(sql)]
        t0 = time.perf_counter()
        answers = [reader.execute(sql)[1:] for _ in range(spec["repeats"])]
        out.append({"cost": cost, "answers": [[list(map(_plain, r)) for r in a]
                                              for a in answers],
                    "seconds_per_query": (time.perf_counter() - t0) / spec["repeats"]})
    print(json.dumps(out))


def _plain(v: Any) -> Any:
    if hasattr(v, "item"):
        return v.item()
    return v


def _cells(rows: list[list[Any]], n_keys: int) -> dict[tuple[Any, ...], list[float]]:
    return {tuple(r[:n_keys]): [float(x) for x in r[n_keys:]] for r in rows}


def accuracy(args: argparse.Namespace, workdir: Path, database: str) -> dict[str, Any]:
    from privlab.data.datasets import bundled_path
    from privlab.query.config import hash_key, parse_config
    from privlab.query.demo import adult_config
    from privlab.query.gateway import Gateway

    spec = {"csv": str(bundled_path("adult", "adult.csv.gz")), "columns": ADULT_CSV_COLUMNS,
            "epsilon": args.epsilon, "delta": 1e-6, "repeats": args.repeats,
            "queries": [q[1] for q in ACCURACY_QUERIES]}
    python = args.snsql_python
    if not Path(python).exists():
        return {"skipped": f"no SmartNoise venv at {python} (see the module docstring)"}
    t0 = time.perf_counter()
    proc = subprocess.run([python, __file__, "--snsql-worker", json.dumps(spec)],
                          capture_output=True, text=True, timeout=args.snsql_timeout)
    if proc.returncode != 0:
        return {"skipped": f"SmartNoise worker failed: {proc.stderr.strip()[-400:]}"}
    sn = json.loads(proc.stdout.strip().splitlines()[-1])
    sn_seconds = time.perf_counter() - t0
    cfg = parse_config(adult_config(database, str(workdir / "acc-ledger.db"),
                                    {"acc": {"key_sha256": hash_key(KEY), "epsilon": 1e6}},
                                    limits={"max_epsilon_per_query": 100}))
    gw = Gateway(cfg)
    analyst = cfg.analysts["acc"]
    out = []
    for (ours_sql, _sn_sql), theirs in zip(ACCURACY_QUERIES, sn, strict=True):
        n_keys = 1 if "GROUP BY" in ours_sql else 0
        truth = _cells([list(r) for r in gw.engine.run(ours_sql)], n_keys)
        eps_total = theirs["cost"][0]
        n_values = len(next(iter(truth.values())))
        ours_err: list[list[float]] = [[] for _ in range(n_values)]
        theirs_err: list[list[float]] = [[] for _ in range(n_values)]
        ours_time = []

        def errors(got: dict[tuple[Any, ...], list[float]], into: list[list[float]],
                   truth: dict[tuple[Any, ...], list[float]] = truth) -> None:
            for j, errs in enumerate(into):
                errs.append(statistics.fmean(abs(got[k][j] - truth[k][j]) for k in truth))

        for _ in range(args.repeats_privlab):
            t = time.perf_counter()
            ans = gw.query(analyst, ours_sql, eps_total)
            ours_time.append(time.perf_counter() - t)
            errors(_cells(ans["rows"], n_keys), ours_err)
        for rows in theirs["answers"]:
            errors(_cells(rows, n_keys), theirs_err)
        for j in range(n_values):
            mo, so = statistics.fmean(ours_err[j]), statistics.stdev(ours_err[j]) / math.sqrt(
                len(ours_err[j]))
            mt, st = statistics.fmean(theirs_err[j]), statistics.stdev(theirs_err[j]) / math.sqrt(
                len(theirs_err[j]))
            out.append({"query": ours_sql, "column": j, "epsilon": eps_total,
                        "smartnoise_delta": theirs["cost"][1], "privlab_mae": mo,
                        "privlab_se": so, "smartnoise_mae": mt, "smartnoise_se": st,
                        "ratio": mo / mt,
                        "privlab_ms_per_query": 1e3 * statistics.median(ours_time),
                        "smartnoise_ms_per_query": 1e3 * theirs["seconds_per_query"]})
            print(f"  eps={eps_total:g} col {j}: MAE privlab {mo:.4g} +- {so:.2g} | SmartNoise "
                  f"{mt:.4g} +- {st:.2g} | ratio {mo / mt:.2f}  {ours_sql}", flush=True)
    gw.close()
    return {"repeats_smartnoise": args.repeats, "repeats_privlab": args.repeats_privlab,
            "snsql_seconds": round(sn_seconds, 1), "queries": out}


# --------------------------------------------------------------------------- main

def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--part", choices=("all", "speed", "accuracy", "plan", "layers",
                                      "audit-append", "inprocess"),
                   default="all")
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--analysts", type=int, default=8, help="client i acts as analyst i %% N")
    p.add_argument("--seconds", type=float, default=4.0, help="per load phase")
    p.add_argument("--rounds", type=int, default=3,
                   help="raw / gateway phases alternated this many times per query")
    p.add_argument("--max-requests", type=int, default=3000, help="per load phase")
    p.add_argument("--inproc", type=int, default=200, help="sequential queries per case")
    p.add_argument("--repeats", type=int, default=40, help="SmartNoise repeats per query")
    p.add_argument("--repeats-privlab", type=int, default=400,
                   help="privlab repeats per query (cheap: a tighter estimate of its MAE)")
    p.add_argument("--epsilon", type=float, default=1.0, help="SmartNoise epsilon per query")
    p.add_argument("--pg-url", default=os.environ.get("PRIVLAB_TEST_POSTGRES_URL"))
    p.add_argument("--snsql-python", default="/tmp/snsql-venv/bin/python")
    p.add_argument("--snsql-timeout", type=float, default=600)
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--ledger-dir", type=Path, default=None,
                   help="where the DuckDB run's SQLite ledger lives (diagnosis: /dev/shm "
                        "shows the cost of the ledger's fsync; not a durable setting)")
    p.add_argument("--no-postgres", action="store_true")
    p.add_argument("--snsql-worker", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.snsql_worker is not None:
        snsql_worker(args.snsql_worker)
        return

    from privlab.query.demo import load_adult_duckdb

    started = time.perf_counter()
    results: dict[str, Any] = {"machine": {"cpus": os.cpu_count(),
                                           "load_average": os.getloadavg()},
                               "settings": {k: v for k, v in vars(args).items()
                                            if k not in ("snsql_worker", "json", "ledger_dir")}}
    results["settings"]["json"] = str(args.json) if args.json else None
    results["settings"]["ledger_dir"] = str(args.ledger_dir) if args.ledger_dir else None
    with tempfile.TemporaryDirectory(prefix="privlab-bench-") as tmp:
        work = Path(tmp)
        duck = str(load_adult_duckdb(work / "adult.duckdb"))
        if args.part in ("all", "speed"):
            print("speed, DuckDB (ledger: SQLite)", flush=True)
            ledger_dir = args.ledger_dir or work
            results["duckdb"] = speed("duckdb", duck, str(Path(ledger_dir) / "ledger.db"), work,
                                      args)
            if args.pg_url and not args.no_postgres:
                print("speed, PostgreSQL (ledger: PostgreSQL)", flush=True)
                bench = prepare_postgres(args.pg_url)
                results["postgres"] = speed("postgres", bench, bench, work, args)
            else:
                results["postgres"] = {"skipped": "no --pg-url / PRIVLAB_TEST_POSTGRES_URL"}
                print("  PostgreSQL skipped: no --pg-url / PRIVLAB_TEST_POSTGRES_URL")
        if args.part == "inprocess":  # the in-process half of `speed` alone (no HTTP)
            print("in process, DuckDB (ledger: SQLite): Gateway.query vs the bare engine",
                  flush=True)
            results["duckdb"] = {"in_process": in_process(
                inprocess_config(duck, str(work / "ledger.db"), work, args), args.inproc)}
        if args.part in ("all", "layers"):
            print("layers: server CPU per COUNT request, one worker", flush=True)
            results["layers"] = layers(duck, work, args)
        if args.part in ("all", "audit-append"):
            print("audit appends: CPU per row, one writer and two sharing the log",
                  flush=True)
            results["audit_append"] = audit_append(work, args.inproc * 10)
            print(f"  {results['audit_append']}", flush=True)
        if args.part in ("all", "speed", "plan"):
            print("planning: new literal each time, plan reuse by normalised SQL on / off",
                  flush=True)
            results["planning"] = plan_speed(duck, work, args.inproc * 10)
            print(f"  {results['planning']}", flush=True)
        if args.part in ("all", "accuracy"):
            print(f"accuracy vs SmartNoise SQL ({args.repeats} repeats per query)", flush=True)
            results["accuracy"] = accuracy(args, work, duck)
            if "skipped" in results["accuracy"]:
                print(f"  skipped: {results['accuracy']['skipped']}")
    results["seconds"] = round(time.perf_counter() - started, 1)
    results["machine"]["load_average_end"] = os.getloadavg()
    print(json.dumps({k: v for k, v in results.items() if k in ("duckdb", "postgres")},
                     indent=1)[:6000])
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    print(f"done in {results['seconds']} s; load average {os.getloadavg()}")


if __name__ == "__main__":
    main()
