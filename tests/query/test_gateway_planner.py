"""Planner: what is accepted, how it is rewritten, and the refusal of hostile input."""

from __future__ import annotations

import re

import pytest
from gw_fixtures import HOSTILE, SMALL_JOINS, SMALL_TABLES, analysts

from privlab.query.config import parse_config
from privlab.query.demo import adult_config
from privlab.query.planner import AccessDenied, Planner, QueryRefused, like_pattern
from privlab.query.planner.limits import check_text


@pytest.fixture(scope="module")
def planner() -> Planner:
    raw = adult_config("unused.duckdb", "unused.db", analysts())
    raw["tables"].update(SMALL_TABLES)
    raw["joins"] = SMALL_JOINS
    return Planner(parse_config(raw))


def test_count_plan_is_row_level_and_parametrized(planner: Planner) -> None:
    plan = planner.plan("SELECT COUNT(*) FROM adult WHERE sex = 'Male' AND age >= 30")
    assert not plan.user_level and plan.max_rows == 1
    assert [p.kind for p in plan.primitives] == ["count"]
    assert "Male" not in plan.sql and "30" not in plan.sql
    assert plan.params == ("Male", 30)
    assert plan.sql.count("?") == 2


def test_group_by_domain_and_avg_share_the_count(planner: Planner) -> None:
    plan = planner.plan('SELECT sex, COUNT(*) AS n, AVG(age), SUM(age) FROM adult '
                        'GROUP BY sex ORDER BY n DESC LIMIT 1')
    # age is declared NOT NULL: AVG's count is COUNT(*), SUM(age) is derived from the AVG
    assert [(p.kind, p.measure) for p in plan.primitives] == [("count", None), ("csum", 0)]
    assert plan.cells() == [("Female",), ("Male",)]
    assert plan.order == ((1, True),) and plan.limit == 1
    assert [o.name for o in plan.outputs] == ["sex", "n", "avg_age", "sum_age"]
    assert "CASE WHEN" in plan.sql and "< 17 THEN 17" in plan.sql and "> 90 THEN 90" in plan.sql


def test_user_level_rewrite_bounds_rows_per_unit(planner: Planner) -> None:
    plan = planner.plan("SELECT city, SUM(amount) FROM visits GROUP BY city")
    assert plan.user_level and plan.max_rows == 3
    assert "ROW_NUMBER() OVER (PARTITION BY __unit ORDER BY __r)" in plan.sql
    assert "random() AS __r" in plan.sql
    assert "__rn <= 3" in plan.sql


def test_declared_joins(planner: Planner) -> None:
    plan = planner.plan("SELECT p.region, COUNT(*) FROM visits v JOIN people p "
                        "ON v.person_id = p.id GROUP BY p.region")
    assert plan.user_level and plan.max_rows == 3
    plan = planner.plan("SELECT c.country, AVG(v.amount) FROM visits AS v JOIN cities AS c "
                        "ON c.city = v.city GROUP BY c.country")
    assert plan.table_names == ("visits", "cities")
    with pytest.raises(QueryRefused, match="not declared"):
        planner.plan("SELECT COUNT(*) FROM visits v JOIN people p ON v.person_id = p.age")
    with pytest.raises(QueryRefused, match="only public tables"):
        planner.plan("SELECT country, COUNT(*) FROM cities GROUP BY country")


def test_partition_selection_and_quantiles(planner: Planner) -> None:
    plan = planner.plan('SELECT "native-country", COUNT(*) FROM adult GROUP BY "native-country"')
    assert plan.partition_selection and plan.n_cells is None
    plan = planner.plan("SELECT MEDIAN(age), PERCENTILE_CONT(0.9) WITHIN GROUP (ORDER BY age), "
                        "QUANTILE_CONT(age, 0.1) FROM adult")
    assert [p.q for p in plan.primitives] == [0.5, 0.9, 0.1]
    assert plan.quantile_sql is not None


