"""The PIA article's figures: Adult Table 7 and section 4.3.2 pairs, census (marital, sex)."""

from __future__ import annotations

import pytest

from privlab.assess import assess, assign_tier
from privlab.data.datasets import load_dataset

# The PIA article, Table 7 (Adult, rows with missing values removed); column names as bundled.
TABLE_7 = {
    "age": 0.978, "workclass": 0.421, "fnlwgt": 0.999, "education": 0.806,
    "education-num": 0.806, "marital-status": 0.661, "occupation": 0.888,
    "relationship": 0.733, "race": 0.256, "sex": 0.443, "capital-gain": 0.157,
    "capital-loss": 0.092, "hours-per-week": 0.762, "native-country": 0.165,
}
# The PIA article's cut points: [0.092, 0.394) none, [0.394, 0.696) low, [0.696, 0.999] hide.
PAPER_LOW, PAPER_HIGH = 0.394, 0.696
PAIRS_432 = {
    ("race", "capital-gain"): 0.378, ("capital-gain", "capital-loss"): 0.241,
    ("race", "capital-loss"): 0.327, ("capital-gain", "native-country"): 0.298,
    ("race", "native-country"): 0.352, ("capital-loss", "native-country"): 0.243,
}
TOL = 0.02


@pytest.fixture(scope="module")
def adult_assessment(adult_raw):
    # The PIA article's preprocessing: drop rows with a missing value; Table 7 has no salary column
    return assess(adult_raw, attributes=list(TABLE_7), missing="drop", max_combination_size=2)


def test_adult_missing_rows_dropped_as_the_paper(adult_assessment):
    assert adult_assessment.rows_in == 32561
    assert adult_assessment.rows_used == 30162
    assert "dropped" in adult_assessment.missing_statement


@pytest.mark.parametrize("name", list(TABLE_7))
def test_table7_richness_and_tier(adult_assessment, name):
    got = adult_assessment.attribute(name)
    assert got.richness == pytest.approx(TABLE_7[name], abs=TOL)
    assert got.tier == assign_tier(TABLE_7[name], PAPER_LOW, PAPER_HIGH)


def test_table7_cut_points(adult_assessment):
    b = adult_assessment.bounds
    assert b.low == pytest.approx(PAPER_LOW, abs=TOL)
    assert b.high == pytest.approx(PAPER_HIGH, abs=TOL)


def test_section_432_pairs(adult_assessment):
    combos = {c.attributes: c for c in adult_assessment.combinations.combinations}
    for (a, b), paper in PAIRS_432.items():
        c = combos.get((a, b)) or combos.get((b, a))
        assert c is not None, (a, b)
        assert c.stats.richness == pytest.approx(paper, abs=TOL), (a, b)
        # The PIA article: combining always raised richness above each member's
        members = [adult_assessment.attribute(x).richness for x in (a, b)]
        assert c.stats.richness > max(members)


def test_census_marital_sex_escalates():
    census = load_dataset("census")
    result = assess(census, max_combination_size=2)
    assert result.attribute("sex").tier == "none"
    assert result.attribute("marital_status").tier == "none"
    combos = {frozenset(c.attributes): c for c in result.combinations.combinations}
    pair = combos[frozenset({"marital_status", "sex"})]
    assert pair.escalated
    assert pair.tier in ("low", "hide")
    assert pair.stats.richness == pytest.approx(0.750, abs=TOL)
