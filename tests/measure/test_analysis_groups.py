"""Analysis plans with `by:` groups (declared groups only, parallel composition, the person
bound applied before the split) and PLD composition for mixed Laplace/Gaussian plans
(checked against dp-accounting's public PLD accountant)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from privlab.cli.main import main
from privlab.errors import InvalidInputError
from privlab.measure.analysis import Analysis, plan_draws, zcdp_epsilon
from privlab.measure.groups import MISSING, groups_of

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def adult() -> pd.DataFrame:
    from privlab.data.datasets import load_dataset

    return load_dataset("adult").head(200)


def test_every_declared_group_is_released_even_an_empty_one(adult: pd.DataFrame) -> None:
    """The keys come from the schema: a table without a single woman still releases a
    Female count (noise around 0), in the declared order."""
    men = adult[adult["sex"] == "Male"]
    out = Analysis("adult", epsilon=1e4).add("count", by="sex").run(men, rng=1)
    (release,) = out["releases"]
    assert release["groups"] == ["Female", "Male"] == list(release["value"])
    # epsilon 1e4: the geometric noise is 0 with probability 1 - O(e^-5000)
    assert release["value"] == {"Female": 0, "Male": len(men)}
    assert [p["group"] for p in release["per_group"]] == ["Female", "Male"]


def test_missing_and_other_groups_follow_the_schema() -> None:
    from privlab.schema import bundled_schema

    sch = bundled_schema("adult")
    work = groups_of(sch, "workclass", None)  # declared missing: a group of its own
    assert work.labels[-1] == MISSING and len(work.labels) == len(
        sch.column("workclass").categories) + 1
    assert MISSING not in groups_of(sch, "sex", None).labels


def test_a_by_group_item_costs_one_group() -> None:
    """Parallel composition: grouping changes no epsilon (item's nor total's), and the item's
    guarantee says why."""
    plain = Analysis("adult", epsilon=1.0).add("mean", "hours-per-week", weight=2).add("count")
    grouped = (Analysis("adult", epsilon=1.0).add("mean", "hours-per-week", weight=2, by="sex")
               .add("count", by="education"))
    assert grouped.composed().epsilon == plain.composed().epsilon == pytest.approx(1.0)
    items = grouped.item_guarantees()
    assert [g.epsilon for g in items] == pytest.approx([2 / 3, 1 / 3])
    assert "compose in parallel" in items[0].notes[-1]
    assert "per declared group of 'sex'" in items[0].covers[0]


def test_integer_by_uses_the_histogram_bins(adult: pd.DataFrame) -> None:
    """An integer `by` column is grouped into the bins a histogram of it would count
    (declared bounds, clamped into the end bins), with the histogram's labels."""
    from privlab.core.queries import histogram_edges
    from privlab.schema import bundled_schema

    sch = bundled_schema("adult")
    g = groups_of(sch, "age", "hours-per-week")
    edges, labels = histogram_edges((17.0, 90.0), 10, True)
    assert g.labels == tuple(labels)
    frame = pd.DataFrame({"age": [3, 17, 23, 24, 90, 200, 50]})
    expected, _ = np.histogram(np.clip(frame["age"], edges[0], edges[-1] - 1), bins=edges)
    assert [len(p) for p in g.split(frame)] == list(expected)


@pytest.mark.parametrize("by, column, words", [
    ("fnlwgt_typo", "age", "not a column"),
    ("age", "age", "the statistic's own column"),
])
def test_by_refused_with_one_line(by: str, column: str, words: str) -> None:
    with pytest.raises(InvalidInputError, match=words):
        Analysis("adult").add("mean", column, by=by)


def test_by_refuses_a_column_without_declared_groups(tmp_path: Path) -> None:
    spec = {"name": "t", "columns": {"x": {"type": "numeric", "bounds": [0, 1]},
                                     "y": {"type": "integer", "bounds": [0, 9]}}}
    (tmp_path / "s.json").write_text(json.dumps(spec))
    with pytest.raises(InvalidInputError, match="by: 'x' is declared numeric"):
        Analysis(str(tmp_path / "s.json")).add("count", by="x")
    assert Analysis(str(tmp_path / "s.json")).add("count", by="y").groups()[0].labels == \
        tuple(str(v) for v in range(10)) + (MISSING,)  # missing values allowed: a group


