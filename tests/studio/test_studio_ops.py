"""Operations of privlab studio (issue 30, items 5-9): no session's work stalls another's
(routes compute off the event loop, jobs queued one per core), prepare-then-charge with a page
for every failure, job output written to a file, and jobs that die with the studio and are
recorded on disk."""

from __future__ import annotations

import contextlib
import errno
import html
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from studio_helpers import PEOPLE_SCHEMA, csrf_of

import privlab
from privlab.studio import StudioConfig, create_app

#: The sources under test (the studio subprocess runs these, not an installed copy).
SRC = str(Path(privlab.__file__).resolve().parents[1])
#: How the page of a job the studio's end cut short says so (`privlab.studio.jobs`).
INTERRUPTED = "interrupted: the studio stopped"
#: How long the slow part of a route takes, and the most another session's page may wait
#: meanwhile (on the loop it would wait the whole SLOW_S).
SLOW_S, BOUND_S = 2.5, 1.0
#: The access token of the studios these tests start (each client presents it once).
TOKEN = "ops-test-token-0123456789abcdef"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def serving(app: Any) -> Iterator[str]:
    """`app` served by uvicorn on one event loop in a thread (as `privlab studio` serves it;
    the TestClient would give every request a loop of its own)."""
    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port,
                                           log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.time() + 20
    while not server.started:
        assert time.time() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(20)


def studio_config(workspace: Path) -> StudioConfig:
    return StudioConfig(workspace=workspace, token=TOKEN)


def http_client(url: str) -> Any:
    """A browser session on a served studio: it opened the URL with the token once."""
    import httpx

    client = httpx.Client(base_url=url, timeout=60, follow_redirects=True)
    assert client.get("/", params={"token": TOKEN}).status_code == 200
    return client


def browser_client(app: Any, **options: Any) -> Any:
    """A browser session on `app` (in-process), after the token exchange."""
    from fastapi.testclient import TestClient

    client = TestClient(app, base_url="http://127.0.0.1:8765", **options)
    assert client.get("/", params={"token": TOKEN}).status_code == 200
    return client


def slowed(monkeypatch: Any, target: Any, name: str, started: threading.Event) -> None:
    """`target.name` made slow: it sleeps SLOW_S (signalling `started`), then runs."""
    real = getattr(target, name)

    def slow(*args: Any, **kwargs: Any) -> Any:
        started.set()
        time.sleep(SLOW_S)
        return real(*args, **kwargs)

    monkeypatch.setattr(target, name, slow)


def post_endpoints(routes: Any) -> list[Any]:
    """Every POST route of the app (an included router's routes are a list of their own in
    newer FastAPI)."""
    from fastapi.routing import APIRoute

    out: list[Any] = []
    for route in routes:
        if isinstance(route, APIRoute) and "POST" in route.methods:
            out.append(route)
        elif hasattr(route, "original_router"):
            out += post_endpoints(route.original_router.routes)
    return out


def test_no_post_route_runs_on_the_event_loop(workspace: Path) -> None:
    """Item 5, for every route (not a hand-kept list, so a route added later is checked too):
    each POST route is a plain function (FastAPI runs it in a thread) or runs in the worker
    pool (`in_worker`); none is a coroutine computing on the loop."""
    import inspect

    routes = post_endpoints(create_app(studio_config(workspace)).routes)
    assert len(routes) >= 12
    on_loop = [r.path for r in routes if inspect.iscoroutinefunction(r.endpoint)
               and not getattr(r.endpoint, "in_worker", False)]
    assert on_loop == []


