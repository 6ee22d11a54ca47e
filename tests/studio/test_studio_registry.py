"""The studio's protect step is built from the statistics registry (`privlab.measure.stats`):
it offers every statistic there but the quantile, previews the registry's half-width before
any row, and releases with the registry's definition (the value `privlab.measure` gives)."""

from __future__ import annotations

import pytest

from privlab.core.ledger import BudgetLedger
from privlab.data.datasets import load_dataset
from privlab.measure import measurement, stats
from privlab.schema import load_schema
from privlab.studio import protect as prot
from privlab.studio.sources import Source


def test_the_studio_offers_the_registry() -> None:
    offered = tuple(n for n in stats.names() if n != "quantile")
    assert offered == prot.STATISTICS
    assert {"variance", "stddev"} <= set(prot.STATISTICS)
    plan = prot.parse_plan({"statistic": "stddev", "column": "age", "epsilon": "1"})
    assert plan.statistic == "stddev"


@pytest.mark.parametrize("stat", ["variance", "stddev"])
def test_preview_states_the_registry_half_width_before_any_row(stat: str) -> None:
    schema = load_schema("adult")
    plan = prot.parse_plan({"statistic": stat, "column": "age", "epsilon": "1.5",
                            "expected_rows": "2000"})
    out = prot.preview(schema, plan)
    assert [eps for _, eps in out["split"]] == pytest.approx([0.5, 0.5, 0.5])
    assert [w for w, _ in out["split"]] == list(stats.get(stat).noise_words)
    m = measurement(schema, stat, "age", epsilon=1.5)
    want = stats.get(stat).half_width(
        stats.Inputs(m.domain.bounds, None, None, None, True, m.mechanism, 1.5, 0.0,
                     public_size=2000), m.noise)
    assert out["approx"] == (f"{stat} half-width (first order)", want)
    assert "no closed form" in out["half_width_words"]
    with pytest.raises(Exception, match="needs an integer or numeric column"):
        prot.preview(schema, prot.parse_plan({"statistic": stat, "column": "race",
                                              "epsilon": "1"}))


def test_release_is_the_registry_release(tmp_path) -> None:  # type: ignore[no-untyped-def]
    schema = load_schema("adult")
    frame = load_dataset("adult")
    ledger = BudgetLedger(str(tmp_path / "ledger.db"))
    source = Source("bundled", "adult", None)
    ledger.set_budget(source.principal, 10.0, 0.0)
    plan = prot.Plan("stddev", "age", 1.0)
    result, _ = prot.release(frame, schema, plan, ledger=ledger, principal=source.principal,
                             source=source, rng=11)
    want = measurement(schema, "stddev", "age", epsilon=1.0)(frame, rng=11)
    assert result.payload["value"] == want.value
    assert result.payload["half_width_words"].startswith("about ")
    assert result.payload["guarantee"]["epsilon"] == 1.0
    ledger.close()


@pytest.mark.parametrize("stat,column", [("histogram", "age"), ("mean", "hours-per-week"),
                                         ("variance", "age")])
def test_studio_and_measure_release_alike(stat: str, column: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Same seed, same value and labels: the studio's histogram of an integer column uses
    the integer bins of `privlab release` (it used real-valued edges before the registry)."""
    schema = load_schema("adult")
    frame = load_dataset("adult")
    ledger = BudgetLedger(str(tmp_path / "ledger.db"))
    source = Source("bundled", "adult", None)
    ledger.set_budget(source.principal, 10.0, 0.0)
    result, _ = prot.release(frame, schema, prot.Plan(stat, column, 1.0), ledger=ledger,
                             principal=source.principal, source=source, rng=5)
    want = measurement(schema, stat, column, epsilon=1.0)(frame, rng=5)
    assert result.payload["value"] == want.to_dict()["value"]
    assert (result.payload.get("details") or {}).get("labels") == \
        (want.details or {}).get("labels")
    ledger.close()
