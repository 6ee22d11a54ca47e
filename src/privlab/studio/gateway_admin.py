"""Gateway administration: analysts with budgets spent and left, the query history with its
refusals, and the audit log's verification (the same check as `privlab audit-log verify`).

The gateway config is named by the operator on the command line (`--gateway-config`), never
by a browser; its ledger and audit log are only read (verification writes nothing)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: History rows shown (newest first).
HISTORY_ROWS = 200


@dataclass
class Overview:
    analysts: list[dict[str, Any]]
    history: list[dict[str, Any]]
    audit_log: str
    keyed: bool
    rows: int


def _ledger(cfg: Any) -> Any:
    from privlab.core.ledger import BudgetLedger

    if "://" not in cfg.ledger and not Path(cfg.ledger).is_file():
        return None
    return BudgetLedger(cfg.ledger)


def _audit(cfg: Any) -> Any:
    from privlab.query.audit import AuditLog

    return AuditLog(cfg.audit_target, key=cfg.audit_key(create=False),
                    checkpoint=cfg.audit_checkpoint, create=False)


def overview(config_path: Path) -> Overview:
    from privlab.errors import InvalidInputError
    from privlab.query.config import load_config

    cfg = load_config(config_path)
    book = _ledger(cfg)
    analysts = []
    try:
        for a in cfg.analysts.values():
            principal = a.principal or a.name
            spent = (0.0, 0.0)
            if book is not None:
                try:
                    spent = book.spent(principal)
                except InvalidInputError:
                    spent = (0.0, 0.0)  # no charge yet: the principal is created on first use
            analysts.append({"name": a.name, "principal": principal,
                             "budget_epsilon": a.epsilon, "budget_delta": a.delta,
                             "spent_epsilon": spent[0], "spent_delta": spent[1],
                             "left_epsilon": max(a.epsilon - spent[0], 0.0),
                             "left_delta": max(a.delta - spent[1], 0.0),
                             "tables": ", ".join(a.tables) if a.tables else "all"})
    finally:
        if book is not None:
            book.close()
    log = _audit(cfg)
    try:
        history: list[dict[str, Any]] = []
        rows = 0
        if log.exists:
            records = log.all()
            rows = len(records)
            for r in reversed(records[-HISTORY_ROWS:]):
                history.append({"seq": r.seq, "at": r.created_at, "analyst": r.analyst or "",
                                "sql": r.sql or "", "epsilon": r.epsilon or "",
                                "decision": r.decision, "reason": r.reason or ""})
        return Overview(analysts, history, log.describe(), log.key is not None, rows)
    finally:
        log.close()


def verify(config_path: Path) -> dict[str, Any]:
    """`privlab audit-log verify` as a dict: ok, rows, head, problems."""
    from privlab.query.config import load_config

    cfg = load_config(config_path)
    log = _audit(cfg)
    try:
        if not log.exists:
            return {"ok": False, "rows": 0, "head_seq": None, "keyed": log.key is not None,
                    "problems": ["the audit log does not exist (the first `privlab serve` "
                                 "creates it)"]}
        problems = log.verify()
        rows, head = log.head()
        return {"ok": not problems, "rows": rows, "head_seq": head,
                "keyed": log.key is not None, "problems": problems}
    finally:
        log.close()
