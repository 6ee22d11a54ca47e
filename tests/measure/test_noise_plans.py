"""`laplace_plan` / `gaussian_plan` are the mechanisms' calibration: the scale and grid a
plan states from public inputs are those the mechanism draws with, also where the Gaussian
refines its grid for several changed coordinates; and a person-level measurement releases
what `privlab release --schema` releases for the same seed."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from privlab.cli.main import main
from privlab.core.mechanisms import (
    gaussian_mechanism,
    gaussian_plan,
    laplace_mechanism,
    laplace_plan,
)
from privlab.measure import measurement


@pytest.mark.parametrize(("sens", "eps", "size", "changed", "gran", "integer"), [
    (1, 0.5, 1, 1, None, True), (3.7, 1.3, 1, 1, None, False), (2, 0.7, 6, 2, None, True),
    (5.5, 2.0, 4, None, 0.25, False), (1, 9.0, 10, 1, None, True)])
def test_laplace_plan_is_what_is_drawn(sens, eps, size, changed, gran, integer) -> None:
    value = np.zeros(size) if size > 1 else 0.0
    out = laplace_mechanism(value, sens, eps, rng=1, granularity=gran, integer_valued=integer,
                            changed_coordinates=changed)
    m = 1 if size == 1 else (changed or size)
    g, _, _, steps = laplace_plan(sens, eps, m, gran, integer)
    assert (out.granularity, out.noise["scale"]) == (g, steps * g)


@pytest.mark.parametrize(("sens", "eps", "delta", "size", "changed", "integer"), [
    (1, 0.5, 1e-6, 1, 1, True), (3.7, 1.3, 1e-5, 1, 1, False), (1, 1.0, 1e-6, 8, 1, True),
    (2.5, 0.3, 1e-6, 5, None, False), (1, 4.0, 1e-9, 3, 3, True)])
def test_gaussian_plan_is_what_is_drawn(sens, eps, delta, size, changed, integer) -> None:
    value = np.zeros(size) if size > 1 else 0.0
    out = gaussian_mechanism(value, sens, eps, delta, rng=1, integer_valued=integer,
                             changed_coordinates=changed)
    m = 1 if size == 1 else (changed or size)
    g, _, sigma, _, _, how = gaussian_plan(sens, eps, delta, m, size, None, integer)
    assert (out.granularity, out.noise["scale"], out.guarantee.accountant) == \
        (g, sigma * g, how)


def test_person_level_measurement_matches_release_cli(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    spec = {"name": "ratings", "privacy_unit": "userId", "max_rows_per_unit": 2,
            "columns": {"userId": {"type": "identifier"},
                        "rating": {"type": "numeric", "bounds": [0.5, 5.0]}}}
    schema = tmp_path / "ratings.yaml"
    schema.write_text(yaml.safe_dump(spec), encoding="utf-8")
    data = tmp_path / "ratings.csv"
    data.write_text("userId,rating\n" + "\n".join(f"u{i % 17},{0.5 + i % 10 / 2}"
                                                  for i in range(120)) + "\n", encoding="utf-8")
    for stat in ("sum", "mean", "histogram", "variance"):
        argv = ["release", stat, str(data), "--column", "rating", "--epsilon", "1.2",
                "--schema", str(schema), "--seed", "5", "--json"]
        assert main(argv) == 0
        cli = json.loads(capsys.readouterr().out)
        got = measurement(str(schema), stat, "rating", epsilon=1.2)(data, rng=5)
        value = got.value.tolist() if hasattr(got.value, "tolist") else got.value
        assert value == cli["value"], stat
        g = got.guarantee.to_dict()
        assert (g["epsilon"], g["neighbouring"]) == (cli["guarantee"]["epsilon"], "user")
        assert cli["guarantee"]["neighbouring"] == "user"
