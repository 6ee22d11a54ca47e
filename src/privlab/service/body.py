"""`parse_query_body`: the POST /v1/queries body, parsed strictly (docs/gateway.md, "Strict
requests"): a JSON object of known fields with the types the gateway needs, each refusal one
line naming the field."""

import json
import math
from typing import Any


class BadRequest(Exception):
    """A request refused before it reaches the gateway (HTTP 400, JSON, field named)."""


def _no_duplicates(items: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: set[str] = set()
    for k, _ in items:
        if k in seen:
            raise BadRequest(f"duplicate JSON key {k[:40]!r}: send each field once")
        seen.add(k)
    return dict(items)


def _no_constant(name: str) -> Any:
    raise BadRequest(f"{name} is not valid JSON; numbers must be finite")


QUERY_FIELDS = ("sql", "epsilon", "delta", "mechanism")


def parse_query_body(raw: bytes, max_sql_chars: int) -> dict[str, Any]:
    """The POST /v1/queries body, strictly: a JSON object without duplicate keys, `sql` a
    string, `epsilon` and `delta` JSON numbers (not strings, not booleans, finite),
    `mechanism` a string or null, nothing else. Raises `BadRequest` naming the field."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise BadRequest("the body must be UTF-8 JSON") from None
    try:
        body = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except BadRequest:
        raise
    except RecursionError:
        raise BadRequest("the JSON body is nested too deeply") from None
    except ValueError:
        raise BadRequest("the body is not valid JSON; send {\"sql\": ..., \"epsilon\": ...}") \
            from None
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object {\"sql\", \"epsilon\", \"delta\"?, "
                         "\"mechanism\"?}")
    unknown = sorted(set(body) - set(QUERY_FIELDS))
    if unknown:
        raise BadRequest(f"unknown field {unknown[0][:40]!r}; allowed: {', '.join(QUERY_FIELDS)}")
    sql = body.get("sql")
    if not isinstance(sql, str):
        raise BadRequest("sql: required, a JSON string")
    if len(sql) > max_sql_chars:
        raise BadRequest(f"sql: longer than the limit of {max_sql_chars} characters")
    for name, required in (("epsilon", True), ("delta", False)):
        value = body.get(name)
        if value is None and not required and name not in body:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise BadRequest(f"{name}: {'required, ' if required else ''}a JSON number "
                             "(not a string, a boolean or null)")
        # an integer literal of 400 digits is a Python int that float() cannot convert
        if isinstance(value, int) and abs(value) > 10 ** 300:
            raise BadRequest(f"{name}: must be a finite number of at most 1e300")
        if not math.isfinite(float(value)) or abs(float(value)) > 1e300:
            raise BadRequest(f"{name}: must be a finite number")
    mechanism = body.get("mechanism")
    if mechanism is not None and not isinstance(mechanism, str):
        raise BadRequest("mechanism: a JSON string (laplace or gaussian) or null")
    return {"sql": sql, "epsilon": float(body["epsilon"]),
            "delta": float(body.get("delta", 0.0)), "mechanism": mechanism}
