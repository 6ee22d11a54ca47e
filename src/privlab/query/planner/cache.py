"""The plan cache: plans by (sql, analyst tables) in a small LRU, and plans by normalised
SQL, so that a query differing from a planned one only in the literals of its WHERE clause
(passed to the engine as bound parameters, verbatim) reuses that plan with its own
parameters: a dashboard's stream of similar queries is tokenized, not parsed and planned
again. One lock guards both (the gateway plans on many threads).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from threading import Lock
from typing import Any

from privlab.query.planner.limits import MAX_LITERAL_CHARS
from privlab.query.planner.plan import QueryPlan, QueryRefused, refuse


def _literal_value(token: Any) -> Any:
    """The value `Validator._literal` gives a NUMBER or STRING token, with the same checks
    (raises QueryRefused where it would refuse)."""
    text = token.text
    if token.token_type.name == "STRING":
        if len(text) > MAX_LITERAL_CHARS:
            raise refuse(f"string literals are limited to {MAX_LITERAL_CHARS} characters")
        return text
    value: Any = int(text) if text.lstrip("-").isdigit() else float(text)
    if isinstance(value, float) and not math.isfinite(value):
        raise refuse("numeric literals must be finite")
    if isinstance(value, int) and abs(value) >= 2**63:
        raise refuse("integer literals must fit in 64 bits")
    return value


_LITERALS = ("NUMBER", "STRING")
# tokens after which no literal may be abstracted (their literals shape the plan)
_STRUCTURAL = {"GROUP_BY", "ORDER_BY", "LIMIT", "OFFSET", "HAVING", "FETCH", "WINDOW",
               "QUALIFY", "UNION", "SEMICOLON"}
# a literal next to these is not passed through verbatim (sign, pattern rewriting)
_TRANSFORMING = {"DASH", "PLUS", "LIKE", "ILIKE", "ESCAPE", "SIMILAR_TO", "GLOB", "RLIKE"}


def template_of(tokens: list[Any]) -> tuple[tuple[Any, ...] | None, list[Any]]:
    """(normalised shape, literal values) of a query whose literals all sit in its WHERE
    clause and are passed to the engine verbatim; (None, []) otherwise. The shape keeps
    every token but those literals, which become their token type."""
    shape: list[Any] = []
    values: list[Any] = []
    where = done = False
    for t in tokens:
        kind = t.token_type._name_  # the enum member's name (`.name` is a property call)
        if kind in _TRANSFORMING:
            return None, []
        if kind == "WHERE":
            where = True
        elif kind in _STRUCTURAL:
            done = True
        if kind in _LITERALS:
            if not where or done:
                return None, []
            try:
                values.append(_literal_value(t))
            except (QueryRefused, ValueError):
                return None, []
            shape.append("?" + kind)
        else:
            shape.append((kind, t.text))
    if not values:
        return None, []
    return tuple(shape), values


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def _bindable(plan: QueryPlan, values: list[Any]) -> bool:
    """A plan whose first len(values) parameters are the literals, verbatim and in order
    (the WHERE clause is compiled first; the rest are config values), and whose other parts
    (no quantile pass, whose parameters repeat the WHERE) do not depend on them."""
    n = len(values)
    return (plan.quantile_sql is None and len(plan.params) >= n
            and all(_same(a, b) for a, b in zip(plan.params[:n], values, strict=False)))


class _Template:
    """A plan reusable for every query of the same shape: only the WHERE literals (its
    first `n` parameters) change."""

    __slots__ = ("plan", "n")

    def __init__(self, plan: QueryPlan, n: int) -> None:
        self.plan, self.n = plan, n

    def bind(self, values: list[Any]) -> QueryPlan | None:
        if len(values) != self.n:
            return None
        # `dataclasses.replace(plan, params=...)` for a seventh of its CPU: QueryPlan has no
        # __post_init__, no init=False field and no slots, so a copy of its fields with one
        # changed is the same plan (tests/query/test_hot_path_equivalence.py)
        plan: QueryPlan = object.__new__(QueryPlan)
        plan.__dict__.update(self.plan.__dict__)
        plan.__dict__["params"] = tuple(values) + self.plan.params[self.n:]
        return plan


class PlanCache:
    """Plans by (sql, allowed tables) and templates by (normalised shape, allowed tables),
    each an LRU of at most `size` entries (0: no plan is kept)."""

    def __init__(self, size: int = 512) -> None:
        self.size = size
        self.plans: OrderedDict[tuple[str, tuple[str, ...] | None], QueryPlan] = OrderedDict()
        # plans by normalised SQL: the token stream with WHERE literals abstracted
        self.templates: OrderedDict[tuple[Any, ...], _Template] = OrderedDict()
        self._lock = Lock()

    def get(self, key: tuple[str, tuple[str, ...] | None]) -> QueryPlan | None:
        with self._lock:
            hit = self.plans.get(key)
            if hit is not None:
                self.plans.move_to_end(key)
            return hit

    def put(self, key: tuple[str, tuple[str, ...] | None], plan: QueryPlan) -> None:
        if self.size <= 0:
            return
        with self._lock:
            self.plans[key] = plan
            while len(self.plans) > self.size:
                self.plans.popitem(last=False)

    def bind(self, key: tuple[Any, ...], values: list[Any]) -> QueryPlan | None:
        """The plan of the template stored under `key` with these literals, if any."""
        with self._lock:
            template = self.templates.get(key)
        return None if template is None else template.bind(values)

    def remember(self, key: tuple[Any, ...], plan: QueryPlan, values: list[Any]) -> None:
        """Store `plan` as the template of its shape when its parameters begin with the
        literals `values`, verbatim (`_bindable`)."""
        if not _bindable(plan, values):
            return
        with self._lock:
            self.templates[key] = _Template(plan, len(values))
            while len(self.templates) > self.size:
                self.templates.popitem(last=False)