@pytest.mark.parametrize("route", ["assess", "draft", "release"])
def test_a_slow_route_leaves_other_sessions_pages_responsive(workspace: Path, monkeypatch: Any,
                                                             route: str) -> None:
    """Item 5: session A's assessment / schema draft / release computes while session B's page
    is answered within BOUND_S (it waited the whole computation when routes ran on the
    loop)."""
    import privlab.schema
    from privlab.studio import protect
    from privlab.studio.routes import assess

    (workspace / "people.schema.yaml").write_text(PEOPLE_SCHEMA, encoding="utf-8")
    started = threading.Event()
    target, name, url, form = {
        "assess": (assess, "run_assessment", "/assess",
                   {"quasi_identifiers": "age,sex", "max_combination_size": "2"}),
        "draft": (privlab.schema, "draft_schema", "/schema/draft", {}),
        "release": (protect, "release", "/protect/release",
                    {"statistic": "mean", "column": "age", "epsilon": "0.5"}),
    }[route]
    slowed(monkeypatch, target, name, started)
    with serving(create_app(studio_config(workspace))) as base:
        a, b = http_client(base), http_client(base)
        csrf = csrf_of(a)
        a.post("/data/select", data={"csrf": csrf, "kind": "workspace", "path": "people.csv"})
        b.get("/")
        outcome: dict[str, Any] = {}

        def slow_request() -> None:
            t0 = time.perf_counter()
            outcome["response"] = a.post(url, data={"csrf": csrf, **form})
            outcome["seconds"] = time.perf_counter() - t0

        thread = threading.Thread(target=slow_request)
        thread.start()
        assert started.wait(30), "the slow part never ran"
        t0 = time.perf_counter()
        page = b.get("/")
        waited = time.perf_counter() - t0
        thread.join(60)
    assert page.status_code == 200
    assert outcome["response"].status_code == 200 and outcome["seconds"] >= SLOW_S
    assert waited < BOUND_S, f"session B waited {waited:.2f} s while A's {route} ran"


def test_at_most_one_job_per_core_runs_and_the_queue_is_shown(workspace: Path,
                                                              monkeypatch: Any) -> None:
    """Item 6: 8 POSTs to /choose start at most `slots` children; the rest wait in order, each
    page showing its place in the queue; a queued job cancelled never starts."""
    pytest.importorskip("torch", reason="choose-epsilon needs the [ml] extra: without it each "
                        "child fails at once and the queue drains before it can be seen")

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})  # a two-core machine
    app = create_app(studio_config(workspace))

    client = browser_client(app)
    csrf = csrf_of(client)
    client.post("/data/select", data={"csrf": csrf, "kind": "bundled", "name": "adult"})
    jids = []
    for _ in range(8):
        r = client.post("/choose", data={"csrf": csrf, "target": "salary", "epsilons": "1",
                                         "seeds": "1", "max_rows": "1000"})
        jids.append(str(r.url).rsplit("/", 1)[1])
    jobs = app.state.store.all()[0].jobs
    try:
        for _ in range(10):  # the launcher never runs more than two at once
            alive = [j for j in jobs.values() if j.process is not None
                     and j.process.poll() is None]
            assert len(alive) <= 2, len(alive)
            time.sleep(0.1)
        states = {jid: client.get(f"/jobs/{jid}/status").json() for jid in jids}
        queued = [jid for jid in jids if states[jid]["state"] == "queued"]
        assert len(queued) >= 6, states
        assert [states[j]["position"] for j in queued] == list(range(1, len(queued) + 1))
        last = client.get(f"/jobs/{jids[-1]}").text
        assert f"number {len(queued)} in the queue" in last and "Cancel the job" in last
    finally:
        for jid in reversed(jids):  # the queued ones first, so none takes a freed slot
            client.post(f"/jobs/{jid}/cancel", data={"csrf": csrf})
    assert all(client.get(f"/jobs/{jid}/status").json()["state"] == "cancelled"
               for jid in queued)
    assert all(jobs[jid].process is None for jid in queued)  # cancelled in the queue
    from privlab.studio.jobs import JobRunner

    monkeypatch.undo()
    assert JobRunner().slots == len(os.sched_getaffinity(0))