def test_a_hidden_table_is_refused_word_for_word_like_a_missing_one(planner: Planner) -> None:
    """Regression (issue 22.5): a table outside the analyst's list raised AccessDenied (403)
    and a missing one QueryRefused (400), so a restricted analyst could list the hidden
    tables' names. Now both are the same refusal, naming only what was typed."""
    texts = []
    for sql in ("SELECT COUNT(*) FROM adult", "SELECT COUNT(*) FROM adulx",
                "SELECT COUNT(*) FROM ADULT", "SELECT COUNT(*) FROM people JOIN adult ON "
                "people.id = adult.id", "SELECT COUNT(*) FROM people JOIN adulx ON "
                "people.id = adulx.id"):
        with pytest.raises(QueryRefused) as info:
            planner.plan(sql, allowed_tables=("people",))
        assert not isinstance(info.value, AccessDenied)
        texts.append(re.sub(r"'(adult|adulx|ADULT)'", "'T'", str(info.value)))
    assert len(set(texts)) == 1, texts
    assert texts[0] == ("table 'T' is not declared or not open to you (GET /v1/tables lists "
                        "the tables you may query)")
    assert planner.plan("SELECT COUNT(*) FROM adult", allowed_tables=("adult",)).sql


def test_injection_inside_a_literal_stays_a_parameter(planner: Planner) -> None:
    evil = "x' OR '1'='1'; DROP TABLE adult; --"
    plan = planner.plan("SELECT COUNT(*) FROM adult WHERE sex = '" + evil.replace("'", "''")
                        + "'")
    assert plan.params == (evil,)
    assert "DROP" not in plan.sql and "--" not in plan.sql
    plan = planner.plan('SELECT COUNT(*) AS "n""; DROP TABLE adult; --" FROM adult')
    assert plan.outputs[0].name == 'n"; DROP TABLE adult; --' and "DROP" not in plan.sql


def test_plans_are_cached(planner: Planner) -> None:
    a = planner.plan("SELECT COUNT(*) FROM adult WHERE age > 40")
    assert planner.plan("SELECT COUNT(*) FROM adult WHERE age > 40") is a


