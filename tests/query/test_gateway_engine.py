"""Gateway end to end on DuckDB (ledger on SQLite) and PostgreSQL (ledger on PostgreSQL)."""

from __future__ import annotations

import contextlib
import copy
import math
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from gw_fixtures import PEOPLE, SMALL_JOINS, SMALL_TABLES, VISITS, adult_cfg, small_config

from privlab.core.ledger import BudgetLedger
from privlab.errors import BudgetExceededError
from privlab.query.demo import adult_frame
from privlab.query.gateway import Gateway, QueryFailed
from privlab.query.planner import QueryRefused


@pytest.fixture(scope="module")
def adult() -> Any:
    return adult_frame()


def adult_gateway(b: dict[str, Any], epsilon: float = 50.0, rng: int | None = 7,
                  **kw: Any) -> Gateway:
    cfg = adult_cfg(b["adult"], b["ledger"], schema=b["adult_schema"], epsilon=epsilon,
                    suffix=b["suffix"], **kw)
    return Gateway(cfg, rng=rng)


def small_gateway(b: dict[str, Any], epsilon: float = 50.0, rng: int | None = 7) -> Gateway:
    cfg = small_config(b["small"], b["ledger"], schema=b["small_schema"], epsilon=epsilon,
                       suffix=b["suffix"])
    return Gateway(cfg, rng=rng)


def alice(g: Gateway) -> Any:
    return next(a for n, a in g.config.analysts.items() if n.startswith("alice"))


def test_answers_are_close_to_the_truth(backend: dict[str, Any], adult: Any) -> None:
    g = adult_gateway(backend)
    a = alice(g)
    r = g.query(a, "SELECT COUNT(*) AS n, SUM(age), AVG(\"hours-per-week\") FROM adult "
                   "WHERE sex = 'Female' AND age BETWEEN 20 AND 60", 3.0)
    women = adult[(adult.sex == "Female") & adult.age.between(20, 60)]
    n, s, h = r["rows"][0]
    info = {c["name"]: c for c in r["column_info"]}
    # seeded noise: within 3x the 95% interval (deterministic for this seed)
    assert abs(n - len(women)) <= 3 * info["n"]["confidence_interval_95"]
    assert abs(s - women.age.sum()) <= 3 * info["sum_age"]["confidence_interval_95"]
    assert abs(h - women["hours-per-week"].mean()) < 0.5
    assert r["guarantee"]["epsilon"] == 3.0 and r["guarantee"]["is_dp"]
    assert r["remaining_budget"]["epsilon"] == pytest.approx(47.0)
    assert r["epsilon_spent"] == 3.0 and r["delta_spent"] == 0.0


def test_group_by_releases_the_whole_public_domain(backend: dict[str, Any], adult: Any) -> None:
    g = adult_gateway(backend)
    r = g.query(alice(g), "SELECT workclass, COUNT(*) AS n FROM adult GROUP BY workclass", 2.0)
    keys = [row[0] for row in r["rows"]]
    assert tuple(keys) == g.config.tables["adult"].columns["workclass"].domain
    assert "Never-worked" not in set(adult.workclass)  # absent from the data, still released
    truth = Counter(adult.workclass)
    ci = r["column_info"][1]["confidence_interval_95"]
    for key, n in r["rows"]:
        assert abs(n - truth.get(key, 0)) <= 3 * ci


def test_quantiles_and_partition_selection(backend: dict[str, Any], adult: Any) -> None:
    g = adult_gateway(backend)
    a = alice(g)
    r = g.query(a, "SELECT sex, MEDIAN(age) FROM adult GROUP BY sex", 2.0)
    for sex, med in r["rows"]:
        assert abs(med - adult[adult.sex == sex].age.median()) <= 1.5
    r = g.query(a, 'SELECT "native-country", COUNT(*) AS n FROM adult '
                   'GROUP BY "native-country" ORDER BY n DESC', 1.0, 1e-6)
    released = {row[0]: row[1] for row in r["rows"]}
    truth = Counter(adult["native-country"])
    assert r["rows"][0][0] == "United-States"
    assert r["guarantee"]["delta"] == 1e-6
    for key in released:
        assert truth[key] >= 5  # rare countries (the threshold is ~15) are never released
    assert {k for k, v in truth.items() if v >= 60} <= set(released)