def test_a_full_disk_before_the_charge_charges_nothing_and_says_so(workspace: Path,
                                                                   monkeypatch: Any) -> None:
    """Item 7: the data export (synth) or the job's folder (model) fails with ENOSPC: an HTML
    page names the failure, nothing is charged, no job exists, and a retry charges nothing;
    once the disk has room, one charge."""
    import privlab.studio.jobs as jobs_module
    import privlab.utils.atomic as atomic

    def full(*args: Any, **kwargs: Any) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    app = create_app(studio_config(workspace))

    client = browser_client(app)
    csrf = csrf_of(client)
    client.post("/data/select", data={"csrf": csrf, "kind": "bundled", "name": "adult"})
    session = app.state.store.all()[0]
    synth = {"csrf": csrf, "method": "mst", "epsilon": "1", "delta": "1e-6", "rows": "10",
             "columns": ["age", "sex"]}
    model = {"csrf": csrf, "target": "salary", "model": "logreg", "epsilon": "1"}
    with monkeypatch.context() as m:
        m.setattr(atomic, "atomic_write_frame", full)
        m.setattr(jobs_module, "write_private", full, raising=False)
        for url, form in (("/synth", synth), ("/synth", synth), ("/model", model)):
            r = client.post(url, data=form)
            assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
            text = html.unescape(r.text)
            assert "No space left on device" in text and "nothing was charged" in text, url
            assert app.state.ledger.remaining("bundled:adult")[0] == 10.0
            assert session.jobs == {}
            assert not list((session.root / "jobs").glob("*")) if (
                session.root / "jobs").exists() else True
    r = client.post("/synth", data=synth)
    jid = str(r.url).rsplit("/", 1)[1]
    assert app.state.ledger.remaining("bundled:adult")[0] == 9.0  # one charge
    client.post(f"/jobs/{jid}/cancel", data={"csrf": csrf})


def test_an_unexpected_failure_is_a_page_not_a_text_500(workspace: Path,
                                                        monkeypatch: Any) -> None:
    """Item 7: any failure answers an HTML page (JSON for a job's status), never the bare
    text/plain 'Internal Server Error'."""

    from privlab.studio import protect

    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("the disk went away")

    monkeypatch.setattr(protect, "release", broken)
    client = browser_client(create_app(studio_config(workspace)), raise_server_exceptions=False)
    csrf = csrf_of(client)
    client.post("/data/select", data={"csrf": csrf, "kind": "bundled", "name": "adult"})
    r = client.post("/protect/release", data={"csrf": csrf, "statistic": "mean",
                                              "column": "age", "epsilon": "1"})
    assert r.status_code == 500 and r.headers["content-type"].startswith("text/html")
    assert "internal error: RuntimeError: the disk went away" in r.text
    assert 'href="/"' in r.text


#: Opens every kind of DuckDB connection privlab makes and prints whether each would draw the
#: progress bar; run under `python -c`, where DuckDB believes a person watches (no
#: `__main__.__file__`) and turns the bar on by default.
DUCKDB_CONNECTIONS = """
import sys
from pathlib import Path
import numpy as np, pandas as pd
from privlab.assess.grouped import DuckDBSource
from privlab.engines.duckdb import DuckDBEngine
from privlab.testing.gateway import BASE, write_duckdb
from privlab.synth.marginals import DuckDBMarginals

tmp = Path(sys.argv[1])
pd.DataFrame({"a": [1, 2]}).to_parquet(tmp / "t.parquet")
engine = DuckDBEngine(write_duckdb(tmp / "n.duckdb", BASE))
# the owners are kept alive: a dropped owner closes its connection (issue 33)
marginals = DuckDBMarginals(np.zeros((3, 2), dtype=int), [2, 2])
source = DuckDBSource(tmp / "t.parquet")
cons = {"marginals": marginals._con, "parquet": source.con, "engine": engine._con}
for name, con in cons.items():
    print(name, con.execute("SELECT current_setting('enable_progress_bar')").fetchall()[0][0])
try:
    engine._con.execute("SET enable_progress_bar = true")
except Exception as exc:
    print("engine locked", "locked" in str(exc))
for owner in (marginals, source, engine):
    owner.close()
"""


def test_every_duckdb_connection_has_the_progress_bar_off(tmp_path: Path) -> None:
    """Item 8: DuckDB prints its progress bar on stdout when it thinks a person watches (as
    under `python -c`); every connection privlab opens has it off (the synthesizers'
    marginals, the gateway's engine, Parquet assessment), the engine's configuration still
    locked."""
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run([sys.executable, "-c", DUCKDB_CONNECTIONS, str(tmp_path)], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n") == ["marginals False", "parquet False", "engine False",
                                      "engine locked True", ""]