def test_the_text_is_checked_once_per_plan(planner: Planner,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The query text was checked (length, control characters) twice on a cache miss: in
    `Planner.plan` and again in `Validator.check`. Once now; the validator alone (no
    tokens) still checks it."""
    import privlab.query.planner as planner_module
    import privlab.query.planner.validate as validate_module

    calls: list[str] = []

    def counting(sql: object, max_chars: int) -> str:
        calls.append(str(sql))
        return check_text(sql, max_chars)

    monkeypatch.setattr(planner_module, "check_text", counting)
    monkeypatch.setattr(validate_module, "check_text", counting)
    planner.plan("SELECT COUNT(*) FROM adult WHERE age > 41")
    assert len(calls) == 1
    with pytest.raises(QueryRefused, match="control, format or unassigned"):
        planner._validator.check("SELECT COUNT(*) FROM adult\u200b", None)
    assert len(calls) == 2


@pytest.mark.parametrize(("sql", "reason"), HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_queries_are_refused(planner: Planner, sql: str, reason: str | None) -> None:
    if reason is None:
        planner.plan(sql)  # accepted as a plain filter on a literal (a parameter)
        return
    with pytest.raises(QueryRefused, match=reason) as info:
        planner.plan(sql)
    message = str(info.value)
    assert "\n" not in message and len(message) < 300


def test_reasons_quote_only_the_query_and_the_config(planner: Planner) -> None:
    """A refusal is computed before the engine runs: it cannot depend on the data."""
    with pytest.raises(QueryRefused) as info:
        planner.plan("SELECT COUNT(*) FROM secret_table_name_xyz")
    assert "secret_table_name_xyz" in str(info.value)  # echoes the query, nothing else


@pytest.mark.parametrize(("pattern", "escape", "canonical"), [
    ("abc", "\\", "abc"),
    ("a%b_c", "\\", "a%b_c"),
    ("ab\\\\", "\\", "ab\\"),  # an escaped backslash is a literal backslash
    ("ab\\%", "\\", "ab!%"),  # an escaped wildcard is a literal
    ("100!", "\\", "100!!"),  # our escape character is escaped when literal
    ("50!%!_off", "!", "50!%!_off"),
    ("a\\b", "!", "a\\b"),  # with ESCAPE '!' a backslash is an ordinary character
    ("\\x", "\\", "x"),  # escaping an ordinary character keeps it
])
def test_like_patterns_are_canonicalised(pattern: str, escape: str, canonical: str) -> None:
    assert like_pattern(pattern, escape) == canonical


@pytest.mark.parametrize(("pattern", "escape"), [("ab\\", "\\"), ("\\", "\\"),
                                                 ("ab\\\\\\", "\\"), ("a!", "!")])
def test_like_patterns_ending_in_the_escape_are_refused(pattern: str, escape: str) -> None:
    with pytest.raises(QueryRefused, match="must not end with its escape character"):
        like_pattern(pattern, escape)


def test_like_is_generated_with_our_escape_clause(planner: Planner) -> None:
    plan = planner.plan("SELECT COUNT(*) FROM adult WHERE workclass NOT ILIKE 'Self\\_%' "
                        "AND occupation LIKE 'Tech#%' ESCAPE '#'")
    assert plan.sql.count("ESCAPE '!'") == 2 and "NOT ILIKE" in plan.sql
    assert plan.params[:2] == ("Self!_%", "Tech!%")
    with pytest.raises(QueryRefused, match="ESCAPE takes one character"):
        planner.plan("SELECT COUNT(*) FROM adult WHERE sex LIKE 'M' ESCAPE 'ab'")


def test_plans_are_reused_by_normalised_sql(planner: Planner,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    first = planner.plan("SELECT COUNT(*) FROM adult WHERE fnlwgt > 123 AND sex = 'Male'")

    def no_planning(*_a: object, **_k: object) -> None:
        raise AssertionError("planned again")

    monkeypatch.setattr(planner, "_plan", no_planning)
    second = planner.plan("SELECT COUNT(*) FROM adult WHERE fnlwgt > 456 AND sex = 'Fe''male'")
    assert second.sql == first.sql and second.params == (456, "Fe'male")
    monkeypatch.undo()
    # a literal that would be refused is never bound into a reused plan
    with pytest.raises(QueryRefused, match="64 bits"):
        planner.plan("SELECT COUNT(*) FROM adult WHERE fnlwgt > 99999999999999999999 AND "
                     "sex = 'x'")
    # literals that shape the plan or are rewritten are never abstracted
    for a, b in (("age > -5", "age > -6"), ("sex LIKE 'M%'", "sex LIKE 'M\\%'")):
        p1 = planner.plan(f"SELECT COUNT(*) FROM adult WHERE {a}")
        p2 = planner.plan(f"SELECT COUNT(*) FROM adult WHERE {b}")
        assert p1.params != p2.params
    assert planner.plan("SELECT COUNT(*) FROM adult WHERE age > 1 LIMIT 1").limit == 1
    assert planner.plan("SELECT COUNT(*) FROM adult WHERE age > 1 LIMIT 2").limit == 2


def test_reused_plans_equal_fresh_plans() -> None:
    """Every generated query planned through the normalised cache gives exactly what a
    fresh planner gives (the same plan, or the same refusal)."""
    from hypothesis import HealthCheck, given, settings

    from privlab.testing.gateway import config as persons_config
    from privlab.testing.gateway import gateway_sql

    cfg = persons_config("unused.duckdb", "unused.db")
    cached = Planner(cfg)

    def outcome(p: Planner, sql: str) -> object:
        try:
            return p.plan(sql)
        except QueryRefused as exc:
            return str(exc)

    @settings(max_examples=300, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(gateway_sql())
    def check(query: tuple[str, float, float]) -> None:
        sql = query[0]
        assert outcome(cached, sql) == outcome(Planner(cfg), sql), sql

    check()
    assert len(cached._templates) > 5


def test_a_missing_sqlglot_is_a_missing_extra_not_a_refusal(monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    """The per-thread tokenizer is built outside the tokenizer's error guard: without
    sqlglot the planner must not answer "could not be tokenized" (a 400 blaming the query)."""
    import sys
    import threading

    from privlab.query.config import Limits
    from privlab.query.planner import limits

    monkeypatch.setattr(limits, "_TOKENIZERS", threading.local())
    monkeypatch.setitem(sys.modules, "sqlglot.dialects.dialect", None)
    with pytest.raises(ModuleNotFoundError):
        limits.tokenize("SELECT COUNT(*) FROM adult", Limits())