def test_contribution_bounding_and_joins(backend: dict[str, Any]) -> None:
    g = small_gateway(backend)
    per_person = Counter(p for p, _, _ in VISITS)
    plan = g.planner.plan("SELECT COUNT(*), COUNT(DISTINCT person_id) FROM visits")
    exact = g.engine.run(plan.sql, plan.params)[0]
    assert exact[0] == sum(min(n, 3) for n in per_person.values())  # <= 3 rows per person
    assert exact[-1] == len(per_person)
    # the heavy contributor (person 1, 50+ visits of 100) adds at most 3 * 100 to the sum
    plan = g.planner.plan("SELECT SUM(amount) FROM visits WHERE person_id = 1")
    assert g.engine.run(plan.sql, plan.params)[0][-1] <= 300
    # private-private join on the unit, and a public lookup table
    plan = g.planner.plan("SELECT p.region, COUNT(*) FROM visits v JOIN people p "
                          "ON v.person_id = p.id GROUP BY p.region")
    rows = dict((r[0], r[1]) for r in g.engine.run(plan.sql, plan.params))
    regions = {pid: reg for pid, _, reg in PEOPLE}
    expected = Counter()
    for pid, n in per_person.items():
        expected[regions[pid]] += min(n, 3)
    assert rows == dict(expected)
    r = g.query(alice(g), "SELECT c.country, COUNT(*), AVG(v.amount) FROM visits v JOIN cities c "
                          "ON v.city = c.city GROUP BY c.country", 2.0)
    assert [row[0] for row in r["rows"]] == ["TR", "UA"]
    assert r["guarantee"]["neighbouring"] == "user"


def test_budget_is_charged_and_enforced(backend: dict[str, Any]) -> None:
    g = small_gateway(backend, epsilon=1.0)
    a = alice(g)
    for _ in range(4):
        g.query(a, "SELECT COUNT(*) FROM people", 0.25)
    assert g.budget(a)["remaining_epsilon"] == 0.0
    with pytest.raises(BudgetExceededError):
        g.query(a, "SELECT COUNT(*) FROM people", 0.01)
    history = g.history(a)
    assert [h["decision"] for h in history] == ["budget_exceeded"] + ["released"] * 4
    assert len(g.ledger.history(a.principal)) == 4
    assert g.ledger.verify().ok and g.audit.verify() == []


def test_concurrent_queries_never_overspend(backend: dict[str, Any]) -> None:
    """The budget race without HTTP: 40 queries of 0.1 from 16 threads on a budget of 1."""
    g = small_gateway(backend, epsilon=1.0, rng=None)
    a = alice(g)

    def one(_: int) -> str:
        try:
            g.query(a, "SELECT region, COUNT(*) FROM people GROUP BY region", 0.1)
            return "released"
        except BudgetExceededError:
            return "refused"

    with ThreadPoolExecutor(16) as pool:
        results = Counter(pool.map(one, range(40)))
    assert results == {"released": 10, "refused": 30}
    assert str(g.ledger.status(a.principal).spent_epsilon_exact) == "1"
    assert g.ledger.verify().ok and g.audit.verify() == []


def test_refusals_cost_nothing_and_are_audited(backend: dict[str, Any]) -> None:
    g = small_gateway(backend, epsilon=1.0)
    a = alice(g)
    bob = next(v for n, v in g.config.analysts.items() if n.startswith("bob"))
    with pytest.raises(QueryRefused):
        g.query(a, "SELECT * FROM people", 0.5)
    with pytest.raises(QueryRefused, match="per-query limit"):
        g.query(a, "SELECT COUNT(*) FROM people", 11.0)
    with pytest.raises(QueryRefused, match="not declared or not open to you"):
        g.query(bob, "SELECT COUNT(*) FROM visits", 0.5)
    assert g.ledger.history(a.principal) == [] and g.ledger.history(bob.principal) == []
    assert [h["decision"] for h in g.history(a)] == ["refused", "refused"]
    assert [h["decision"] for h in g.history(bob)] == ["refused"]


