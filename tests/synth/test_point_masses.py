"""Point masses in numeric columns (issue 23): on a column like statsmodels' `fair.affairs`
(68% exact zeros, the rest spread over (0, 58]) AIM and MST kept 0% zeros and tripled the mean,
because a zero was a uniform draw inside the first bin. A schema that declares
`point_masses: [0]` gives 0 a code of its own, so the share of zeros survives."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from privlab.errors import InvalidInputError
from privlab.schema import parse_schema
from privlab.synth import make_synthesizer
from privlab.synth.domain import ColumnSpec, own_codes


def _affairs_like(n: int = 4000, seed: int = 0) -> pd.DataFrame:
    """Generated locally (no download): 68% zeros, a skewed positive tail, and a 1..5 rating."""
    gen = np.random.default_rng(seed)
    zero = gen.random(n) < 0.68
    affairs = np.where(zero, 0.0, np.round(gen.gamma(0.8, 2.7, n) + 0.1, 3).clip(0.1, 57.6))
    rating = np.where(zero, gen.integers(3, 6, n), gen.integers(1, 6, n))
    return pd.DataFrame({"affairs": affairs, "rate_marriage": rating})


def _schema(points: bool) -> dict:
    affairs = {"type": "numeric", "bounds": [0, 58], "missing": False}
    if points:
        affairs["point_masses"] = [0]
    return {"name": "fair", "columns": {
        "affairs": affairs,
        "rate_marriage": {"type": "integer", "bounds": [1, 5], "missing": False}}}


@pytest.mark.parametrize("method", ["aim", "mst"])
def test_declared_point_mass_survives_synthesis(method):
    frame = _affairs_like()
    share = float((frame["affairs"] == 0).mean())
    out = {}
    for points in (False, True):
        synth = make_synthesizer(method, schema=parse_schema(_schema(points)), rng=3)
        synth.fit(synth.conform(frame), 4.0, 1e-6)
        table = synth.sample(4000)
        out[points] = float((table["affairs"] == 0).mean())
    assert out[False] == 0.0  # the old behaviour: zeros smeared over the first bin
    # 4000 rows at epsilon 4: the noisy share of the zero code is within a few points
    assert out[True] == pytest.approx(share, abs=0.05)


def test_column_spec_codes_points_on_their_own():
    spec = ColumnSpec("x", "numeric", edges=(0.0, 10.0, 20.0), points=(0.0,), missing=True)
    assert spec.values == 3 and spec.size == 4
    assert spec.labels() == ["[0, 10)", "[10, 20]", "=0", "<missing>"]
    codes = spec.encode(pd.Series([0.0, 0.5, 15.0, None]))
    assert codes.tolist() == [2, 0, 1, 3]
    back = spec.decode(np.array([2, 2, 0, 1, 3]), np.random.default_rng(0))
    assert back[:2].tolist() == [0.0, 0.0] and 0 < back[2] < 10 and 10 <= back[3] <= 20
    assert np.isnan(back[4])
    # an integer value already alone in a one-value bin needs no extra code
    assert own_codes(np.arange(1, 7, dtype=float), [3.0], integer=True) == ()
    assert own_codes(np.array([0.0, 5.0, 10.0]), [0.0], integer=True) == (0.0,)


@pytest.mark.parametrize("raw, message", [
    ({"type": "numeric", "bounds": [0, 5], "point_masses": [9]}, "outside the bounds"),
    ({"type": "numeric", "bounds": [0, 5], "point_masses": 0}, "non-empty list of numbers"),
    ({"type": "integer", "bounds": [0, 5], "point_masses": [0.5]}, "whole numbers"),
    ({"type": "categorical", "categories": ["a"], "point_masses": [0]}, "integer and numeric"),
])
def test_schema_refuses_bad_point_masses(raw, message):
    with pytest.raises(InvalidInputError, match=message):
        parse_schema({"name": "t", "columns": {"c": raw}})


def test_point_masses_round_trip_through_yaml():
    s = parse_schema(_schema(True))
    again = parse_schema(s.to_dict())
    assert again.column("affairs").point_masses == (0.0,)
    assert "point_masses:\n    - 0.0" in s.to_yaml()


def test_schema_draft_proposes_point_masses_marked_as_data_derived(tmp_path, capsys):
    from privlab.cli.main import main
    from privlab.schema import draft_schema, draft_yaml

    frame = _affairs_like()
    frame["hours"] = np.where(np.arange(len(frame)) % 10 < 3, 0,
                              np.arange(len(frame)) % 900 + 1)  # 30% zeros over 0..900
    schema = draft_schema(frame)
    assert schema.draft
    assert schema.column("affairs").point_masses == (0.0,)
    assert schema.column("hours").point_masses == (0.0,)
    assert schema.column("rate_marriage").point_masses == ()  # 5 values: one bin each
    text = draft_yaml(schema)
    assert "point masses" in " ".join(text.splitlines()[:2]) and "draft: true" in text
    path = tmp_path / "fair.csv"
    frame.to_csv(path, index=False)
    assert main(["schema", "draft", str(path)]) == 0
    out = capsys.readouterr().out
    assert "point_masses" in out and "DRAWN FROM THE DATA" in out