def test_a_job_writes_its_result_to_a_file_whatever_else_writes_to_stdout(
        workspace: Path, monkeypatch: Any) -> None:
    """Item 8: something in the child writes to the process's stdout (DuckDB's bar is C++
    writing to fd 1; simulated by a sitecustomize module): result.json is still the command's
    JSON alone, and the job's page has its guarantee's headline; the job's files are the
    owner's only."""

    hooks = workspace.parent / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(
        "import os\nos.write(1, b'\\r[=====>      ] 42%\\r[==========>] 99%\\n')\n")
    monkeypatch.setenv("PYTHONPATH", str(hooks))
    (workspace / "people.schema.yaml").write_text(PEOPLE_SCHEMA, encoding="utf-8")
    app = create_app(studio_config(workspace))
    client = browser_client(app)
    csrf = csrf_of(client)
    client.post("/data/select", data={"csrf": csrf, "kind": "workspace", "path": "people.csv"})
    r = client.post("/synth", data={"csrf": csrf, "method": "mst", "epsilon": "1",
                                    "delta": "1e-6", "rows": "20", "columns": ["sex", "city"]})
    jid = str(r.url).rsplit("/", 1)[1]
    job = app.state.store.all()[0].jobs[jid]
    deadline = time.time() + 120
    while client.get(f"/jobs/{jid}/status").json()["state"] in ("queued", "starting",
                                                                 "running"):
        assert time.time() < deadline, (job.folder / "progress.log").read_text()
        time.sleep(0.2)
    status = client.get(f"/jobs/{jid}/status").json()
    assert status["state"] == "done", status
    assert status["headline"] == "(1, delta=1e-06)-DP"
    result = json.loads((job.folder / "result.json").read_text())
    assert result["guarantee"]["headline"] == "(1, delta=1e-06)-DP"
    assert "(1, delta=1e-06)-DP" in client.get(f"/jobs/{jid}").text
    deadline = time.time() + 5  # the launcher records the end within its poll interval
    while (record := json.loads((job.folder / "job.json").read_text()))["state"] == "running":
        assert time.time() < deadline
        time.sleep(0.05)
    assert record["state"] == "ended" and record["code"] == 0
    for name in ("job.json", "result.json", "synthetic.csv", "schema.yaml"):
        assert (job.folder / name).stat().st_mode & 0o777 == 0o600, name
    assert job.folder.stat().st_mode & 0o777 == 0o700


def test_a_queued_job_starts_when_the_running_one_ends(tmp_path: Path) -> None:
    """Item 6: with one slot, the second job waits (number 1 in the queue) and starts once the
    first has ended; both finish, each with its own result."""
    from privlab.studio.jobs import JobRunner

    data = tmp_path / "people.csv"
    data.write_text("age,sex,city,income\n" + "".join(
        f"{20 + i % 50},F,Kyiv,{1000 + i}\n" for i in range(40)), encoding="utf-8")
    runner = JobRunner(slots=1)
    jobs = [runner.prepare(tmp_path, ["release", "mean", str(data), "--column", column,
                                      "--schema", "schema.yaml", "--epsilon", "1", "--json"],
                           column, [("result.json", "result")], stdout="result.json",
                           files={"schema.yaml": PEOPLE_SCHEMA}, result="result.json")
            for column in ("age", "income")]
    for job in jobs:
        runner.submit(job)
    deadline = time.time() + 120
    while jobs[0].process is None:  # the launcher takes the first from the queue
        assert time.time() < deadline
        time.sleep(0.02)
    assert jobs[1].status()["state"] == "queued" and jobs[1].status()["position"] == 1
    while any(j.status()["state"] in ("queued", "starting", "running") for j in jobs):
        assert len([j for j in jobs if j.state == "running"]) <= 1
        assert time.time() < deadline
        time.sleep(0.05)
    assert [j.status()["state"] for j in jobs] == ["done", "done"]
    assert jobs[1].started >= jobs[0].ended
    assert [json.loads((j.folder / "result.json").read_text())["column"] for j in jobs] == [
        "age", "income"]


def children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (from /proc)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(stat.parent.name))
    return out