def test_person_rows_are_bounded_before_the_split(tmp_path: Path) -> None:
    """With M = 2 a person keeps their first 2 rows over all groups (here both Female), not
    2 in each group: their later Male rows are dropped."""
    spec = {"name": "p", "privacy_unit": "pid", "max_rows_per_unit": 2,
            "columns": {"pid": {"type": "identifier"},
                        "sex": {"type": "categorical", "categories": ["Female", "Male"]}}}
    (tmp_path / "s.json").write_text(json.dumps(spec))
    frame = pd.DataFrame({"pid": [1, 1, 1, 1, 2], "sex": ["Female", "Female", "Male", "Male",
                                                         "Male"]})
    a = Analysis(str(tmp_path / "s.json"), epsilon=1e5).add("count", by="sex")
    (release,) = a.run(frame, rng=3)["releases"]
    assert release["value"] == {"Female": 2, "Male": 1, MISSING: 0}
    note = a.item_guarantees()[0].notes[-1]
    assert "up to 2 groups" in note and "2 add/remove steps in total" in note


def test_preview_states_the_per_group_half_width() -> None:
    """The noise is the same in every group: a count's half-width is the ungrouped one; a
    mean's has no per-group closed form (no public group size), its noisy sum's and
    count's half-widths are stated instead."""
    plain = Analysis("adult", epsilon=1.0).add("count").add("mean", "age").preview()
    grouped = Analysis("adult", epsilon=1.0).add("count", by="sex").add(
        "mean", "age", by="sex").preview()
    count, mean = grouped["measurements"]
    assert count["groups"] == ["Female", "Male"] and count["by"] == "sex"
    assert count["half_width_95"] == plain["measurements"][0]["half_width_95"] > 0
    assert mean["half_width_95"] is None
    planned = Analysis("adult", epsilon=1.0).add("count").add("mean", "age").measurements()
    assert mean["noise_half_widths_95"] == [n.half_width() for n in planned[1].noise]
    assert len(mean["noise_half_widths_95"]) == 2 and min(mean["noise_half_widths_95"]) > 0
    assert "in each group" in grouped["describe"][0]
    assert "2 declared groups: Female, Male" in grouped["describe"][1]


def test_by_round_trips_through_the_plan_and_the_package(adult: pd.DataFrame,
                                                         tmp_path: Path) -> None:
    a = Analysis("adult", epsilon=1.0).add("sum", "hours-per-week", by="age").add("count")
    first = a.run(adult, rng=5, out=tmp_path)
    saved = json.loads((tmp_path / "release.json").read_text())
    assert saved["plan"]["statistics"][0]["by"] == "age"
    again = Analysis.from_plan(saved["plan"]).run(adult, rng=5)
    assert [r["value"] for r in again["releases"]] == [r["value"] for r in first["releases"]]
    assert len(saved["releases"][0]["value"]) == 10


def test_example_by_group_plan_from_the_command_line(adult: pd.DataFrame, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture) -> None:
    data = tmp_path / "adult.csv"
    adult.to_csv(data, index=False)
    plan = EXAMPLES / "analysis_by_group.yaml"
    assert main(["release", "plan", str(tmp_path / "absent.csv"), "--plan", str(plan),
                 "--preview"]) == 0
    assert "by sex (2 declared groups: Female, Male)" in capsys.readouterr().out
    assert main(["release", "plan", str(data), "--plan", str(plan), "-o", str(tmp_path / "o"),
                 "--seed", "4"]) == 0
    text = capsys.readouterr().out
    assert "(1)-DP in total" in text and "mean of hours-per-week by sex: Female: " in text
    package = json.loads((tmp_path / "o" / "release.json").read_text())
    assert list(package["releases"][0]["value"]) == ["Female", "Male"]
    assert package["guarantee"]["epsilon"] == pytest.approx(1.0)


