"""Benchmark of privlab studio's page renders (target: p95 < 200 ms), idle and while another
browser session's AIM synthetic-data job runs (DP Wizard: 1.5 s -> 72.6 s under a job).

One run on loopback: the studio under uvicorn in a thread, on a temporary workspace; session A
chose bundled Adult and requests each page R times (home, the Protect page with its public
preview for three statistics, results, assess, synthetic data, schema); then session B starts
an AIM job on Adult (its own process at nice 10, see privlab.studio.jobs) and session A's
requests are timed again while it runs; the job is cancelled at the end. Times are wall-clock
per request (HTTP keep-alive, one client), p50 / p95 / max over all pages.

Usage:
    .venv/bin/python benchmarks/studio.py [--repeats 100] [--compare-thread] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import uvicorn

from privlab.studio import StudioConfig, create_app

PAGES = ["/", "/protect", "/protect?statistic=histogram&column=education&epsilon=0.5",
         "/protect?statistic=mean&column=hours-per-week&epsilon=1&expected_rows=30000",
         "/results", "/assess", "/synth", "/schema"]
AIM_COLUMNS = ["age", "workclass", "education", "marital-status", "occupation", "relationship",
               "race", "sex", "hours-per-week", "salary"]


def serve(app) -> tuple[str, uvicorn.Server, threading.Thread]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    return f"http://127.0.0.1:{port}", server, thread


def csrf(client: httpx.Client) -> str:
    return re.search(r'name="csrf" value="([^"]+)"', client.get("/").text).group(1)


def timed(client: httpx.Client, repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        for page in PAGES:
            t = time.perf_counter()
            r = client.get(page)
            out.append(time.perf_counter() - t)
            assert r.status_code == 200, (page, r.status_code)
    return out


def thread_contrast(client: httpx.Client, repeats: int) -> dict[str, object]:
    """The same AIM fit in a thread of this (the server's) process: what a job in-process
    does to everyone's pages."""
    from privlab.data.datasets import load_adult
    from privlab.schema import bundled_schema
    from privlab.synth import make_synthesizer

    frame = load_adult()[AIM_COLUMNS]
    synth = make_synthesizer("aim", schema=bundled_schema("adult").select(AIM_COLUMNS),
                             on_invalid="coerce")
    stop = threading.Event()

    class Stopped(Exception):
        pass

    def progress(stage: str, done: int, total: int) -> None:
        if stop.is_set():
            raise Stopped  # ends the fit at its next progress report

    synth.progress = progress

    def fit() -> None:
        with contextlib.suppress(Stopped):
            synth.fit(synth.conform(frame), 1.0, 1e-6)

    worker = threading.Thread(target=fit, daemon=True)
    worker.start()
    time.sleep(3)
    alive = worker.is_alive()
    out: dict[str, object] = dict(summary(timed(client, repeats)))
    out["job_alive_throughout"] = alive and worker.is_alive()
    stop.set()
    worker.join(120)
    return out


def cpu_seconds(pid: int) -> float:
    """user + system CPU seconds of a process (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def summary(times: list[float]) -> dict[str, float]:
    ms = sorted(1000 * t for t in times)
    return {"requests": len(ms), "p50_ms": round(statistics.median(ms), 1),
            "p95_ms": round(ms[int(0.95 * (len(ms) - 1))], 1), "max_ms": round(ms[-1], 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=100)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--compare-thread", action="store_true",
                    help="Also time the pages while AIM runs in a thread of the server's own "
                         "process (the design the studio avoids), for contrast.")
    args = ap.parse_args()
    ws = Path(tempfile.mkdtemp(prefix="studio-bench-"))
    app = create_app(StudioConfig(workspace=ws, budget_epsilon=100))
    url, server, thread = serve(app)
    a = httpx.Client(base_url=url, timeout=120, follow_redirects=True,
                     headers={"X-Privlab-Token": app.state.config.token})
    a.post("/data/select", data={"csrf": csrf(a), "kind": "bundled", "name": "adult"})
    a.post("/protect/release", data={"csrf": csrf(a), "statistic": "mean", "column": "age",
                                     "epsilon": "1"})
    timed(a, 2)  # warm caches (templates, the bundled table)
    idle = summary(timed(a, args.repeats))
    b = httpx.Client(base_url=url, timeout=120, follow_redirects=True,
                     headers={"X-Privlab-Token": app.state.config.token})
    b.post("/data/select", data={"csrf": csrf(b), "kind": "bundled", "name": "adult"})
    r = b.post("/synth", data={"csrf": csrf(b), "method": "aim", "columns": AIM_COLUMNS,
                               "epsilon": "1", "delta": "1e-6", "rows": "1000"})
    jid = str(r.url).rsplit("/", 1)[1]
    deadline = time.monotonic() + 120
    while True:  # measure only once the job is fitting (its first progress line: "domain")
        before = b.get(f"/jobs/{jid}/status").json()
        if before["state"] == "running" and before["stage"] != "starting":
            break
        assert before["state"] in ("starting", "running"), before
        assert time.monotonic() < deadline, "the AIM job did not start fitting in 120 s"
        time.sleep(0.5)
    pid = next(j.process.pid for sess in app.state.store.all() for j in sess.jobs.values())
    cpu0, t0 = cpu_seconds(pid), time.perf_counter()
    busy = summary(timed(a, args.repeats))
    cpu1, t1 = cpu_seconds(pid), time.perf_counter()
    after = b.get(f"/jobs/{jid}/status").json()
    b.post(f"/jobs/{jid}/cancel", data={"csrf": csrf(b)})
    in_thread = None
    if args.compare_thread:
        in_thread = thread_contrast(a, args.repeats)
    server.should_exit = True
    thread.join(10)
    result = {"machine": {"cpus": os.cpu_count(), "load_avg_1m": os.getloadavg()[0]},
              "pages": PAGES, "repeats": args.repeats, "idle": idle,
              "during_aim_job": busy,
              "aim_job": {"columns": len(AIM_COLUMNS), "state_before": before["state"],
                          "stage_before": before["stage"], "state_after": after["state"],
                          "stage_after": after["stage"],
                          "cpu_s_while_measured": round(cpu1 - cpu0, 2),
                          "wall_s_measured": round(t1 - t0, 2)},
              "contrast_aim_in_a_server_thread": in_thread,
              "target_p95_ms": 200,
              "ok": idle["p95_ms"] < 200 and busy["p95_ms"] < 200
              and after["state"] == "running"}
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n", encoding="utf-8")
    sys.exit(0 if result["ok"] else 1)


if __name__ == "__main__":
    main()
