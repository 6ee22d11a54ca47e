"""privlab studio's release path: neighbouring tables give the same output except the noise.

For each statistic the studio offers (also by group), on D (300 Adult rows) and on each
one-row edit D' (`neighbours.one_row_edits`) with the same seed, the release the studio
keeps (the JSON it offers as release.json, the rerun script, the CLI command, the ledger's
remaining budget) agrees on everything but the noised values: keys, labels, groups, grid,
noise scale, guarantee."""

from __future__ import annotations

from pathlib import Path

import pytest
from neighbours import one_row_edits, register_front_end

pytest.importorskip("fastapi", reason="privlab studio needs the [studio] extra")

from privlab.core.ledger import BudgetLedger  # noqa: E402
from privlab.schema import bundled_schema  # noqa: E402
from privlab.studio import protect  # noqa: E402
from privlab.studio.sources import bundled  # noqa: E402

#: noised values and their post-processing: a ratio's half-width is stated at its noisy count
NOISED = ("value", "noisy_sum", "noisy_count", "noisy_centred_sum", "noisy_centred_sum_squares",
          "mean_half_width_95_approx", "half_width_words")
PLANS = [("count", "age", None), ("sum", "hours-per-week", None), ("mean", "age", None),
         ("histogram", "workclass", None), ("histogram", "age", None),
         ("mean", "age", "sex"), ("count", "age", "workclass"), ("variance", "age", None),
         ("stddev", "hours-per-week", "sex")]


@pytest.fixture(scope="module")
def tables():
    from privlab.data.datasets import load_adult

    frame = load_adult().head(300).reset_index(drop=True)
    return frame, one_row_edits(frame, bundled_schema("adult"))


def _release(frame, plan: protect.Plan, book_path: Path) -> dict:
    """One release charged to a fresh ledger at `book_path` (so the entry id, the remaining
    budget, the rerun script and the CLI command are compared whole between D and D')."""
    book_path.unlink(missing_ok=True)
    book = BudgetLedger(str(book_path))
    try:
        book.set_budget("curator", 1000)
        result, _ = protect.release(frame, bundled_schema("adult"), plan, ledger=book,
                                    principal="curator", source=bundled("adult"), rng=7)
    finally:
        book.close()
    out = dict(result.payload)
    ledger = out.pop("ledger")
    return {"release": out, "script": result.script, "cli": result.cli,
            "ledger": {k: ledger[k] for k in ("entry_id", "remaining_epsilon")}}


@pytest.mark.parametrize("stat,column,by", PLANS, ids=lambda x: str(x))
def test_one_row_edits_change_only_the_noised_values(tables, tmp_path: Path, stat: str,
                                                     column: str, by: str | None) -> None:
    base, edits = tables
    plan = protect.Plan(stat, column, 1.0, by=by)
    front = register_front_end("studio", lambda frame: _release(frame, plan, tmp_path / "b.db"),
                               noised=NOISED)
    assert set(front.check(base, edits).values()) == {"same"}  # the studio never refuses