def test_by_on_an_undeclared_column_exits_2_naming_it(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture) -> None:
    (tmp_path / "plan.yaml").write_text("schema: adult\nstatistics:\n  - statistic: count\n"
                                        "    by: gender\n")
    assert main(["release", "plan", str(tmp_path / "x.csv"), "--plan",
                 str(tmp_path / "plan.yaml")]) == 2
    assert "by: 'gender' is not a column of schema 'adult'" in capsys.readouterr().err


# ------------------------------------------------------------------ PLD for mixed plans
def _mixed(epsilon: float = 1.0, delta: float = 1e-6) -> Analysis:
    return (Analysis("adult", epsilon=epsilon, delta=delta).add("count", mechanism="laplace")
            .add("mean", "age", mechanism="gaussian", weight=2)
            .add("histogram", "education"))


@pytest.mark.parametrize("plan", [
    _mixed(),
    Analysis("adult", epsilon=3.0, delta=1e-5).add("sum", "hours-per-week", mechanism="laplace")
    .add("count", mechanism="gaussian").add("mean", "age", mechanism="laplace"),
], ids=["laplace-count+gaussian-mean+histogram", "laplace-sum+gaussian-count+laplace-mean"])
def test_mixed_plan_composes_by_pld_as_dp_accounting(plan: Analysis) -> None:
    """dp-accounting's PLDAccountant on the same draws (the discrete Laplace draws as
    DiscreteLaplaceDpEvent, the discrete Gaussians as GaussianDpEvent: at sigma >= 3 grid
    steps the two Gaussians' privacy profiles differ by O(e^(-2 pi^2 sigma^2))) at a grid of
    1e-4 agrees with the plan's epsilon within the plan's refinement accuracy (1e-3
    relative) plus one grid interval per draw; and PLD is chosen: tighter than zCDP and the
    sum."""
    from dp_accounting import dp_event
    from dp_accounting.pld import pld_privacy_accountant

    ms = plan.measurements()
    total = plan.composed(ms)
    assert total.accountant.startswith("PLD (dp-accounting")
    draws = plan_draws(ms)
    assert {d[0] for d in draws} == {"discrete_laplace", "discrete_gaussian"}
    assert min(d[1] for d in draws if d[0] == "discrete_gaussian") >= 3
    events = [dp_event.DiscreteLaplaceDpEvent(p, s) if kind == "discrete_laplace" else
              dp_event.GaussianDpEvent(p / s) for kind, p, s in draws]
    acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
    acc.compose(dp_event.ComposedDpEvent(events))
    reference = acc.get_epsilon(total.delta)
    assert abs(total.epsilon - reference) <= 1e-3 * total.epsilon + len(draws) * 1e-4
    assert total.epsilon < zcdp_epsilon(ms, total.delta)
    assert total.epsilon < sum(m.epsilon for m in ms)
    assert total.delta == pytest.approx(sum(m.delta for m in ms))


def test_pld_with_a_quantile_uses_its_pure_epsilon() -> None:
    """A quantile (exponential mechanism) enters the PLD by its dominating pair; the total
    stays at most the sum and the accountant is named in the package's guarantee."""
    plan = (Analysis("adult", epsilon=2.0, delta=1e-6).add("quantile", "age")
            .add("mean", "hours-per-week", mechanism="gaussian"))
    ms = plan.measurements()
    assert ("pure", ms[0].epsilon, 0) in plan_draws(ms)
    g = plan.guarantee(ms)
    assert g.accountant.startswith("PLD") and g.epsilon < sum(m.epsilon for m in ms)
    assert math.isfinite(g.epsilon)


def test_pure_and_gaussian_only_plans_keep_their_accountants() -> None:
    """PLD is for mixed plans: a pure plan is the sum, an all-Gaussian one zCDP."""
    assert "sum of epsilons" in Analysis("adult").add("count").add(
        "mean", "age").composed().accountant
    assert Analysis("adult", delta=1e-6).add("count").add(
        "mean", "age").composed().accountant.startswith("zCDP")


