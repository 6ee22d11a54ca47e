"""`Gateway`: validate -> plan -> charge -> run -> noise -> audit -> answer.

Order of operations is the privacy argument:

1. The SQL is validated and rewritten (`Planner`); the budget split and every noise
   parameter are calibrated (`QueryMeasurement`, once per normalised plan and budget)
   *before* any charge, so a refusal costs nothing and depends on nothing but the query
   text and the public config.
2. The ledger charge commits (`BudgetLedger.charge_many` through `GroupCommitter`: one
   serialized transaction that refuses past the budget, shared with the charges of other
   queries arriving at the same time) BEFORE the engine runs. A crash after this point leaves
   a charge for a value that may never be shown; a value is never shown without a charge.
3. The engine runs the generated SQL, noise is added, the decision and the noisy answer are
   appended to the audit log, and only then is the answer returned.

One commit (the default: ledger and audit log in one database, `privlab.query.commit`):
steps 2 and 3 swap for a query whose charge the budget this process knows covers
(`BudgetView`): the engine runs and the noise is drawn, then the charge and the audit row
with the answer commit in ONE transaction (group-committed), and only then is the answer
returned. A refused charge or a failed commit drops the answer unseen. A query the view
cannot vouch for takes the charge-first path, so its refusal still comes before any row is
read.

Failures after the charge. The planner only emits SQL that cannot fail on any row (see
`privlab.query.planner`), so an engine failure is not supposed to depend on the data. As a
second line of defence, whatever goes wrong between the charge and the answer (an engine
error, a timeout, a value the JSON encoder refuses) is answered exactly like a success:
HTTP 200, the same charge, the same keys, the same guarantee, with the mechanism applied to
a fixed, data-independent input (the empty result) instead of the engine's rows. Status,
charge, keys and text therefore never depend on whether the engine failed; the operator
sees the failure in the audit log (`released_fallback`, hidden from the analyst's views) and
the server log. Refunding is never done: it would let a retry spend the same budget twice.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import math
import os
import threading
from typing import Any

import numpy as np

from privlab.core.group_commit import GroupCommitter
from privlab.core.guarantee import check_delta, check_epsilon
from privlab.core.ledger import BudgetLedger, ChargeRequest
from privlab.core.rng import secure_generator
from privlab.engines import Engine, open_engine
from privlab.errors import BudgetExceededError, InvalidInputError, PrivlabError
from privlab.query.audit import AuditLog, AuditLogBroken
from privlab.query.commit import BudgetView, ChargeAndAudit, Commit, shared_database
from privlab.query.config import AnalystSpec, GatewayConfig
from privlab.query.measurement import MeasurementCache, QueryMeasurement
from privlab.query.noise import Answer, Budget, answer, plan_budget
from privlab.query.planner import Planner, QueryPlan, QueryRefused
from privlab.utils.closing import Closing

log = logging.getLogger("privlab.gateway")
DESCRIPTION_PREFIX = "privlab gateway query "


def compact_sql(sql: Any, keep: int = 200) -> str | None:
    """What the audit log keeps of a refused query: short ones whole, long ones their first
    `keep` characters, length and SHA-256 (a flood of large refused queries cannot fill
    the log, and the hash still identifies a repeated probe)."""
    if not isinstance(sql, str):
        return None
    if len(sql) <= keep + 60:
        return sql
    digest = hashlib.sha256(sql.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{sql[:keep]}... [{len(sql)} chars, sha256 {digest}]"


def _missing_sqlite(target: str) -> bool:
    """A ledger given as a file path that does not exist yet (created on first serve)."""
    from pathlib import Path

    return "://" not in target and target != ":memory:" and not Path(target).exists()


def _close_all(engine: Engine, audit: AuditLog, ledger: Any) -> None:
    """Close what a gateway holds (its `close()`, and its finalizer when dropped open)."""
    for closer in (engine.close, audit.close, getattr(ledger, "close", None)):
        if closer is not None:
            try:
                closer()
            except Exception:  # pragma: no cover - best effort on shutdown
                log.debug("close failed", exc_info=True)


class QueryFailed(PrivlabError):
    """The query was charged but could not be computed (HTTP 500); the charge stands."""

    status_code = 500


#: compact JSON that refuses NaN and infinities: every body the gateway answers with (one
#: encoder, shared: `json.dumps` with options builds a new one per call; encoding is
#: thread-safe, the encoder holds only its options)
_dumps = json.JSONEncoder(allow_nan=False, separators=(",", ":")).encode


def _float_json(value: float) -> str:
    """`_dumps(value)` of a float, without an encoder per call: JSON writes a finite float as
    `float.__repr__`, and refuses the others."""
    if not math.isfinite(value):
        raise ValueError(f"Out of range float values are not JSON compliant: {value!r}")
    return float.__repr__(value)


def _uuid4_hex(raw: bytes) -> str:
    """`uuid.UUID(bytes=raw, version=4).hex` (RFC 4122: version 4, variant bits 10) without
    building the UUID object."""
    value = int.from_bytes(raw, "big")
    value = (value & ~(0xC000 << 48)) | (0x8000 << 48)
    value = (value & ~(0xF000 << 64)) | (4 << 76)
    return f"{value:032x}"


def _new_query_id() -> str:
    """A random query id, as `uuid.uuid4().hex` (16 bytes from `os.urandom`), for a third of
    its CPU on the hot path (issue 32)."""
    return _uuid4_hex(os.urandom(16))


class Gateway(Closing):
    """The DP query service without HTTP: `Gateway(config).query(analyst, sql, epsilon)`.

    `rng`: None (default) draws all noise from a ChaCha20 CSPRNG, re-keyed per thread and
    per process; an int seed makes answers reproducible and says so (tests only).

    `close()` (or `with Gateway(...) as gw:`) closes its engine, ledger and audit log, passed
    in or not; one dropped open warns (`ResourceWarning`).
    """

    def __init__(self, config: GatewayConfig, *, engine: Engine | None = None,
                 ledger: Any = None, audit: AuditLog | None = None, rng: int | None = None,
                 reconcile: bool = True, check_tables: bool = True,
                 check_only: bool = False) -> None:
        """`check_only`: validate the config, the database, the ledger and the audit log
        and change nothing (no budget sync, no reconciliation, no audit row, no key file);
        such a gateway is for `privlab serve --check`, not for answering."""
        self.config = config
        # what this gateway opens is closed again if a later step refuses (nothing half-open)
        with contextlib.ExitStack() as undo:
            self.engine = engine or undo.enter_context(open_engine(
                config.database, config.limits.statement_timeout_s, threads=config.threads))
            if check_tables:
                self.engine.check_tables(config)
            self.planner = Planner(config, dialect=self.engine.dialect,
                                   placeholder=self.engine.placeholder)
            if ledger is not None:
                self.ledger = ledger
            elif check_only:
                self.ledger = None if _missing_sqlite(config.ledger) else \
                    undo.enter_context(BudgetLedger(config.ledger, create=False))
            else:
                self.ledger = undo.enter_context(BudgetLedger(config.ledger))
            self.audit = audit if audit is not None else undo.enter_context(AuditLog(
                config.audit_target, key=config.audit_key(create=not check_only),
                checkpoint=config.audit_checkpoint, create=not check_only))
            self._seed = rng
            self.joint: ChargeAndAudit | None = None
            self._seeded_rng = np.random.default_rng(rng) if rng is not None else None
            self._local = threading.local()
            # one calibrated measurement per normalised plan and budget (issue 31)
            self.measurements = MeasurementCache(1024)
            self._seed_lock = threading.Lock()
            if not check_only:
                # concurrent queries' charges share one transaction and one disk flush
                self.charges = GroupCommitter(self.ledger)
                # one database for both: the charge and its audit row in one commit
                self.joint = ChargeAndAudit(self.ledger, self.audit) \
                    if shared_database(self.ledger, self.audit) else None
                self._view = BudgetView(self.ledger)
                self.sync_budgets()
                if reconcile:
                    self.reconcile()
            undo.pop_all()
        self._hold(functools.partial(_close_all, self.engine, self.audit, self.ledger),
                   "Gateway")

    # -- set-up -----------------------------------------------------------------------------

    def sync_budgets(self) -> None:
        """Create each analyst's ledger principal, or update its total to the config's."""
        existing = set(self.ledger.principals())
        for a in self.config.analysts.values():
            if a.principal in existing:
                st = self.ledger.status(a.principal)
                if (float(st.budget_epsilon_exact), float(st.budget_delta_exact)) == \
                        (a.epsilon, a.delta):
                    continue
            try:
                self.ledger.set_budget(a.principal, a.epsilon, a.delta)
            except InvalidInputError as exc:
                raise InvalidInputError(f"analysts.{a.name}: {exc}") from None

    def reconcile(self) -> int:
        """Audit every charged gateway query that has no audit row (the gateway stopped
        between charge and audit); returns how many were added."""
        known = self.audit.query_ids()
        added = 0
        for a in self.config.analysts.values():
            for entry in self.ledger.history(a.principal):
                if not entry.description.startswith(DESCRIPTION_PREFIX):
                    continue
                qid = entry.description[len(DESCRIPTION_PREFIX):].split(" ", 1)[0]
                if qid in known:
                    continue
                sql = entry.description.split(": ", 1)[1] if ": " in entry.description else None
                self.audit.record(
                    qid, "charged_outcome_unknown", analyst=a.name, sql=sql,
                    epsilon=entry.epsilon, delta=entry.delta, ledger_entry_id=entry.entry_id,
                    epsilon_spent=entry.epsilon, delta_spent=entry.delta,
                    reason="charged, then the gateway stopped before recording the outcome; "
                           "the charge stands")
                added += 1
        return added

    # -- randomness -------------------------------------------------------------------------

    def _rng(self) -> np.random.Generator:
        if self._seeded_rng is not None:
            return self._seeded_rng
        gen = getattr(self._local, "gen", None)
        if gen is None or self._local.pid != os.getpid():
            # never share a stream across a fork: two workers would add identical noise
            gen = secure_generator()
            self._local.gen, self._local.pid = gen, os.getpid()
        return gen

    # -- the query path ---------------------------------------------------------------------

    def _validate(self, analyst: AnalystSpec, sql: str, epsilon: Any, delta: Any,
                  mechanism: str | None) -> tuple[QueryPlan, QueryMeasurement]:
        plan = self.planner.plan(sql, analyst.tables)
        eps = check_epsilon(epsilon)
        dlt = check_delta(delta)
        if eps > self.config.limits.max_epsilon_per_query:
            raise QueryRefused(f"epsilon={eps:g} is above this gateway's per-query limit "
                               f"{self.config.limits.max_epsilon_per_query:g}")
        for t in plan.tables:
            floor = t.spec.min_epsilon_per_query
            if not t.spec.public and eps < floor:
                raise QueryRefused(f"epsilon={eps:g} is below the minimum {floor:g} per query "
                                   f"on table {t.spec.name!r} "
                                   f"(tables.{t.spec.name}.min_epsilon_per_query); ask for "
                                   f"epsilon >= {floor:g}")
        if dlt > self.config.limits.max_delta_per_query:
            raise QueryRefused(f"delta={dlt:g} is above this gateway's per-query limit "
                               f"{self.config.limits.max_delta_per_query:g} "
                               "(limits.max_delta_per_query)")
        for t in plan.tables:
            n = t.spec.public_size
            if dlt > 0 and n is not None and not t.spec.public and dlt >= 1.0 / n:
                raise QueryRefused(f"delta={dlt:g} must be below 1/n = {1.0 / n:g} for table "
                                   f"{t.spec.name!r} (tables.{t.spec.name}.public_size = {n})")
        # every noise parameter, calibrated before the charge from the plan's structure (a
        # refusal reads no row); cached: queries differing only in literals share it
        return plan, self.measurements.get(plan, plan_budget(plan, eps, dlt, mechanism))

    def query(self, analyst: AnalystSpec, sql: str, epsilon: Any, delta: Any = 0.0,
              mechanism: str | None = None) -> dict[str, Any]:
        """Answer one query for `analyst`; raises QueryRefused (400; also for a table the
        analyst may not query, word for word as for a missing one),
        BudgetExceededError (402) or QueryFailed (500). Every outcome is audited."""
        response = self._run_query(analyst, sql, epsilon, delta, mechanism, want_dict=True)
        assert response is not None
        return response

    def _run_query(self, analyst: AnalystSpec, sql: Any, epsilon: Any, delta: Any,
                   mechanism: str | None, *, want_dict: bool) -> dict[str, Any] | None:
        """`query`; with `want_dict` False (the server, `query_json`) the one-commit path
        builds only the JSON body (`_head`) and returns None."""
        if self.audit.alarm is not None:  # tampered audit log: answer nothing (HTTP 503)
            raise AuditLogBroken(self.audit.alarm)
        qid = _new_query_id()
        audit_sql = sql if isinstance(sql, str) else None
        common = dict(analyst=analyst.name, sql=audit_sql,
                      epsilon=epsilon if isinstance(epsilon, (int, float)) else None,
                      delta=delta if isinstance(delta, (int, float)) else None)
        try:
            plan, measurement = self._validate(analyst, sql, epsilon, delta, mechanism)
        except InvalidInputError as exc:
            self.audit.record(qid, "refused", reason=str(exc)[:300],
                              **{**common, "sql": compact_sql(sql)})
            raise QueryRefused(str(exc)) from None
        budget, guarantee = measurement.budget, measurement.guarantee_json
        description = f"{DESCRIPTION_PREFIX}{qid} by {analyst.name}: {sql}"
        if self.joint is not None:
            request = ChargeRequest(analyst.principal, budget.epsilon, budget.delta,
                                    description, guarantee)
            with contextlib.suppress(InvalidInputError):  # else the view vouches for nothing
                request = BudgetLedger.checked(request)  # once, for the view and the commit
            token = self._view.reserve(request)
            if token is not None:
                try:
                    return self._query_joint(qid, plan, measurement, request, common,
                                             want_dict)
                finally:
                    self._view.release(token)
        try:
            # The charge commits before anything is computed (what BudgetLedger.reserve
            # packages). Charges of concurrent queries are group-committed: one queue per
            # process (no polling on SQLite's busy handler), one transaction and one flush
            # per batch, and this thread continues only once its charge is durable.
            entry = self.charges.charge(analyst.principal, budget.epsilon, budget.delta,
                                        description=description, guarantee=guarantee)
        except BudgetExceededError as exc:
            self.audit.record(qid, "budget_exceeded", reason=str(exc), **common)
            raise
        except Exception as exc:  # the ledger failed: nothing ran on the data
            log.error("gateway query %s: the charge failed: %s", qid, type(exc).__name__)
            self._audit_failure(qid, None, budget, exc, common)
            raise QueryFailed(f"the budget could not be charged (query id {qid}); nothing "
                              "was computed") from None
        if self.joint is not None:
            self._view.learn(entry)
        decision, reason = "released", None
        try:
            response, body = self._respond(qid, self._compute(plan, measurement), budget,
                                           entry)
        except Exception as exc:
            # Same status, charge, keys and text as a success (module docstring): the
            # mechanism on the empty result, a fixed input that depends on no row.
            log.error("gateway query %s failed after the charge (%s); answered from the "
                      "data-independent fallback", qid, type(exc).__name__)
            decision = "released_fallback"
            reason = (f"{type(exc).__name__} after the charge; answered with the mechanism on "
                      "the empty result")
            try:
                response, body = self._respond(qid, self._fallback(plan, measurement), budget,
                                               entry)
            except Exception as exc2:  # data-independent: the measurement was built
                self._audit_failure(qid, entry, budget, exc2, common)
                raise QueryFailed(f"the query could not be computed (query id {qid}); "
                                  "the charge stands") from None
        try:
            self.audit.record(qid, decision, ledger_entry_id=entry.entry_id, reason=reason,
                              epsilon_spent=budget.epsilon, delta_spent=budget.delta,
                              result={"columns": response["columns"], "rows": response["rows"]},
                              **common)
        except AuditLogBroken:  # not audited, and the log is under attack: HTTP 503
            raise
        except Exception as exc:  # not audited: do not release
            log.error("gateway query %s: audit failed (%s); answer withheld", qid,
                      type(exc).__name__)
            raise QueryFailed(f"the answer could not be recorded (query id {qid}); it was "
                              "withheld and the charge stands") from None
        self._local.last_body = body
        return response

    def _query_joint(self, qid: str, plan: QueryPlan, measurement: QueryMeasurement,
                     request: ChargeRequest, common: dict[str, Any],
                     want_dict: bool = True) -> dict[str, Any] | None:
        """The one-commit path (`privlab.query.commit`): compute, then charge and audit in
        one transaction, then answer. The answer exists only in this thread until the
        commit returned; if the charge is refused or the commit fails it is dropped."""
        decision, reason = "released", None
        budget = measurement.budget
        try:
            result = self._compute(plan, measurement)
            head = self._head(qid, result, measurement, want_dict)
        except Exception as exc:
            # as on the charge-first path: the mechanism on the empty result, same charge
            log.error("gateway query %s failed (%s); answered from the data-independent "
                      "fallback", qid, type(exc).__name__)
            decision = "released_fallback"
            reason = (f"{type(exc).__name__} after the charge; answered with the mechanism on "
                      "the empty result")
            try:
                result = self._fallback(plan, measurement)
                head = self._head(qid, result, measurement, want_dict)
            except Exception as exc2:  # data-independent: the measurement was built
                head = None
                decision, reason = "error", f"{type(exc2).__name__} after the charge"
        released: dict[str, Any] = {"decision": decision, "reason": reason,
                                    "epsilon_spent": budget.epsilon,
                                    "delta_spent": budget.delta}
        if head is not None:
            released["result"] = {"columns": result.columns, "rows": result.rows}
        try:
            entry = self.joint.commit(Commit(request, qid, common, released))  # type: ignore
        except BudgetExceededError:  # audited in the same commit; nothing released
            self._view.forget(request.principal)
            raise
        except AuditLogBroken:  # neither row written, and the log is under attack: 503
            raise
        except Exception as exc:  # nothing was written: nothing is released
            log.error("gateway query %s: the charge and audit commit failed: %s", qid,
                      type(exc).__name__)
            self._audit_failure(qid, None, budget, exc, common)
            raise QueryFailed(f"the budget could not be charged (query id {qid}); nothing "
                              "was released") from None
        self._view.learn(entry)
        if head is None:
            raise QueryFailed(f"the query could not be computed (query id {qid}); the "
                              "charge stands")
        response, text = head
        remaining_e, remaining_d = entry.remaining_epsilon, entry.remaining_delta
        if response is not None:
            response.update({"remaining_budget": {"epsilon": remaining_e, "delta": remaining_d},
                             "ledger_entry_id": entry.entry_id})
        body = "".join((text[:-1], ',"remaining_budget":{"epsilon":', _float_json(remaining_e),
                        ',"delta":', _float_json(remaining_d), '},"ledger_entry_id":',
                        int.__repr__(entry.entry_id), "}"))
        self._local.last_body = body.encode("utf-8")
        return response

    @staticmethod
    def _head(qid: str, result: Answer, measurement: QueryMeasurement,
              want_dict: bool = True) -> tuple[dict[str, Any] | None, str]:
        """The response without the ledger's fields (None unless `want_dict`), and its JSON
        (checked finite before the commit: a value JSON refuses takes the fallback, as on
        the other path). Without the dict the JSON is joined from its fields' JSON, the
        guarantee's serialised once per measurement (`guarantee_body`), the query id
        (hexadecimal, `_new_query_id`) quoted as is: the same bytes as `json.dumps` of the
        dict (tested) for a third of the CPU on the server's path."""
        budget = measurement.budget
        if want_dict:
            response = {"query_id": qid, **result.to_dict(), "epsilon_spent": budget.epsilon,
                        "delta_spent": budget.delta}
            return response, _dumps(response)
        guarantee = (measurement.guarantee_body if result.guarantee is measurement.guarantee
                     and measurement.guarantee_body else _dumps(result.guarantee.to_dict()))
        return None, "".join((
            '{"query_id":"', qid, '","columns":', _dumps(result.columns),
            ',"rows":', _dumps(result.rows),
            ',"column_info":', _dumps([c.to_dict() for c in result.info]),
            ',"guarantee":', guarantee, ',"epsilon_spent":', _float_json(budget.epsilon),
            ',"delta_spent":', _float_json(budget.delta), "}"))

    def query_json(self, analyst: AnalystSpec, sql: str, epsilon: Any, delta: Any = 0.0,
                   mechanism: str | None = None) -> bytes:
        """`query` serialised as the HTTP body (JSON, already checked finite)."""
        self._run_query(analyst, sql, epsilon, delta, mechanism, want_dict=False)
        body: bytes = self._local.last_body
        self._local.last_body = None
        return body

    @staticmethod
    def _respond(qid: str, result: Answer, budget: Budget,
                 entry: Any) -> tuple[dict[str, Any], bytes]:
        """The response and its JSON body; serialising here, inside the guarded region,
        means a value JSON cannot encode (NaN, a database type) never fails later."""
        response = {
            "query_id": qid,
            **result.to_dict(),
            "epsilon_spent": budget.epsilon,
            "delta_spent": budget.delta,
            "remaining_budget": {"epsilon": entry.remaining_epsilon,
                                 "delta": entry.remaining_delta},
            "ledger_entry_id": entry.entry_id,
        }
        body = _dumps(response).encode("utf-8")
        return response, body

    def _fallback(self, plan: QueryPlan, measurement: QueryMeasurement) -> Answer:
        """The mechanism applied to the empty result: what is released when the engine
        failed after the charge. It reads no row, so it is DP for any data."""
        if self._seeded_rng is not None:
            with self._seed_lock:
                return answer(plan, [], [], measurement, rng=self._seeded_rng)
        return answer(plan, [], [], measurement, rng=self._rng(), seeded=False)

    def _compute(self, plan: QueryPlan, measurement: QueryMeasurement) -> Answer:
        rows = self.engine.run(plan.sql, plan.params)
        values = self.engine.run(plan.quantile_sql, plan.quantile_params) \
            if plan.quantile_sql else []
        if self._seeded_rng is not None:
            with self._seed_lock:
                return answer(plan, rows, values, measurement, rng=self._seeded_rng)
        return answer(plan, rows, values, measurement, rng=self._rng(), seeded=False)

    def _audit_failure(self, qid: str, entry: Any, budget: Budget, exc: Exception,
                       common: dict[str, Any]) -> None:
        try:
            self.audit.record(
                qid, "error", reason=f"{type(exc).__name__} after the charge",
                ledger_entry_id=None if entry is None else entry.entry_id,
                epsilon_spent=None if entry is None else budget.epsilon,
                delta_spent=None if entry is None else budget.delta, **common)
        except Exception:  # the ledger still holds the charge; reconcile() will find it
            log.exception("gateway query %s: audit of the failure failed", qid)

    # -- read-only views --------------------------------------------------------------------

    def budget(self, analyst: AnalystSpec) -> dict[str, Any]:
        st = self.ledger.status(analyst.principal).to_dict()
        st["analyst"] = analyst.name
        return st

    def history(self, analyst: AnalystSpec, limit: int = 100,
                before: int | None = None) -> list[dict[str, Any]]:
        """The analyst's own audit rows, as the analyst may see them (`to_analyst_dict`:
        an answer from the fallback reads exactly like any other release)."""
        return [r.to_analyst_dict() for r in self.audit.history(analyst.name, limit, before)]

    def tables(self, analyst: AnalystSpec | None = None) -> dict[str, Any]:
        names = [n for n in self.config.tables
                 if analyst is None or analyst.tables is None or n in analyst.tables]
        return {
            "tables": [self.config.tables[n].public_metadata() for n in names],
            "joins": [j.public() for j in self.config.joins
                      if j.left_table in names and j.right_table in names],
        }

