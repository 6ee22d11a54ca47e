"""A bounded neighbour fuzz over `privlab train`'s options and the library estimators
(issue 21): Hypothesis draws a method, `--on-invalid`, a row or person privacy unit, a
contribution bound, a public or estimated sampling rate, and a one-row or one-person edit;
both tables are trained with the same seed and must give the same exit code and error text,
and, when both succeed, identical JSON outside the keys the run itself lists as noised.

Allowed by design (docs/guarantees.md): in refuse mode a value outside the schema is refused
for the curator (exit 2, one line naming the column) before anything is written.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd
import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from neighbours import assert_same_structure, one_row_edits

pytest.importorskip("torch", reason="needs the ml extra: pip install -e '.[ml]'")

from privlab.cli.main import main  # noqa: E402
from privlab.schema import parse_schema  # noqa: E402

#: CI runs a few drawn examples (plus the explicit ones); experiments/train_fuzz.py sets
#: PRIVLAB_FUZZ_EXAMPLES for a long, randomised run.
EXAMPLES = int(os.environ.get("PRIVLAB_FUZZ_EXAMPLES", "0")) or None
PERSONS, PER_PERSON = 40, 4
COLUMNS = {
    "pid": {"type": "identifier", "missing": False},
    "age": {"type": "integer", "bounds": [0, 100], "missing": False},
    "hours": {"type": "integer", "bounds": [0, 100], "missing": False},
    "label": {"type": "categorical", "categories": ["high", "low", "mid"], "missing": False},
}
#: edits that replace one row (the only neighbours of replace-one objective / output)
REPLACE = ("rare_category", "new_category", "hostile_string", "missing_categorical",
           "non_integer", "text_in_numeric", "extreme_value", "missing_numeric")
IN_SCHEMA = ("add", "remove", "duplicate_person", "rare_category", "remove_person",
             "add_person")


def _frame() -> pd.DataFrame:
    gen = np.random.default_rng(1)
    n = PERSONS * PER_PERSON
    frame = pd.DataFrame({"pid": np.repeat([f"p{i:03d}" for i in range(PERSONS)], PER_PERSON),
                          "age": gen.integers(18, 80, n), "hours": gen.integers(1, 80, n)})
    frame["label"] = np.where(frame["age"] + gen.normal(0, 5, n) > 45, "high", "low")
    return frame


def _edits(frame: pd.DataFrame, unit: str) -> dict[str, pd.DataFrame]:
    schema = parse_schema({"name": "v", "privacy_unit": unit, "columns": COLUMNS})
    out = one_row_edits(frame, schema)
    out["remove_person"] = frame[frame["pid"] != "p007"].reset_index(drop=True)
    new = frame[frame["pid"] == "p003"].assign(pid="p999")
    out["add_person"] = pd.concat([frame, new], ignore_index=True)
    return out


def _run(capsys, folder, frame: pd.DataFrame, argv: list[str]) -> tuple[int, dict | None, str]:
    data = folder / "data.csv"
    frame.to_csv(data, index=False)
    code = main(["train", str(data), *argv])
    out = capsys.readouterr()
    return code, (json.loads(out.out) if code == 0 else None), out.err


@settings(max_examples=EXAMPLES or 4, deadline=None, derandomize=EXAMPLES is None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(method=st.sampled_from(["dpsgd", "objective", "output"]),
       policy=st.sampled_from(["refuse", "coerce"]), unit=st.sampled_from(["row", "pid"]),
       bound=st.sampled_from([None, 1, 3]), public_rate=st.booleans(),
       edit=st.sampled_from(sorted(set(REPLACE) | set(IN_SCHEMA))))
@example(method="objective", policy="coerce", unit="row", bound=None, public_rate=False,
         edit="missing_numeric")            # item 2: coerce under replace-one keeps n
@example(method="output", policy="coerce", unit="row", bound=None, public_rate=False,
         edit="missing_categorical")        # item 2: a missing label
@example(method="dpsgd", policy="refuse", unit="pid", bound=None, public_rate=True,
         edit="remove_person")              # item 3: refused alike, naming the option
@example(method="dpsgd", policy="coerce", unit="pid", bound=3, public_rate=False,
         edit="add_person")                 # item 3: person-level accounting
@example(method="objective", policy="refuse", unit="pid", bound=1, public_rate=False,
         edit="rare_category")              # item 3: objective refused for a person unit
def test_train_options_by_neighbour_fuzz(tmp_path, capsys, method, policy, unit, bound,
                                         public_rate, edit):
    if method != "dpsgd" and edit not in REPLACE:
        edit = "rare_category"   # replace-one relations: only replacements are neighbours
    frame = _frame()
    schema = tmp_path / "v.yaml"
    schema.write_text(yaml.safe_dump({"name": "v", "privacy_unit": unit, "columns": COLUMNS}))
    argv = ["--schema", str(schema), "--target", "label", "--model", "logreg", "--method",
            method, "--epsilon", "4", "--delta", "1e-4" if method != "objective" else "0",
            "--epochs", "1", "--batch-size", "16", "--seed", "9", "--on-invalid", policy,
            "--delimiter", ",", "--json"]
    if bound is not None and unit == "pid":
        argv += ["--max-rows-per-unit", str(bound)]
    if public_rate and method == "dpsgd":
        argv += ["--sample-rate", "0.2"]
    code_a, a, err_a = _run(capsys, tmp_path, frame, argv)
    code_b, b, err_b = _run(capsys, tmp_path, _edits(frame, unit)[edit], argv)
    if policy == "refuse" and edit not in IN_SCHEMA and code_a == 0 and code_b == 2:
        lines = err_b.strip().splitlines()
        assert len(lines) == 1 and "column '" in lines[0], err_b
        return
    assert (code_a, err_a) == (code_b, err_b), f"{edit}: exit/stderr differ"
    if code_a == 0:
        assert a["guarantee"]["is_dp"]
        if unit == "pid":
            assert a["guarantee"]["neighbouring"] == "user"
        assert_same_structure(a, b, noised=a["noised"])


@settings(max_examples=EXAMPLES or 6, deadline=None, derandomize=EXAMPLES is None)
@given(kind=st.sampled_from(["logreg-dpsgd", "mlp", "objective", "output"]),
       n=st.integers(min_value=120, max_value=200), label=st.sampled_from([0, 1, 2]),
       public=st.sampled_from(["sample_rate", "public_size"]))
def test_estimators_by_neighbour_fuzz(kind, n, label, public):
    """Every public estimator on X and on X with one row added and one label replaced: the
    fitted shape, classes, DP-SGD plan and guarantee are identical (public facts only)."""
    from privlab.learn.estimators import DPLogisticRegression, DPMLPClassifier

    gen = np.random.default_rng(n)
    x = gen.normal(size=(n + 1, 4)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64)
    y2 = y.copy()
    y2[0] = label
    rate = {"sample_rate": 0.25} if public == "sample_rate" else {"public_size": 400}
    common = dict(epsilon=2.0, classes=[0, 1, 2], random_state=0)
    fitted = []
    for xs, ys in ((x[:n], y[:n]), (x, y2)):
        if kind == "logreg-dpsgd":
            est = DPLogisticRegression(method="dpsgd", delta=1e-4, epochs=1, batch_size=40,
                                       **rate, **common)
        elif kind == "mlp":
            est = DPMLPClassifier(delta=1e-4, hidden_layer_sizes=(8,), epochs=1,
                                  batch_size=40, **rate, **common)
        else:
            est = DPLogisticRegression(method=kind, delta=1e-5 if kind == "output" else 0.0,
                                       **common)
        est.fit(xs, ys)
        fitted.append(est)
    a, b = fitted
    assert a.classes_.tolist() == b.classes_.tolist() == [0, 1, 2]
    assert a.predict_proba(x).shape == b.predict_proba(x).shape == (n + 1, 3)
    if kind in ("objective", "output"):   # replace-one: n is public, the guarantee notes it
        assert a.guarantee_.neighbouring == "replace_record"
        return
    assert a.guarantee_ == b.guarantee_ and a.guarantee_.is_dp
    pa, pb = (getattr(e, "torch_", e).training_.plan for e in (a, b))
    assert (pa.sample_rate, pa.steps, pa.noise_multiplier) == (
        pb.sample_rate, pb.steps, pb.noise_multiplier)
