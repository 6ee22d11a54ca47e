"""`privlab synth` and the synthesizers with a person-level schema (`privacy_unit: pid`).

Issue 21: the privacy unit is honoured by every releasing command. A person schema is either
refused naming `--max-rows-per-unit` (no bound, or a method without per-person accounting),
or each person's first M rows are kept and the zCDP budget is per person (group privacy:
rho per person = M^2 x rho per row, so the noise scale grows by M). Removing one person gives
the same non-noised output and `neighbouring: user`; rows past a person's first M are never
read.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from neighbours import assert_same_structure

from privlab.cli.main import main
from privlab.core.calibration import rho_for_target
from privlab.errors import InvalidInputError
from privlab.schema import schema_from_columns
from privlab.synth import make_synthesizer

PERSONS, PER_PERSON, M = 300, 4, 2
SPEC = {
    "pid": {"type": "identifier", "missing": False},
    "age": {"type": "integer", "bounds": [0, 100], "bins": 4, "missing": False},
    "label": {"type": "categorical", "categories": ["high", "low"], "missing": False},
}
UNIT = schema_from_columns("visits", SPEC).to_dict() | {"privacy_unit": "pid"}
#: computed from noisy measurements (see test_synth_neighbours.NOISED)
NOISED = {"mst": {"tree_edges", "compressed_sizes", "estimated_rows"},
          "aim": {"rounds", "model_cliques", "model_cells", "estimated_rows", "final_loss"}}


def _visits(persons: int = PERSONS) -> pd.DataFrame:
    gen = np.random.default_rng(7)
    n = persons * PER_PERSON
    return pd.DataFrame({"pid": np.repeat([f"P{i:03d}" for i in range(persons)], PER_PERSON),
                         "age": gen.integers(18, 90, n),
                         "label": gen.choice(["high", "low"], n)})


def _run(capsys, tmp_path, frame, name, *extra) -> tuple[int, dict | str]:
    schema = tmp_path / "visits.json"
    schema.write_text(json.dumps(UNIT))
    data = tmp_path / f"{name}.csv"
    frame.to_csv(data, index=False)
    out = tmp_path / f"{name}-out.csv"
    code = main(["synth", str(data), "--schema", str(schema), "--epsilon", "12", "--rows", "40",
                 "--out", str(out), "--seed", "5", "--json", *extra])
    cap = capsys.readouterr()
    return code, json.loads(cap.out) if code == 0 else cap.err


def _fixed(doc: dict) -> dict:
    """AIM's per-round notes and steps are DP choices (as in test_synth_neighbours)."""
    g = dict(doc["guarantee"])
    g["notes"] = [n for n in g["notes"] if not n.startswith("round ")]
    return {**{k: v for k, v in doc.items() if k != "out"}, "guarantee": g,
            "budget": [b for b in doc["budget"] if not b["step"].startswith("round ")],
            "details": {k: v for k, v in doc["details"].items() if k not in NOISED["aim"]}}


def test_person_schema_without_a_bound_is_refused_naming_the_option(capsys, tmp_path) -> None:
    """Regression: synth refused a person schema with 'aggregate to one row per person' and
    offered no per-person accounting; now the refusal names --max-rows-per-unit."""
    code, err = _run(capsys, tmp_path, _visits(), "d", "--method", "mst")
    assert code == 2 and err.count("\n") == 1 and "--max-rows-per-unit" in err
    assert not (tmp_path / "d-out.csv").exists()
    code, err = _run(capsys, tmp_path, _visits(), "d", "--method", "dpvae",
                     "--max-rows-per-unit", "2")
    assert code == 2 and "--method aim or mst" in err and "--max-rows-per-unit" in err


