"""`PublicFacts`: the one accessor for public facts (n, sample rate, classes, unit, domains)."""

from __future__ import annotations

import pytest

from privlab.errors import InvalidInputError
from privlab.schema import schema_from_columns
from privlab.schema.facts import PublicFacts, watch_facts

COLUMNS = {"pid": {"type": "identifier", "missing": False},
           "age": {"type": "integer", "bounds": [0, 100], "default": 40},
           "label": {"type": "categorical", "categories": ["a", "b"], "other": True}}


def test_facts_from_a_schema_and_their_origins():
    schema = schema_from_columns("s", COLUMNS, public_size=1000, privacy_unit="pid",
                                 max_rows_per_unit=2)
    facts = PublicFacts.from_schema(schema, target="label")
    with watch_facts() as reads:
        assert facts.classes("none") == ["a", "b", "<other>"]
        assert facts.sample_rate(50, scale=0.8, missing="none")[0] == pytest.approx(50 / 800)
        assert facts.person_bound() == ("pid", 2)
        assert facts.value("bounds:age", missing="none") == (0, 100)
    assert {(r.name, r.origin) for r in reads} == {
        ("classes", "schema"), ("size", "schema"),
        ("privacy_unit", "schema"), ("max_rows_per_unit", "schema"), ("bounds:age", "schema")}


def test_arguments_override_and_measurements_are_charged():
    facts = PublicFacts().with_argument("sample_rate", 0.1, "--sample-rate")
    q, source = facts.sample_rate(32, missing="none")
    assert q == 0.1 and "--sample-rate" in source
    measured = PublicFacts().with_measurement("size", 480, epsilon=0.05, mechanism="noisy count")
    assert measured.charged_epsilon == 0.05
    assert measured.sample_rate(48, missing="none")[0] == 0.1
    with pytest.raises(ValueError):
        PublicFacts().with_measurement("size", 480, epsilon=0.0, mechanism="free")


def test_missing_facts_and_unbounded_persons_are_refused():
    with pytest.raises(InvalidInputError, match="^pass --sample-rate$"):
        PublicFacts().sample_rate(32, missing="pass --sample-rate")
    person = PublicFacts.from_schema(schema_from_columns("s", COLUMNS, privacy_unit="pid"))
    with pytest.raises(InvalidInputError, match="schema 's' has privacy unit 'pid'.*"
                                                "--max-rows-per-unit M"):
        person.person_bound()
    row = PublicFacts.from_schema(schema_from_columns("s", COLUMNS)).with_argument(
        "max_rows_per_unit", 2, "--max-rows-per-unit")
    with pytest.raises(InvalidInputError, match="privacy unit is 'row'"):
        row.person_bound()
    with pytest.raises(ValueError, match="unknown public fact"):
        PublicFacts().get("rows_in_frame")


def test_a_declared_default_must_fit_its_column():
    assert schema_from_columns("s", COLUMNS).column("age").fill_value == 40
    assert schema_from_columns("s", COLUMNS).column("label").fill_value == "a"
    for bad in ({"type": "integer", "bounds": [0, 10], "default": 11},
                {"type": "integer", "bounds": [0, 10], "default": 2.5},
                {"type": "categorical", "categories": ["a"], "default": "z"}):
        with pytest.raises(InvalidInputError, match="default"):
            schema_from_columns("s", {"c": bad})