def test_hidden_and_missing_tables_read_alike_in_answers_and_history(
        backend: dict[str, Any]) -> None:
    """Regression (issue 22.5): bob may query `people` only. A declared table he may not
    query (`visits`) and one that does not exist (`visitz`) get the same status, text (up
    to the name typed), audit decision and charge (none)."""
    g = small_gateway(backend, epsilon=1.0)
    bob = next(v for n, v in g.config.analysts.items() if n.startswith("bob"))
    texts = []
    for name in ("visits", "visitz"):
        for sql in (f"SELECT COUNT(*) FROM {name}",
                    f"SELECT COUNT(*) FROM people JOIN {name} ON people.id = {name}.person_id"):
            with pytest.raises(QueryRefused) as info:
                g.query(bob, sql, 0.5)
            assert info.value.status_code == 400
            texts.append(str(info.value).replace(repr(name), "'T'"))
    assert texts[:2] == texts[2:]
    assert g.ledger.history(bob.principal) == []
    history = g.history(bob)
    assert [h["decision"] for h in history] == ["refused"] * 4
    assert len({h["reason"].replace("'visits'", "'T'").replace("'visitz'", "'T'")
                for h in history}) == 1


def test_nul_bytes_are_audited_and_charged_as_text(backend: dict[str, Any]) -> None:
    """PostgreSQL text cannot hold NUL: a query carrying one is still refused or answered and
    audited (as the characters \\x00), never a database error."""
    g = small_gateway(backend, epsilon=5.0)
    a = alice(g)
    with pytest.raises(QueryRefused):
        g.query(a, "SELECT COUNT(*) FROM people\x00; DROP TABLE people", 0.5)
    with contextlib.suppress(QueryRefused):  # answered or refused: either is fine here
        g.query(a, "SELECT COUNT(*) FROM people WHERE city = 'Ank\x00ara'", 0.5)
    rows = g.history(a)
    assert rows and all("\x00" not in (h["sql"] or "") for h in rows)
    assert any("\\x00" in (h["sql"] or "") for h in rows)
    assert all("\x00" not in e.description for e in g.ledger.history(a.principal))
    assert g.audit.verify() == []


