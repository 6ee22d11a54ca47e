"""`privlab release ... --schema`: neighbouring tables give the same output except the noise.

For every statistic, on D (300 Adult rows) and on each one-row edit D' with the same seed, the
JSON must agree on everything but the noised value (and a mean's noisy sum and count): keys,
labels (the histogram's categories or bins, from the schema), grid, noise scale, guarantee.
In refuse mode a D' may instead be refused with exit 2 and a one-line error naming the column.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from neighbours import assert_same_structure, one_row_edits, register_front_end

from privlab.cli.main import main
from privlab.measure.analysis import Analysis
from privlab.schema import bundled_schema

#: *_half_width_95_approx: computed from the noisy count (post-processing of a noised value)
NOISED = ("value", "noisy_sum", "noisy_count", "mean_half_width_95_approx",
          "noisy_centred_sum", "noisy_centred_sum_squares", "variance_half_width_95_approx",
          "stddev_half_width_95_approx")
STATS = [
    ["count", "--column", "age"],
    ["sum", "--column", "age"],
    ["mean", "--column", "age"],
    ["quantile", "--column", "age", "--q", "0.5"],
    ["histogram", "--column", "workclass"],
    ["histogram", "--column", "age", "--bins", "8"],
    ["variance", "--column", "age"],
    ["stddev", "--column", "hours-per-week"],
]


@pytest.fixture(scope="module")
def adult(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Path]]:
    from privlab.data.datasets import load_adult

    root = tmp_path_factory.mktemp("release")
    frame = load_adult().head(300).reset_index(drop=True)
    base = root / "D.csv"
    frame.to_csv(base, index=False)
    paths = {}
    for name, edited in one_row_edits(frame, bundled_schema("adult")).items():
        paths[name] = root / f"{name}.csv"
        edited.to_csv(paths[name], index=False)
    return base, paths


def _run(capsys: pytest.CaptureFixture[str], path: Path, argv: list[str], *extra: str
         ) -> tuple[int, dict | str]:
    code = main(["release", argv[0], str(path), *argv[1:], "--epsilon", "1", "--seed", "9",
                 "--json", *extra])
    out = capsys.readouterr()
    return code, (json.loads(out.out) if code == 0 else out.err.strip())


@pytest.mark.parametrize("policy", ["refuse", "coerce"])
@pytest.mark.parametrize("argv", STATS, ids=lambda a: "-".join(a[0::2]))
def test_one_row_edits_change_only_the_noised_value(adult, capsys, argv, policy) -> None:
    base, edits = adult

    def refused(out: tuple[int, dict | str]) -> bool:
        """Refuse mode only: exit 2, one line naming the released column."""
        code, doc = out
        if code == 0:
            return False
        assert policy == "refuse" and code == 2, out
        assert doc.startswith(f"error: column '{argv[2]}'"), doc
        assert len(doc.splitlines()) == 1, doc
        return True

    front = register_front_end(
        "release", lambda path: _run(capsys, path, argv, "--schema", "adult",
                                     "--on-invalid", policy),
        noised=NOISED, refused=refused)
    code, ref = front.run(base)
    assert code == 0 and ref["guarantee"]["is_dp"] and ref["guarantee"]["covers"], ref
    outcome = front.check(base, edits)
    assert set(outcome) == set(edits)
    assert "same" in outcome.values()  # the battery is not refused wholesale


def test_histogram_domain_comes_from_the_schema_not_the_data(adult, capsys) -> None:
    """Regression: a histogram's categories and bins are the schema's, whatever the rows hold."""
    base, edits = adult
    code, doc = _run(capsys, base, ["histogram", "--column", "workclass"], "--schema", "adult")
    assert code == 0, doc
    declared = list(bundled_schema("adult").column("workclass").categories)
    assert doc["details"]["labels"][:len(declared)] == declared
    code, doc = _run(capsys, base, ["histogram", "--column", "age"], "--schema", "adult")
    lo, hi = bundled_schema("adult").column("age").bounds
    assert doc["details"]["labels"][0].startswith(f"[{lo:g},")
    assert doc["details"]["labels"][-1].endswith(f"{hi:g}]")


def test_person_level_schema_bounds_contributions(tmp_path, capsys) -> None:
    """movielens-ratings has privacy unit userId: record-level neighbouring is refused, and
    with --max-rows-per-unit the claim is per user and adding a whole user changes only the
    noise."""
    from privlab.data.datasets import load_movielens

    ratings = load_movielens("ratings")
    frame = ratings[ratings["userId"] <= 15].reset_index(drop=True)
    d = tmp_path / "D.csv"
    frame.to_csv(d, index=False)
    added = pd.concat([frame, frame[frame["userId"] == 1].assign(userId=777)],
                      ignore_index=True)
    d2 = tmp_path / "D2.csv"
    added.to_csv(d2, index=False)
    argv = ["mean", "--column", "rating"]
    code, err = _run(capsys, d, argv, "--schema", "movielens-ratings")
    assert code == 2 and "--max-rows-per-unit" in err
    extra = ("--schema", "movielens-ratings", "--max-rows-per-unit", "20")
    code, ref = _run(capsys, d, argv, *extra)
    assert code == 0, ref
    g = ref["guarantee"]
    assert g["neighbouring"] == "user" and g["epsilon"] == 1.0 and g["is_dp"]
    assert any("epsilon/20" in n for n in g["notes"])
    code, doc = _run(capsys, d2, argv, *extra)
    assert code == 0
    assert_same_structure(ref, doc, noised=NOISED)


@pytest.mark.parametrize("argv", STATS, ids=lambda a: "-".join(a[0::2]))
def test_empty_table_releases_like_its_one_row_neighbour(tmp_path, capsys, argv) -> None:
    """Regression (issue 21, item 6): a header-only table was refused (exit 2) while its
    one-row neighbour released; now both exit 0 with the same structure and guarantee."""
    from privlab.data.datasets import load_adult

    one = load_adult().head(1)
    paths = {"empty": tmp_path / "empty.csv", "one": tmp_path / "one.csv"}
    one.head(0).to_csv(paths["empty"], index=False)
    one.to_csv(paths["one"], index=False)
    docs = {}
    for name, path in paths.items():
        code, docs[name] = _run(capsys, path, argv, "--schema", "adult")
        assert code == 0, (name, docs[name])
    assert_same_structure(docs["empty"], docs["one"], noised=NOISED)


def test_gaussian_delta_check_uses_the_schema_size_not_the_rows(tmp_path, capsys) -> None:
    """Regression (issue 21, item 1) on the harness's own data: neighbours either side of
    1/delta rows get the same exit code and stderr (the check reads no row count)."""
    from privlab.data.datasets import load_adult

    rows = load_adult().head(1000)
    results = []
    for n in (999, 1000):
        path = tmp_path / f"a{n}.csv"
        rows.head(n).to_csv(path, index=False)
        for extra in ([], ["--allow-weak"]):
            code = main(["release", "count", str(path), "--column", "age", "--epsilon", "1",
                         "--mechanism", "gaussian", "--delta", "1e-3", "--schema", "adult",
                         "--seed", "1", "--json", *extra])
            results.append((n, tuple(extra), code, capsys.readouterr().err))
    assert results[0][2:] == results[2][2:] and results[1][2:] == results[3][2:]
    assert all("999" not in r[3] and "1000 rows" not in r[3] for r in results)


#: issue 31: the library's analysis plans, a by-group plan (every declared group released,
#: an integer `by` binned by the schema) and a mixed Laplace/Gaussian plan composed by PLD
PLANS = {
    "by-group": lambda: Analysis("adult", epsilon=1.0).add(
        "mean", "hours-per-week", weight=2, by="sex").add(
        "histogram", "education", by="race").add("count", by="age"),
    "mixed": lambda: Analysis("adult", epsilon=1.0, delta=1e-6).add(
        "count", mechanism="laplace", by="workclass").add(
        "mean", "age", mechanism="gaussian", weight=2).add("quantile", "hours-per-week"),
}


@pytest.mark.parametrize("policy", ["refuse", "coerce"])
@pytest.mark.parametrize("name", sorted(PLANS))
def test_analysis_plan_one_row_edits_change_only_the_noise(adult, name, policy) -> None:
    """`Analysis.run` on D and each D' (same seed): same keys (the declared groups), same
    guarantee and accountant; refuse mode may refuse a D' with one line naming a column."""
    from privlab.errors import InvalidInputError

    base, edits = adult
    plan = PLANS[name]()

    def run(path: Path) -> dict | str:
        try:
            return plan.run(path, rng=9, on_invalid=policy)
        except InvalidInputError as exc:
            return str(exc)

    def refused(out: dict | str) -> bool:
        if isinstance(out, dict):
            return False
        assert policy == "refuse" and out.startswith("column '") and "\n" not in out, out
        return True

    front = register_front_end("analysis plan", run, noised=NOISED, refused=refused)
    ref = front.run(base)
    assert isinstance(ref, dict), ref
    assert ref["guarantee"]["accountant"].startswith(
        "PLD" if name == "mixed" else "sequential composition")
    outcome = front.check(base, edits)
    assert set(outcome) == set(edits) and "same" in outcome.values()
