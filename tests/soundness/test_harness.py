"""The neighbour harness itself (`privlab.testing`): it must catch a front end whose output
depends on the data outside its noised keys, accept one that does not, and ship outside
`privlab.query`."""

from __future__ import annotations

import importlib.util

import pandas as pd
import pytest

from privlab.schema import bundled_schema
from privlab.testing import (
    check_front_end,
    front_end,
    front_ends,
    one_row_edits,
    register_front_end,
)


@pytest.fixture(scope="module")
def tables() -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
    from privlab.data.datasets import load_adult

    frame = load_adult().head(50).reset_index(drop=True)
    return frame, one_row_edits(frame, bundled_schema("adult"))


def _counting(frame: pd.DataFrame) -> dict:
    return {"statistic": "count", "value": float(len(frame)), "n_rows": len(frame)}


def test_a_leak_outside_the_noised_keys_is_caught_naming_the_edit(tables) -> None:
    base, edits = tables
    with pytest.raises(AssertionError, match=r"leaky\[remove\]\.n_rows"):
        check_front_end(_counting, base, edits, noised={"value"}, name="leaky")


def test_only_noised_values_differing_passes(tables) -> None:
    base, edits = tables
    front = register_front_end("count-only", lambda f: {"value": float(len(f)), "eps": 1.0},
                               noised={"value"})
    assert front.check(base, edits) == {name: "same" for name in edits}
    assert front_end("count-only") is front and "count-only" in front_ends()


def test_noised_key_must_keep_its_shape(tables) -> None:
    base, edits = tables
    with pytest.raises(AssertionError, match="lengths differ"):
        check_front_end(lambda f: {"value": [1.0] * len(f)}, base, edits, noised={"value"})


def test_refusals_are_allowed_on_d_prime_only(tables) -> None:
    base, edits = tables

    def run(frame: pd.DataFrame) -> tuple[int, str]:
        return (2, "error: column 'age'") if len(frame) != len(base) else (0, "ok")

    out = check_front_end(run, base, edits, refused=lambda o: o[0] == 2)
    assert out["remove"] == out["add"] == "refused" and out["rare_category"] == "same"
    with pytest.raises(AssertionError, match="D itself refused"):
        check_front_end(run, base, edits, refused=lambda o: True)


def test_unknown_front_end_names_the_registered_ones() -> None:
    register_front_end("known", lambda f: {})
    with pytest.raises(KeyError, match="known"):
        front_end("unknown")


def test_nothing_of_the_harness_ships_inside_query() -> None:
    assert importlib.util.find_spec("privlab.query.neighbours") is None
    assert importlib.util.find_spec("privlab.testing.gateway") is not None