def gone(pid: int) -> bool:
    """The process no longer runs (absent, or a zombie awaiting a reaper)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def test_a_stopped_studio_ends_its_jobs_and_records_them_interrupted(tmp_path: Path) -> None:
    """Item 9, graceful end: shutdown kills each child's process group, queued jobs never
    start, and every record says the studio stopped."""
    from privlab.studio.jobs import JobRunner

    runner = JobRunner(slots=1)
    args = ["choose-epsilon", "adult", "--epsilons", "1", "--max-rows", "1000"]
    first = runner.prepare(tmp_path, args, "a", [])
    second = runner.prepare(tmp_path, args, "b", [])
    runner.submit(first, entry_id=7)
    runner.submit(second)
    deadline = time.time() + 20
    while first.process is None:
        assert time.time() < deadline
        time.sleep(0.05)
    assert second.status()["state"] == "queued"
    runner.shutdown()
    assert first.process.poll() is not None and second.process is None
    for job in (first, second):
        record = json.loads((job.folder / "job.json").read_text())
        assert record["state"] == "interrupted" and record["error"] == INTERRUPTED
        assert job.status()["state"] == "interrupted"
    assert json.loads((first.folder / "job.json").read_text())["entry_id"] == 7
    session = type("S", (), {"jobs": {}, "root": tmp_path})()  # the session, after a restart
    JobRunner().restore(session)
    assert {j: s.status()["state"] for j, s in session.jobs.items()} == {
        first.jid: "interrupted", second.jid: "interrupted"}


def start_studio(workspace: Path, port: int) -> subprocess.Popen:
    """`privlab studio` in its own process, once it answers."""
    import httpx

    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "PRIVLAB_STUDIO_TOKEN": TOKEN}
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.argv[0] = 'privlab'; "
         "from privlab.cli.main import run; run()", "studio", "--workspace", str(workspace),
         "--port", str(port)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 30
    while True:
        assert proc.poll() is None, proc.stderr.read().decode()
        try:
            httpx.get(f"http://127.0.0.1:{port}/static/studio.css", timeout=1)
            return proc
        except httpx.HTTPError:
            assert time.time() < deadline, "the studio did not start"
            time.sleep(0.1)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_a_killed_studio_takes_its_jobs_along_and_a_restart_shows_them_interrupted(
        workspace: Path, sig: int) -> None:
    """Item 9: SIGKILL the studio while an AIM job runs: the child is gone within seconds (no
    orphan finishing into a session nobody can see); the restarted studio records the job as
    interrupted, and its charge stays in the ledger. SIGTERM (or Ctrl-C): the studio's
    shutdown ends the job's process group and records it interrupted itself."""
    from privlab.core.ledger import BudgetLedger

    port = free_port()
    studio = start_studio(workspace, port)
    pid = None
    try:
        client = http_client(f"http://127.0.0.1:{port}")
        csrf = csrf_of(client)
        client.post("/data/select", data={"csrf": csrf, "kind": "bundled", "name": "adult"})
        r = client.post("/synth", data={"csrf": csrf, "method": "aim", "epsilon": "2",
                                        "delta": "1e-6", "rows": "100"})
        jid = str(r.url).rsplit("/", 1)[1]
        (folder,) = workspace.glob(f".privlab-studio/sessions/*/jobs/{jid}")
        deadline = time.time() + 60
        while "progress: " not in (folder / "progress.log").read_text():
            assert time.time() < deadline, "the job never got going"
            time.sleep(0.1)
        (pid,) = children(studio.pid)
        assert not gone(pid)
        studio.send_signal(sig)
        studio.wait(20)
        deadline = time.time() + 5
        while not gone(pid):
            assert time.time() < deadline, "the job outlived its studio"
            time.sleep(0.05)
        record_path = folder / "job.json"
        left = json.loads(record_path.read_text())["state"]  # as the studio left it
        assert left == ("running" if sig == signal.SIGKILL else "interrupted")
        studio = start_studio(workspace, port)  # the restart reads the records
        record = json.loads(record_path.read_text())
        assert record["state"] == "interrupted" and record["error"] == INTERRUPTED
        assert record["entry_id"] is not None
        # the job's page, for its session (kept in the session's folder across the restart)
        from privlab.studio.jobs import JobRunner

        session = type("S", (), {"jobs": {}, "root": folder.parents[1]})()
        status = JobRunner().find(session, jid).status()
        assert status["state"] == "interrupted" and status["error"] == INTERRUPTED
        ledger = BudgetLedger(str(workspace / ".privlab-studio" / "ledger.db"))
        assert ledger.remaining("bundled:adult")[0] == 8.0  # the charge stays recorded
        ledger.close()
    finally:
        studio.kill()
        studio.wait(10)
        if pid is not None and not gone(pid):  # an orphan (the failure this test catches)
            os.kill(pid, signal.SIGKILL)
