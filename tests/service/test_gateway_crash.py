"""Crash test: the server process dies after drawing the noise and before answering.

Nothing may be released without a charge; after a restart the charge is still there (and
audited as `charged_outcome_unknown`), and restarts keep every charge.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from gw_fixtures import KEY_A, analysts

from privlab.errors import PrivlabError
from privlab.query import Client
from privlab.query.demo import adult_config

# Child server whose gateway dies (os._exit, no cleanup) right after the real noise is drawn.
CRASHING_SERVER = """
import os, sys, uvicorn
import privlab.query.gateway as gw
from privlab.query.config import load_config
from privlab.service import create_app
real = gw.answer
def noise_then_die(*args, **kw):
    out = real(*args, **kw)
    if kw.get("seeded") is False:  # the real computation, not the pre-charge dry run
        os._exit(70)
    return out
gw.answer = noise_then_die
app = create_app(gateway=gw.Gateway(load_config(sys.argv[1])))
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")
"""
SERVE = "from privlab.cli.main import run; run()"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(args: list[str], log: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    handle = log.open("ab")
    proc = subprocess.Popen([sys.executable, *[a.replace("{PORT}", str(port)) for a in args]],
                            stdout=handle, stderr=subprocess.STDOUT,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            Client(url, "x", timeout=2).health()
            return proc, url
        except PrivlabError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise AssertionError(f"server did not start: {log.read_text()[-2000:]}") from None
            time.sleep(0.2)


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("apart", [True, False], ids=["audit-apart", "one-database"])
def test_crash_between_noise_and_response(adult_duckdb: str, tmp_path: Path,
                                          apart: bool) -> None:
    """The process dies after the noise, before answering. Ledger and audit log in two
    databases: the charge committed first and survives, reconciled as
    `charged_outcome_unknown`. In one database (the default): the charge and the audit row
    commit together after the computation, so the crash leaves neither."""
    pytest.importorskip("uvicorn", reason="needs the server extra: pip install -e '.[server]'")
    config = tmp_path / "gateway.yaml"
    people: dict[str, Any] = analysts(epsilon=2.0, bob_tables=("adult",))
    audit = str(tmp_path / "audit.db") if apart else None
    config.write_text(yaml.safe_dump(adult_config(adult_duckdb, str(tmp_path / "ledger.db"),
                                                  people, audit=audit)))
    log = tmp_path / "server.log"
    sql = "SELECT sex, COUNT(*) FROM adult GROUP BY sex"

    proc, url = start(["-c", CRASHING_SERVER, str(config), "{PORT}"], log)
    try:
        with pytest.raises(PrivlabError, match="unreachable|dropped"):
            Client(url, KEY_A).query(sql, 0.5)
        assert proc.wait(timeout=30) == 70  # it died after the noise, before answering
    finally:
        stop(proc)

    spent = 0.5 if apart else 0.0
    lost = [("charged_outcome_unknown", sql)] if apart else []
    serve = ["-c", SERVE, "serve", "--config", str(config), "--port", "{PORT}"]
    proc, url = start(serve, log)
    try:
        c = Client(url, KEY_A)
        assert c.budget()["spent_epsilon"] == spent  # a charge survives the crash or none
        events = c.history()                          # was made; never an unaudited one
        assert [(e["decision"], e["sql"]) for e in events] == lost
        assert c.query(sql, 0.5)["remaining_budget"]["epsilon"] == 2.0 - spent - 0.5
    finally:
        stop(proc)

    proc, url = start(serve, log)  # a clean restart keeps every charge
    try:
        c = Client(url, KEY_A)
        assert c.budget()["spent_epsilon"] == spent + 0.5
        assert [e["decision"] for e in c.history()] == ["released"] + [d for d, _ in lost]
    finally:
        stop(proc)