@pytest.mark.parametrize("method", ["mst", "aim"])
def test_removing_one_person_keeps_the_output_structure(method, capsys, tmp_path) -> None:
    """Regression (fails on main: no --max-rows-per-unit, person schemas refused): a one-person
    edit (all rows of one person removed) gives the same non-noised output, and the guarantee
    is per person."""
    extra = ["--method", method, "--max-rows-per-unit", str(M)] + (
        ["--workload", "2way"] if method == "aim" else [])
    frame = _visits()
    code, base = _run(capsys, tmp_path, frame, "d", *extra)
    assert code == 0, base
    g = base["guarantee"]
    assert g["neighbouring"] == "user" and g["is_dp"] and g["epsilon"] == pytest.approx(12)
    assert any("privacy unit 'pid'" in n for n in g["notes"])
    for who in ("P000", "P031"):
        code, doc = _run(capsys, tmp_path, frame[frame["pid"] != who], who, *extra)
        assert code == 0, doc
        assert_same_structure(_fixed(base), _fixed(doc), noised=NOISED[method] | {"warnings"})
        assert list(pd.read_csv(tmp_path / f"{who}-out.csv").columns) == ["age", "label"]


def test_rows_past_the_bound_are_never_read(capsys, tmp_path) -> None:
    """A person's rows after their first M change nothing (same seed: the same table)."""
    frame = _visits()
    more = frame.copy()
    more.loc[more.groupby("pid").cumcount() >= M, "age"] = 99
    more.loc[more.groupby("pid").cumcount() >= M, "label"] = "high"
    extra = ["--method", "mst", "--max-rows-per-unit", str(M)]
    assert _run(capsys, tmp_path, frame, "a", *extra)[0] == 0
    assert _run(capsys, tmp_path, more, "b", *extra)[0] == 0
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "a-out.csv"),
                                  pd.read_csv(tmp_path / "b-out.csv"))


def test_per_person_rho_is_m_squared_times_per_row() -> None:
    """zCDP group privacy: each measurement runs at rho/M^2 per row (noise x M), the account
    records rho per person and sums to the rho of (epsilon, delta); the guarantee says user."""
    eps, delta = 3.0, 1e-6
    sigmas = {}
    for m in (1, 3):
        s = make_synthesizer("mst", schema=UNIT, max_rows_per_unit=m, rng=0)
        s.fit(_visits(), eps, delta)
        plan = s.privacy_plan(eps, delta)
        assert plan.rho_total == pytest.approx(rho_for_target(eps, plan.delta_z), rel=1e-9)
        assert s.account.rho == pytest.approx(plan.rho_total, rel=1e-9)
        assert s.account.rho <= plan.rho_total
        assert s.guarantee.neighbouring == "user"
        assert s.guarantee.epsilon == pytest.approx(eps, rel=1e-9)
        step = s.budget_lines()[0]
        sigmas[m] = float(step["detail"].split("sigma=")[1].split()[0])
    assert sigmas[3] / sigmas[1] == pytest.approx(3, rel=1e-3)
    with pytest.raises(InvalidInputError, match="--max-rows-per-unit"):
        make_synthesizer("mst", schema=UNIT, rng=0).fit(_visits(), eps, delta)
    row = schema_from_columns("v", {k: v for k, v in SPEC.items() if k != "pid"})
    with pytest.raises(InvalidInputError, match="privacy unit is 'row'"):
        make_synthesizer("mst", schema=row, max_rows_per_unit=2, rng=0).fit(
            _visits().drop(columns="pid"), eps, delta)
    assert math.isfinite(sigmas[1])


def test_spark_path_refuses_a_person_unit() -> None:
    """The Spark MST path counts marginals without the per-person bound: refused (it would
    have claimed record-level DP for a person schema), before any Spark session starts."""
    from privlab.synth.spark import SparkMSTSynthesizer

    s = SparkMSTSynthesizer(schema=UNIT, max_rows_per_unit=M, rng=0)
    with pytest.raises(InvalidInputError, match="--max-rows-per-unit M"):
        s.fit("table:visits", 2.0, 1e-6)
