"""A real uvicorn on loopback: the budget race under load, and the CLI client against it."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from gw_fixtures import ADULT_ANALYST_KEYS, live_adult_config, serve_on_loopback

from privlab.cli.main import main
from privlab.errors import BudgetExceededError
from privlab.query import Client
from privlab.query.gateway import Gateway
from privlab.service import create_app

N_ANALYSTS, N_CLIENTS, N_QUERIES = 5, 50, 20
BUDGET, PER_QUERY = 1.0, 0.1  # exactly 10 queries fit (the ledger adds decimals exactly)
QUERIES = [
    "SELECT COUNT(*) FROM adult WHERE age > 40",
    "SELECT SUM(\"hours-per-week\") FROM adult WHERE sex = 'Female'",
    "SELECT race, COUNT(*), AVG(age) FROM adult GROUP BY race",
]


@pytest.fixture(scope="module")
def live(adult_duckdb: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    d = tmp_path_factory.mktemp("live")
    cfg = live_adult_config(adult_duckdb, str(d / "ledger.db"), N_ANALYSTS, BUDGET)
    gateway = Gateway(cfg)
    with serve_on_loopback(create_app(gateway=gateway), backlog=512) as url:
        yield {"url": url, "gateway": gateway}


def test_concurrent_clients_never_overspend(live: dict[str, Any]) -> None:
    url = live["url"]
    outcomes: Counter[tuple[int, str]] = Counter()
    lock = threading.Lock()

    def client_run(i: int) -> None:
        who = i % N_ANALYSTS
        c = Client(url, ADULT_ANALYST_KEYS[who], timeout=60)
        for j in range(N_QUERIES):
            try:
                c.query(QUERIES[(i + j) % len(QUERIES)], PER_QUERY)
                result = "released"
            except BudgetExceededError:
                result = "budget_exceeded"
            with lock:
                outcomes[(who, result)] += 1
        c.close()

    start = time.monotonic()
    with ThreadPoolExecutor(N_CLIENTS) as pool:
        list(pool.map(client_run, range(N_CLIENTS), timeout=120))
    elapsed = time.monotonic() - start
    total = N_CLIENTS * N_QUERIES
    assert sum(outcomes.values()) == total
    gw: Gateway = live["gateway"]
    for who in range(N_ANALYSTS):
        name = f"analyst{who}"
        # never more than the budget allows, and no budget lost to the race either
        assert outcomes[(who, "released")] == round(BUDGET / PER_QUERY)
        status = gw.ledger.status(name)
        assert str(status.spent_epsilon_exact) == "1"
        assert status.n_charges == round(BUDGET / PER_QUERY)
    assert gw.ledger.verify().ok
    assert gw.audit.verify() == []
    decisions = Counter(r.decision for r in gw.audit.all())
    assert decisions == {"released": N_ANALYSTS * 10, "budget_exceeded": total - N_ANALYSTS * 10}
    print(f"\n{total} requests from {N_CLIENTS} clients in {elapsed:.2f} s "
          f"({total / elapsed:.0f} req/s)")


def test_cli_query_against_the_live_server(live: dict[str, Any],
                                           capsys: pytest.CaptureFixture[str],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    url = live["url"]
    key = ADULT_ANALYST_KEYS[N_ANALYSTS]  # a spare analyst with a fresh budget
    code = main(["query", "--url", url, "--key", key, "--json", "-e", "0.5",
                 "SELECT sex, COUNT(*) AS n FROM adult GROUP BY sex"])
    assert code == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["columns"] == ["sex", "n"] and [r[0] for r in doc["rows"]] == ["Female", "Male"]
    monkeypatch.setenv("PRIVLAB_API_KEY", key)
    assert main(["query", "--url", url, "-e", "0.5", "SELECT COUNT(*) FROM adult"]) == 0
    assert "guarantee" in capsys.readouterr().out
    assert main(["query", "--url", url, "--budget", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["spent_epsilon"] == 1.0
    assert main(["query", "--url", url, "-e", "0.5", "SELECT * FROM adult"]) == 2
    assert "row-level" in capsys.readouterr().err
    assert main(["query", "--url", url, "-e", "100", "SELECT COUNT(*) FROM adult"]) == 2
    assert main(["query", "--url", url, "--key", "wrong", "--budget"]) == 1
    assert "unknown API key" in capsys.readouterr().err
    assert main(["query", "--url", url, "--history", "--json"]) == 0
    history = json.loads(capsys.readouterr().out)
    assert [h["decision"] for h in history][:2] == ["refused", "refused"]


def test_serve_helpers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("uvicorn", reason="needs the server extra: pip install -e '.[server]'")
    assert main(["serve", "--new-key", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    from privlab.query.config import hash_key

    assert doc["key"].startswith("pk_") and doc["key_sha256"] == hash_key(doc["key"])
    assert main(["serve"]) == 2
    assert "--config is required" in capsys.readouterr().err
    assert main(["serve", "--config", str(tmp_path / "missing.yaml")]) == 2