def test_failure_after_the_charge_keeps_the_charge(backend: dict[str, Any],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    g = small_gateway(backend)
    a = alice(g)

    def boom(*_args: Any, **_kw: Any) -> Any:
        raise RuntimeError("disk on fire: row 17 has value 42")

    ok = g.query(a, "SELECT COUNT(*) FROM people", 0.5)
    monkeypatch.setattr(g.engine, "run", boom)
    out = g.query(a, "SELECT COUNT(*) FROM people", 0.5)
    # the failure is answered like a success: same keys, charge and guarantee; the values
    # come from the mechanism on the empty result (a count near 0, not near 40)
    assert "fire" not in str(out) and "value 42" not in str(out)
    assert set(out) == set(ok) and out["columns"] == ok["columns"]
    assert out["guarantee"] == ok["guarantee"] and out["column_info"] == ok["column_info"]
    assert out["epsilon_spent"] == 0.5 and abs(out["rows"][0][0]) < 30
    assert len(g.ledger.history(a.principal)) == 2
    event = g.history(a)[0]
    # the analyst's view cannot tell; the operator's audit row can
    assert event["decision"] == "released" and event["reason"] is None
    assert event["ledger_entry_id"] is not None
    raw = g.audit.get(out["query_id"])
    assert [r.decision for r in raw] == ["released_fallback"]
    assert "RuntimeError" in (raw[0].reason or "") and "fire" not in (raw[0].reason or "")


def test_restart_reconciles_charges_without_an_audit_row(backend: dict[str, Any],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    g = small_gateway(backend)
    g.joint = None  # the two-commit path (a ledger and an audit log in two databases)
    a = alice(g)
    original = g.audit.record

    def fail_release(query_id: str, decision: str, **kw: Any) -> int:
        if decision == "released":
            raise OSError("audit disk full")
        return original(query_id, decision, **kw)

    monkeypatch.setattr(g.audit, "record", fail_release)
    with pytest.raises(QueryFailed, match="withheld"):
        g.query(a, "SELECT COUNT(*) FROM people", 0.5)
    monkeypatch.undo()
    g.close()
    # the "error" row was written by the failure path; simulate a crash where even that
    # is lost by checking a fresh gateway adds nothing twice and keeps the charge
    g2 = small_gateway(backend)
    assert g2.budget(a)["spent_epsilon"] == 0.5
    assert g2.reconcile() == 0


def test_crash_between_noise_and_answer_is_reconciled(backend: dict[str, Any],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    import privlab.query.gateway as gw_module

    g = small_gateway(backend)
    g.joint = None  # the two-commit path (a ledger and an audit log in two databases)
    a = alice(g)
    sql = "SELECT COUNT(*) FROM people WHERE age > 30"
    g.query(a, sql, 0.5)  # warm: the dry run of this (query, budget) is cached
    real_answer = gw_module.answer

    class Crash(BaseException):
        """Stands for the process dying: nothing after it runs."""

    def noise_then_die(*args: Any, **kw: Any) -> Any:
        real_answer(*args, **kw)  # the noisy answer exists ...
        raise Crash  # ... and the process dies before it is audited or sent

    monkeypatch.setattr(gw_module, "answer", noise_then_die)
    with pytest.raises(Crash):
        g.query(a, sql, 0.5)
    monkeypatch.undo()
    assert [h["decision"] for h in g.history(a)] == ["released"]  # only the first one
    g.close()
    g2 = small_gateway(backend)  # restart: the charge is found and audited
    events = g2.history(a)
    assert [e["decision"] for e in events] == ["charged_outcome_unknown", "released"]
    assert events[0]["sql"] == sql
    assert g2.budget(a)["spent_epsilon"] == 1.0


def test_one_commit_crash_before_the_commit_leaves_nothing(
        backend: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """One database for both (the default): the answer is computed, then its charge and
    audit row commit together. A process dying in between leaves neither: nothing was
    charged, nothing was shown, nothing is left to reconcile."""
    import privlab.query.gateway as gw_module

    g = small_gateway(backend)
    assert g.joint is not None
    a = alice(g)
    sql = "SELECT COUNT(*) FROM people WHERE age > 30"
    g.query(a, sql, 0.5)
    real_answer = gw_module.answer

    class Crash(BaseException):
        """Stands for the process dying: nothing after it runs."""

    def noise_then_die(*args: Any, **kw: Any) -> Any:
        real_answer(*args, **kw)
        raise Crash

    monkeypatch.setattr(gw_module, "answer", noise_then_die)
    with pytest.raises(Crash):
        g.query(a, sql, 0.5)
    monkeypatch.undo()
    g.engine.close()
    g.close()
    g2 = small_gateway(backend)
    assert g2.reconcile() == 0
    assert [e["decision"] for e in g2.history(a)] == ["released"]
    assert g2.budget(a)["spent_epsilon"] == 0.5
    g2.close()


def test_one_commit_audit_failure_withholds_and_charges_nothing(
        backend: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """A fault inside the joint transaction (after the charge and the audit row were
    written, before COMMIT) rolls both back: no answer, no charge, no release row."""
    g = small_gateway(backend)
    a = alice(g)
    assert g.joint is not None

    def disk_full() -> None:
        raise OSError("disk full")

    monkeypatch.setattr(g.joint, "_in_transaction_hook", disk_full)
    before = len(g.audit.all())  # PostgreSQL: one log shared by the tests
    with pytest.raises(QueryFailed, match="nothing was released"):
        g.query(a, "SELECT COUNT(*) FROM people", 0.5)
    assert g.budget(a)["spent_epsilon"] == 0.0
    assert g.ledger.history(a.principal) == []
    assert [r.decision for r in g.audit.all()[before:]] == ["error"]
    monkeypatch.undo()
    r = g.query(a, "SELECT COUNT(*) FROM people", 0.5)
    assert [x.decision for x in g.audit.all()[before:]] == ["error", "released"]
    assert g.audit.get(r["query_id"])[0].ledger_entry_id == r["ledger_entry_id"]
    assert g.audit.verify() == []
    g.close()


def test_unseeded_gateway_uses_the_csprng(backend: dict[str, Any]) -> None:
    g = small_gateway(backend, rng=None)
    r = g.query(alice(g), "SELECT COUNT(*) FROM people", 1.0)
    assert not any("seeded" in n for n in r["guarantee"]["notes"])
    assert math.isfinite(r["rows"][0][0])


def test_ledger_is_the_shared_budget_ledger(backend: dict[str, Any]) -> None:
    g = small_gateway(backend)
    assert isinstance(g.ledger, BudgetLedger)
    g.query(alice(g), "SELECT COUNT(*) FROM people", 0.5)
    entry = g.ledger.history(alice(g).principal)[-1]
    assert entry.description.startswith("privlab gateway query ")
    assert entry.guarantee["epsilon"] == 0.5


@pytest.mark.parametrize(("sql", "epsilon", "delta", "mechanism"), [
    ("SELECT COUNT(*), SUM(age) FROM people", 1.0, 1e-200, "gaussian"),
    ("SELECT COUNT(*) FROM people", 1.0, 5e-324, "gaussian"),
    ("SELECT city, COUNT(*) FROM visits GROUP BY city", 5.0, 5e-324, None),
    ("SELECT city, COUNT(*), AVG(amount) FROM visits GROUP BY city", 1.0, 1e-300, "laplace"),
])
def test_tiny_deltas_are_refused_before_the_charge(backend: dict[str, Any], sql: str,
                                                   epsilon: float, delta: float,
                                                   mechanism: str | None) -> None:
    """Regression (issue 22.4): the Gaussian mechanism with delta 1e-200 overflowed while
    calibrating (OverflowError: HTTP 500), and partition selection with max_rows 3 and
    delta 5e-324 took log(0) computing its threshold (ValueError: 500). Now a delta below
    1e-30 is a 400 naming the floor, uncharged; at the floor both are answered."""
    tables = copy.deepcopy(SMALL_TABLES)
    del tables["visits"]["columns"]["city"]["domain"]  # partition selection only
    g = Gateway(small_config(backend["small"], backend["ledger"], schema=backend["small_schema"],
                             epsilon=50.0, suffix=backend["suffix"], tables=tables), rng=7)
    a = alice(g)
    with pytest.raises(QueryRefused, match=r"is below 1e-30, the smallest delta"):
        g.query(a, sql, epsilon, delta, mechanism)
    assert g.ledger.history(a.principal) == []
    floor = 1e-30
    if mechanism == "gaussian":
        # the discrete Gaussian's float64 acceptance step costs up to ~1e-14 per draw, charged
        # inside delta (docs/guarantees.md): at the gateway's floor the Gaussian is refused by
        # the sampler's own check, still before the charge; it answers from a delta above it
        with pytest.raises(QueryRefused, match=r"too small for \d+ discrete-Gaussian draws"):
            g.query(a, sql, epsilon, floor, mechanism)
        assert g.ledger.history(a.principal) == []
        floor = 1e-9
    out = g.query(a, sql, epsilon, floor, mechanism)
    assert out["delta_spent"] == floor and out["epsilon_spent"] == epsilon
    decisions = [r.decision for r in g.audit.all() if r.analyst == a.name]
    assert decisions == ["refused"] * (2 if mechanism == "gaussian" else 1) + ["released"]


REGION_SUM = ("SELECT region, SUM(amount) FROM visits JOIN people "
              "ON visits.person_id = people.id GROUP BY region")


@pytest.mark.parametrize(("epsilon", "delta"), [(1e-10, 1e-10), (1e-30, 0.5)])
def test_uncalibratable_noise_is_refused_on_the_library_path(small_duckdb: str, tmp_path: Any,
                                                             epsilon: float,
                                                             delta: float) -> None:
    """Regression: DPQuery ran the calibration dry run without the gateway's catch, so the
    Gaussian calibration's root finder failing for extreme parameters reached a library
    caller as a raw ValueError ("f(a) and f(b) must have different signs") or RuntimeError
    ("Failed to converge"); the gateway did not catch the RuntimeError either (HTTP 500).
    Both now build `measurement.measure_query`: a one-line QueryRefused, nothing charged."""
    # DPQuery's planner parses SQL with sqlglot (the server extra): a core-only install skips
    pytest.importorskip("sqlglot", reason="needs the server extra: pip install -e '.[server]'")
    from privlab.engines.duckdb import DuckDBEngine
    from privlab.query.runner import DPQuery

    ledger = BudgetLedger(tmp_path / "lib.db")
    ledger.set_budget("lib", 10.0, 0.9)
    q = DPQuery(SMALL_TABLES, DuckDBEngine(small_duckdb), joins=SMALL_JOINS, ledger=ledger,
                principal="lib")
    with pytest.raises(QueryRefused, match=r"could not be calibrated") as info:
        q.query(REGION_SUM, epsilon, delta, "gaussian")
    assert "\n" not in str(info.value) and ledger.history("lib") == []
    q.engine.close()
    ledger.close()
    tables = copy.deepcopy(SMALL_TABLES)  # an operator who allows such epsilons
    for name in ("people", "visits"):
        tables[name]["min_epsilon_per_query"] = 1e-300
    g = Gateway(small_config(small_duckdb, str(tmp_path / "gw.db"), tables=tables,
                             limits={"max_delta_per_query": 0.9}), rng=7)
    with pytest.raises(QueryRefused, match=r"could not be calibrated"):
        g.query(alice(g), REGION_SUM, epsilon, delta, "gaussian")
    assert g.ledger.history(alice(g).principal) == []
    assert [r.decision for r in g.audit.all()] == ["refused"]
    g.close()