def test_gaussian_sampler_slack_is_charged_inside_the_plans_delta() -> None:
    """Each discrete-Gaussian draw's float64 slack (core.samplers.sampler_delta) is inside its
    own item's delta, but zCDP and PLD compose the ideal samplers: the total is read at the
    plan's delta less the draws' slack, so the claim with the real samplers stays within it."""
    from privlab.measure.composition import sampler_slack

    a = Analysis("adult", epsilon=1.0, delta=1e-6).add("count").add("histogram", "education")
    ms = a.measurements()
    total = a.composed(ms)
    slack = sampler_slack(ms, sum(m.epsilon for m in ms))
    assert 0 < slack < 1e-6 * total.delta  # 17 draws (a count, 16 bins) of at most 4e-14
    assert total.epsilon == zcdp_epsilon(ms, total.delta - slack)
    assert total.epsilon > zcdp_epsilon(ms, total.delta)


def test_replace_relation_by_group_costs_one_group(adult: pd.DataFrame) -> None:
    """Replacing a row may move it between two groups: one removal and one addition, the
    two add/remove steps the replace relation already charges; the claim is the item's."""
    from privlab.measure.relation import Replace

    a = Analysis("adult", epsilon=1.0, relation=Replace()).add("count", by="sex")
    (g,) = a.item_guarantees()
    assert g.neighbouring == "replace_record" and g.epsilon == pytest.approx(1.0)
    assert "move between two groups" in g.notes[-1]
    assert a.run(adult, rng=2)["guarantee"]["epsilon"] == pytest.approx(1.0)


def test_group_columns_are_the_columns_groups_of_accepts() -> None:
    """The one rule, asked per column (the studio offers these): declared categories or an
    integer with declared bounds; never a numeric, text, identifier or undeclared one."""
    from privlab.measure.groups import group_columns
    from privlab.schema import parse_schema

    schema = parse_schema({"name": "mixed", "columns": {
        "pid": {"type": "identifier"}, "note": {"type": "text"},
        "age": {"type": "integer", "bounds": [0, 99], "bins": 4},
        "n": {"type": "integer", "bounds": [0, 9]},
        "score": {"type": "numeric", "bounds": [-1, 1]},
        "sex": {"type": "categorical", "categories": ["F", "M"], "other": True}}})
    assert group_columns(schema) == ["age", "n", "sex"]
    for name in schema.names:
        if name in group_columns(schema):
            assert groups_of(schema, name, None).column == name
        else:
            with pytest.raises(InvalidInputError, match="by:"):
                groups_of(schema, name, None)


def test_the_package_plan_can_name_the_schema_it_ships(tmp_path: Path,
                                                      adult: pd.DataFrame) -> None:
    """`to_plan(schema)` / `run(plan_schema=...)`: release.json's plan names the schema as the
    package ships it (default: the schema's name, as before), and reruns from it."""
    from privlab.schema import bundled_schema

    plan = Analysis(bundled_schema("adult"), epsilon=1).add("count", by="sex")
    assert plan.to_plan()["schema"] == "adult"
    assert plan.to_plan("schema.yaml")["schema"] == "schema.yaml"
    (tmp_path / "schema.yaml").write_text(bundled_schema("adult").to_yaml(), encoding="utf-8")
    package = plan.run(adult, rng=3, plan_schema=str(tmp_path / "schema.yaml"))
    assert package["plan"]["schema"] == str(tmp_path / "schema.yaml")
    again = Analysis.from_plan(package["plan"]).run(adult, rng=3)
    assert again["releases"] == package["releases"]


def test_a_mixed_plans_delta_goes_to_its_gaussian_items_only() -> None:
    """delta is spent by Gaussian items alone, so it is split by weight among them: a mixed
    plan's items add up to the whole delta asked for (before, the Laplace count's share of
    1e-6 was left unused: 0.75e-6 in all), in proportion to the Gaussian items' weights."""
    ms = _mixed(delta=1e-6).measurements()
    assert [m.delta for m in ms][0] == 0.0
    assert sum(m.delta for m in ms) == pytest.approx(1e-6, rel=1e-12)
    assert ms[1].delta == pytest.approx(2 * ms[2].delta, rel=1e-12)  # weights 2 and 1
