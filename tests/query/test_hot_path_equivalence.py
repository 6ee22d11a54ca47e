"""The gateway's hot-path shortcuts (issue 32) give what the general code gives: the stored
text of canonical amounts, the lazily parsed guarantee of a ledger entry, the shared JSON
encoders, and a scalar answer's draw in Python floats."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest

from privlab.core.ledger import BudgetLedger
from privlab.core.ledger.amounts import _add, _add_exact, _canon, _sub_exact, _text, check_charge
from privlab.core.mechanisms import draw_on_grid
from privlab.query.audit.chain import _FIELDS, _row_body
from privlab.query.audit.records import row_values
from privlab.query.measurement import _additive, plan_budget
from privlab.query.noise import _Cells, _exact_values


def _amounts(seed: int, n: int) -> list[Decimal]:
    rng = random.Random(seed)
    out = [Decimal(0), Decimal("1"), Decimal("100"), Decimal("1E+2"), Decimal("0.5000"),
           Decimal("1e-30"), Decimal("123456789.000000000000000000000000000001")]
    for _ in range(n):
        digits = rng.randint(1, 30)
        exponent = rng.randint(-30, 9 - digits)  # below the largest epsilon, 1e9
        out.append(Decimal(rng.randint(0, 10**digits)).scaleb(exponent))
    return out


def test_the_plain_format_of_a_canonical_amount_is_its_stored_text() -> None:
    """`_charge_in` stores `format(x, "f")` of amounts that are canonical (checked amounts and
    `_add` results): exactly `_text(x)`, which canonicalises first."""
    for value in _amounts(7, 2000):
        _, checked, _, _, _ = check_charge("alice", value or Decimal(1), 0.0, "", None)
        assert format(checked, "f") == _text(checked)
        total = _add(checked, _canon(value))
        assert format(total, "f") == _text(total)


def test_the_views_exact_sums_compare_as_the_canonical_ones() -> None:
    """`BudgetView` adds without the canonical form: the same numbers, so the same
    comparisons (and `_sub_exact` undoes `_add_exact` exactly)."""
    values = _amounts(11, 500)
    for a, b in zip(values, values[1:], strict=False):
        assert _add_exact(a, b) == _add(a, b)
        assert _sub_exact(_add_exact(a, b), b) == a


def test_a_ledger_entry_parses_its_stored_guarantee_when_read(tmp_path: Path) -> None:
    guarantee = {"epsilon": 0.5, "mechanism": "laplace", "notes": ["a", "b"]}
    with BudgetLedger(str(tmp_path / "ledger.db")) as book:
        book.set_budget("alice", 5.0, 1e-6)
        entry = book.charge("alice", 0.5, description="q", guarantee=guarantee)
        assert entry.guarantee == guarantee
        first = entry.guarantee
        first["notes"].append("changed")  # a fresh dict per read: the entry is unchanged
        assert entry.guarantee == guarantee
        (stored,) = book.history("alice")
        assert stored.guarantee == guarantee and stored.guarantee_text == entry.guarantee_text
        assert entry.to_dict()["guarantee"] == guarantee
        plain = book.charge("alice", 0.25, description="no guarantee")
        assert plain.guarantee is None and plain.guarantee_text is None


def test_the_shared_encoders_write_what_json_dumps_writes() -> None:
    """The audit row's MAC covers `_row_body` (an old log must still verify) and its stored
    result: both byte for byte what `json.dumps` with the same options writes."""
    values = row_values("ab" * 16, "released", analyst="alice", sql="SELECT 'é' \x00",
                        epsilon=0.5, delta=1e-6, ledger_entry_id=3, epsilon_spent=0.5,
                        delta_spent=0.0,
                        result={"columns": ["n"], "rows": [[1, 2.5, "x", None]],
                                "when": datetime(2026, 1, 2, tzinfo=UTC),
                                "amount": Decimal("1.5")})
    assert values["result"] == json.dumps(
        {"columns": ["n"], "rows": [[1, 2.5, "x", None]],
         "when": datetime(2026, 1, 2, tzinfo=UTC), "amount": Decimal("1.5")},
        default=str, allow_nan=False)
    values["odd"] = Decimal("2")  # not a field: ignored by both
    values["created_at"] = datetime(2026, 1, 2, tzinfo=UTC)  # default=str
    assert _row_body(values) == json.dumps({k: values.get(k) for k in _FIELDS},
                                           sort_keys=True, default=str, separators=(",", ":"))
    with pytest.raises(ValueError):
        row_values("q", "released", result={"rows": [[float("nan")]]})


class _Plan:
    """The parts of a `QueryPlan` that `_exact_values` and `plan_budget` read."""

    def __init__(self, primitives: tuple[object, ...]) -> None:
        self.primitives = primitives
        self.partition_selection = False
        self.measures: dict[int, object] = {}


@pytest.mark.parametrize("mechanism", ["laplace", "gaussian"])
@pytest.mark.parametrize("integer", [True, False])
@pytest.mark.parametrize("sensitivity", [1.0, 3.0, 40.0])
def test_a_scalar_draw_in_floats_is_the_arrays_draw(mechanism: str, integer: bool,
                                                   sensitivity: float) -> None:
    """`AdditiveNoise.draw_one` (the scalar answer's path) draws the same value from the same
    stream as the mechanisms' `draw_on_grid` of the 0-d value, for 200 seeds and values."""
    from privlab.query.planner import Primitive

    plan = _Plan((Primitive("count"),))
    budget = plan_budget(plan, 0.7, 1e-6 if mechanism == "gaussian" else 0.0,  # type: ignore
                         mechanism)
    noise = _additive(sensitivity, integer, budget, 1, 1, True)
    for seed in range(200):
        value = float(seed * 7 - 300) if integer else seed * 0.37 - 20.0
        one = noise.draw_one(value, np.random.default_rng(seed))
        ref = draw_on_grid(np.asarray(value), noise.granularity, noise.steps,
                           gaussian=noise.gaussian, exact=noise.exact,
                           integer_valued=noise.integer, rng=np.random.default_rng(seed))
        assert type(one) is float
        assert one == float(ref)


def test_a_scalar_cells_exact_value_is_the_arrays() -> None:
    """`_Cells.exact_one` reads the one cell as `exact` does (NULL and a missing row: 0), and
    the centred sum's arithmetic in floats equals the array's."""
    from privlab.query.planner import Primitive

    index = {"__n": 0, "__s0": 1, "__c0": 2}
    for row in ((12, 345.5, 10), (0, None, 0), None):
        cells = _Cells([()], {} if row is None else {(): row}, index, 1, phantom=False)
        for column in index:
            assert cells.exact_one(column) == cells.exact(column)[0]

        class _Measure:
            index = 0
            clamp = (1.0, 8.0)

        plan = _Plan((Primitive("csum", 0),))
        plan.measures = {0: _Measure()}
        one = _exact_values(plan, Primitive("csum", 0), cells.exact_one)  # type: ignore
        arr = _exact_values(plan, Primitive("csum", 0), cells.exact)  # type: ignore
        assert type(one) is float and one == arr[0]


def test_a_spend_of_more_than_28_significant_digits_is_stored_exactly(tmp_path: Path) -> None:
    """The canonical form is computed in the ledger's exact context: the default decimal
    context (28 digits) stored 0.5 + 1e-30 as 0.5, under-counting the spend."""
    with BudgetLedger(str(tmp_path / "ledger.db")) as book:
        book.set_budget("alice", 5.0)
        book.charge("alice", Decimal("0.5"))
        entry = book.charge("alice", Decimal("1e-30"))
        exact = Decimal("0.500000000000000000000000000001")
        assert entry.spent_epsilon_exact == exact
        assert book.status("alice").spent_epsilon_exact == exact
        assert book.verify().ok


def test_a_bound_template_is_the_replaced_plan(tmp_path: Path) -> None:
    """`_Template.bind` copies the plan's fields with the new literals: equal to
    `dataclasses.replace(plan, params=...)`, a new object, the template untouched."""
    import dataclasses

    from gw_fixtures import SMALL_JOINS, SMALL_TABLES, analysts

    from privlab.query.config import parse_config
    from privlab.query.planner import Planner, QueryPlan

    config = parse_config({"database": {"url": str(tmp_path / "x.duckdb")},
                           "ledger": str(tmp_path / "l.db"), "tables": SMALL_TABLES,
                           "joins": SMALL_JOINS, "analysts": analysts(10.0, 1e-6)})
    planner = Planner(config)
    first = planner.plan("SELECT COUNT(*) FROM people WHERE age > 30 AND region = 'north'")
    second = planner.plan("SELECT COUNT(*) FROM people WHERE age > 41 AND region = 'south'")
    assert len(planner._templates) == 1
    assert type(second) is QueryPlan and second is not first
    assert second == dataclasses.replace(first, params=(41, "south", *first.params[2:]))
    assert set(vars(second)) == {f.name for f in dataclasses.fields(QueryPlan)}
    assert first.params[:2] == (30, "north")


def test_a_floats_json_is_json_dumps() -> None:
    from privlab.query.gateway import _float_json

    rng = np.random.default_rng(3)
    values = [0.0, -0.0, 1.0, 0.1, 1e-300, 5e-324, 1.7976931348623157e308, 123456789.125,
              *rng.standard_normal(200) * 10.0 ** rng.integers(-20, 20, 200)]
    for value in values:
        assert _float_json(float(value)) == json.dumps(float(value))
        assert _float_json(np.float64(value)) == json.dumps(np.float64(value))
    for bad in (float("nan"), float("inf"), -float("inf")):
        with pytest.raises(ValueError):
            _float_json(bad)


@pytest.mark.parametrize("mechanism", ["laplace", "gaussian"])
@pytest.mark.parametrize("integer", [True, False])
@pytest.mark.parametrize("secure", [True, False])
def test_a_few_cells_draw_in_floats_is_the_arrays_draw(mechanism: str, integer: bool,
                                                       secure: bool) -> None:
    """`AdditiveNoise.draw_cells` (a GROUP BY answer's cells) draws the same values from the
    same stream as the mechanisms' `draw_on_grid`, seeded or on the CSPRNG (keyed here), for
    0 to 40 cells (above 32 it is `draw_on_grid` itself)."""
    from randomgen import ChaCha

    from privlab.query.planner import Primitive

    plan = _Plan((Primitive("count"),))
    budget = plan_budget(plan, 0.9, 1e-6 if mechanism == "gaussian" else 0.0,  # type: ignore
                         mechanism)
    for n in (0, 1, 2, 5, 32, 33, 40):
        noise = _additive(3.0, integer, budget, min(3, max(n, 1)), max(n, 1), False)
        for seed in range(25):
            values = np.arange(n, dtype=np.float64) * (7.0 if integer else 0.73) - 11.0

            def gen(seed: int = seed) -> np.random.Generator:
                return np.random.Generator(ChaCha(key=seed, counter=0, rounds=20)) if secure \
                    else np.random.default_rng(seed)
            first, second = gen(), gen()
            got = noise.draw_cells(values, first)
            ref = draw_on_grid(values, noise.granularity, noise.steps,
                               gaussian=noise.gaussian, exact=noise.exact,
                               integer_valued=noise.integer, rng=second)
            assert list(got) == ref.astype(np.float64).tolist()
            assert np.array_equal(first.bit_generator.random_raw(4),  # the same bits used
                                  second.bit_generator.random_raw(4))


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), 2.5, 1e300])
def test_a_few_cells_refuse_as_the_array_does(bad: float) -> None:
    """A value the grid refuses raises the array path's message (NaN and 2.5 on integer data:
    not an integer; infinity: not finite; 1e300: more than 2^52 grid steps)."""
    from privlab.errors import InvalidInputError
    from privlab.query.planner import Primitive

    budget = plan_budget(_Plan((Primitive("count"),)), 1.0, 0.0, None)  # type: ignore
    noise = _additive(1.0, True, budget, 1, 3, False)
    values = np.array([1.0, bad, 3.0])
    with pytest.raises(InvalidInputError) as expected:
        draw_on_grid(values, noise.granularity, noise.steps, gaussian=noise.gaussian,
                     exact=noise.exact, integer_valued=noise.integer,
                     rng=np.random.default_rng(1))
    with pytest.raises(InvalidInputError) as got:
        noise.draw_cells(values, np.random.default_rng(1))
    assert str(got.value) == str(expected.value)


def test_the_one_shot_macs_are_the_hmac_objects() -> None:
    """Rows and checkpoints signed by `hmac.digest` carry the MAC `hmac.new(...).hexdigest()`
    gave (logs written before still verify)."""
    import hashlib
    import hmac

    from privlab.query.audit.chain import _mac
    from privlab.query.audit.checkpoint import _checkpoint_mac

    for key in (b"k" * 32, bytes(range(64)), b""):
        for data in (b"", b"privlab-audit-row:2:1:" + b"0" * 64, "é".encode() * 300):
            assert _mac(data, key) == hmac.new(key, data, hashlib.sha256).hexdigest()
        assert _checkpoint_mac(key, 12, "ab" * 32) == hmac.new(
            key, f"privlab-audit-head:12:{'ab' * 32}".encode(), hashlib.sha256).hexdigest()
    assert _mac(b"x", None) == hashlib.sha256(b"x").hexdigest()
