"""Limits on the query text, checked before and while it is parsed: characters, control
characters, parenthesis nesting, tokens, comments, one SELECT statement, tree depth.

Each bounds the work the planner does for one query before anything is validated, so an
analyst cannot make planning slow or recursive (a RecursionError is refused, not raised).
"""

from __future__ import annotations

import re
import threading
import unicodedata
from typing import TYPE_CHECKING, Any

from privlab.query.planner.plan import refuse

if TYPE_CHECKING:
    from privlab.query.config import Limits

MAX_IN_LIST = 1_000
MAX_LITERAL_CHARS = 1_000
MAX_DEPTH = 60
_ALLOWED_CONTROL = {"\t", "\n", "\r"}
_PLAIN_ASCII = re.compile(r"[\t\n\r\x20-\x7e]*")


def check_text(sql: Any, max_chars: int) -> str:
    """`sql` when it is a non-empty string within `max_chars` without control, format or
    unassigned characters; refused otherwise."""
    if not isinstance(sql, str):
        raise refuse("sql must be a string")
    if not sql.strip():
        raise refuse("sql is empty")
    if len(sql) > max_chars:
        raise refuse(f"sql is longer than the limit of {max_chars} characters")
    if _PLAIN_ASCII.fullmatch(sql):
        return sql
    for ch in sql:
        if ch in _ALLOWED_CONTROL:
            continue
        cat = unicodedata.category(ch)
        if cat in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"):
            raise refuse(f"sql contains a control, format or unassigned character "
                         f"(U+{ord(ch):04X}); remove it")
    return sql


def paren_depth(sql: str) -> int:
    """Deepest parenthesis nesting outside quotes: a linear scan before any parsing."""
    depth = deepest = 0
    quote = None
    for ch in sql:
        if quote is not None:
            if ch == quote:
                quote = None
        elif ch in ("'", '"'):
            quote = ch
        elif ch == "(":
            depth += 1
            deepest = max(deepest, depth)
        elif ch == ")":
            depth -= 1
    return deepest


def check_depth(node: Any, limit: int = MAX_DEPTH) -> None:
    """Refuse absurdly nested trees before walking them recursively."""
    stack = [(node, 0)]
    while stack:
        current, d = stack.pop()
        if d > limit:
            raise refuse(f"the query is nested more than {limit} levels deep")
        for child in current.iter_expressions():
            stack.append((child, d + 1))


_TOKENIZERS = threading.local()


def _tokenizer() -> Any:
    """This thread's PostgreSQL tokenizer: sqlglot builds its (Rust) core per tokenizer, which
    costs more than tokenizing a short query, so each thread keeps one."""
    tokenizer = getattr(_TOKENIZERS, "postgres", None)
    if tokenizer is None:
        from sqlglot.dialects.dialect import Dialect

        tokenizer = _TOKENIZERS.postgres = Dialect.get_or_raise("postgres").tokenizer()
    return tokenizer


def tokenize(sql: str, limits: Limits) -> list[Any]:
    """The query's tokens, after the cheap refusals: nesting depth, then the token budget."""
    # cheap refusals before the parser runs: nesting, then the token budget (the parse
    # time is linear in the tokens, so this bounds it)
    if sql.count("(") > MAX_DEPTH and paren_depth(sql) > MAX_DEPTH:  # the scan only if it can
        raise refuse(f"the query is nested more than {MAX_DEPTH} levels deep")
    tokenizer = _tokenizer()  # outside the try: a missing sqlglot is a missing extra
    try:
        tokens = tokenizer.tokenize(sql)
    except Exception:
        raise refuse("sql could not be tokenized; check quotes and symbols") from None
    if len(tokens) > limits.max_sql_tokens:
        raise refuse(f"sql has {len(tokens)} tokens; the limit is "
                     f"{limits.max_sql_tokens} (limits.max_sql_tokens)")
    if any(t.comments for t in tokens):
        raise refuse("comments are not accepted in queries; remove them")
    return tokens


def parse(sql: str, limits: Limits, tokens: list[Any] | None = None) -> Any:
    """The one SELECT statement of `sql` (refused: several statements, another kind, a tree
    nested deeper than MAX_DEPTH)."""
    from sqlglot import exp
    from sqlglot.dialects.dialect import Dialect

    if tokens is None:
        tokens = tokenize(sql, limits)
    try:
        statements = Dialect.get_or_raise("postgres").parser().parse(tokens, sql)
    except RecursionError:
        raise refuse(f"the query is nested more than {MAX_DEPTH} levels deep") from None
    except Exception:
        raise refuse("sql is not valid SQL (the parser rejected it)") from None
    statements = [s for s in statements if s is not None]
    if len(statements) != 1:
        raise refuse("send exactly one statement (stacked statements are refused)")
    tree = statements[0]
    check_depth(tree)
    if type(tree) is not exp.Select:
        raise refuse(f"only SELECT queries are accepted, got {tree.key.upper()}")
    return tree
