"""What the audit log holds: one row per request and its decision, and its errors.

`row_values` turns a request's outcome into the row as stored (NUL characters escaped, the
requested epsilon / delta as text, the answer as JSON); `AuditRecord` is a row read back, with
the view its analyst may see.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from privlab.errors import InvalidInputError, UnsafeConfigurationError
from privlab.utils.text import escape_nul

#: "denied" is no longer written (a hidden table is refused like a missing one); it stays so
#: rows of older logs still read
DECISIONS = ("released", "released_fallback", "refused", "denied", "budget_exceeded", "error",
             "charged_outcome_unknown", "unauthenticated", "rate_limited",
             "broken_log_accepted", "log_migrated")
FORMAT = 2
ARCHIVE_V1 = "privlab_gateway_audit_v1"


def row_values(query_id: str, decision: str, *, analyst: str | None = None,
               sql: str | None = None, epsilon: Any = None, delta: Any = None,
               reason: str | None = None, ledger_entry_id: int | None = None,
               epsilon_spent: float | None = None, delta_spent: float | None = None,
               result: dict[str, Any] | None = None,
               created_at: str | None = None) -> dict[str, Any]:
    """One audit row's fields as stored (what `AuditLog.record` and `append_in` take);
    `created_at` defaults to now (a caller that stamps the row later passes its own)."""
    if decision not in DECISIONS:
        raise InvalidInputError(f"decision must be one of {DECISIONS}, got {decision!r}")
    return {
        "query_id": query_id,
        "created_at": datetime.now(UTC).isoformat() if created_at is None else created_at,
        "analyst": escape_nul(analyst), "sql": escape_nul(sql),
        "epsilon": _number_text(epsilon), "delta": _number_text(delta),
        "decision": decision, "reason": escape_nul(reason),
        "ledger_entry_id": ledger_entry_id,
        "epsilon_spent": epsilon_spent, "delta_spent": delta_spent,
        "result": None if result is None else _RESULT_ENCODER.encode(result),
    }


#: `json.dumps(result, default=str, allow_nan=False)`, one shared encoder
_RESULT_ENCODER = json.JSONEncoder(default=str, allow_nan=False)


@dataclass(frozen=True)
class AuditRecord:
    seq: int
    query_id: str
    created_at: str
    analyst: str | None
    sql: str | None
    epsilon: str | None
    delta: str | None
    decision: str
    reason: str | None
    ledger_entry_id: int | None
    epsilon_spent: float | None
    delta_spent: float | None
    result: dict[str, Any] | None
    hash: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "query_id": self.query_id, "created_at": self.created_at, "sql": self.sql,
            "epsilon": _as_float(self.epsilon), "delta": _as_float(self.delta),
            "decision": self.decision, "reason": self.reason,
            "ledger_entry_id": self.ledger_entry_id, "epsilon_spent": self.epsilon_spent,
            "delta_spent": self.delta_spent, "result": self.result, "seq": self.seq,
        }

    def to_analyst_dict(self) -> dict[str, Any]:
        """What the analyst who sent the query may see. A `released_fallback` row (the
        engine failed after the charge and the mechanism ran on the empty result) reads as
        `released` without a reason: whether the engine failed must not be observable,
        since a failure could in principle depend on the data (see privlab.query.gateway)."""
        out = self.to_dict()
        if self.decision == "released_fallback":
            out["decision"], out["reason"] = "released", None
        return out


class AuditLogBroken(UnsafeConfigurationError):
    """The audit log failed verification (edited, reordered, truncated, unprotected)."""


class AuditFormatError(UnsafeConfigurationError):
    """The audit log was written in an older format (see the module docstring)."""


def _format_problem(version: int) -> str:
    return (f"format {version} (written before seq and the previous row's MAC were under the "
            f"MAC; this privlab writes format {FORMAT}): run `privlab audit-log migrate "
            "--config <gateway.yaml>` (verifies it, keeps it as table "
            f"{ARCHIVE_V1}, starts a format-{FORMAT} log)")


def _as_float(text: str | None) -> float | None:
    try:
        return None if text is None else float(text)
    except ValueError:  # "out of range" (see _number_text)
        return None


def _number_text(value: Any) -> str | None:
    """A requested epsilon / delta as stored: a float's repr, or for a value no float can
    hold (an integer of 400 digits from a library caller) a marker, never an exception."""
    if value is None:
        return None
    try:
        return repr(float(value))
    except (OverflowError, ValueError, TypeError):
        return "out of range"

