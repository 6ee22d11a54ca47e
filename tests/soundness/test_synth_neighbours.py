"""Neighbouring-dataset harness for `privlab synth` (MST, DP-VAE, DP-GAN).

For each method, on a small Adult sample with the bundled adult schema and on a small custom
schema (an integer column that allows missing values, a categorical with an `<other>` bucket,
an identifier and a text column), `privlab synth` runs on D and on every D' of
`one_row_edits` with the same `--seed`:

- `--on-invalid coerce`: both runs succeed; the written tables have the same columns, dtypes
  and length, and the JSON payloads the same keys and the same values except at keys whose
  values are computed from noisy measurements (listed per method in NOISED, each with why);
- `--on-invalid refuse` (the default): either the same, or D' is refused with exit 2, a
  one-line error naming the column, and no output file. Which edits are refused follows from
  the schema alone (asserted, so the harness exercises both outcomes).

Plus regression tests for what the review found on the old synth path (dtype-inferred
kinds, an exact `rows_fitted`, dtypes that depended on the sampled codes).
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from neighbours import assert_same_frame_structure, assert_same_structure, one_row_edits

from privlab.cli.main import main
from privlab.data.datasets import load_dataset
from privlab.schema import bundled_schema, schema_from_columns
from privlab.synth.domain import ColumnSpec, make_edges

ROWS = 240
SEED = "5"
#: JSON keys whose values are computed from noisy measurements (so they may differ between D
#: and D' under the same seed); everything else must be identical.
NOISED = {
    # MST: the tree is chosen by the exponential mechanism on noisy scores, the compressed
    # sizes compare noisy 1-way counts with 3 sigma, the row count is estimated from noisy
    # marginal totals
    "mst": {"tree_edges", "compressed_sizes", "estimated_rows"},
    # DP-SGD: the sampling rate, the steps, the batch sizes and the calibrated noise
    # multiplier follow from the noisy row count. (With 240 rows and the default batch of
    # 512 the rate is 1 on every run, so the accounted epsilon, the budget and the guarantee
    # are compared exactly here.)
    "dpvae": {"sample_rate", "steps", "expected_batch", "noise_multiplier"},
    # AIM: the rounds, the chosen marginals and the per-round budget split follow the
    # exponential mechanism's choices on noisy scores
    "aim": {"rounds", "model_cliques", "model_cells", "estimated_rows", "final_loss"},
}
#: Warnings are computed from noisy values only (MST: noise mass of each noisy 1-way marginal;
#: every method: delta against the noisy row count), so even their number may differ.
WARNINGS = "warnings"
EXTRA = {"mst": [], "dpvae": ["--epochs", "1"], "aim": ["--workload", "2way"]}

CUSTOM = schema_from_columns("people", {
    "person_id": {"type": "identifier", "missing": False},
    "age": {"type": "integer", "bounds": [17, 90], "missing": True},
    "sex": {"type": "categorical", "categories": ["Female", "Male"], "other": True,
            "missing": False},
    "hours-per-week": {"type": "numeric", "bounds": [1, 99], "missing": False},
    "salary": {"type": "categorical", "categories": [">50K", "<=50K"], "missing": False},
    "comment": {"type": "text"},
})

#: Edits that the refuse policy must refuse, from each schema's declarations alone.
REFUSED = {
    # workclass has no <other> bucket; age is integer [17, 90] without missing
    "adult": {"new_category", "hostile_string", "non_integer", "text_in_numeric",
              "extreme_value", "missing_numeric"},
    # sex has an <other> bucket; age allows missing
    "people": {"non_integer", "text_in_numeric", "extreme_value", "missing_categorical"},
}


@pytest.fixture(scope="module")
def cases(tmp_path_factory) -> dict[str, tuple]:
    base = tmp_path_factory.mktemp("synth_neighbours")
    adult = load_dataset("adult").sample(ROWS, random_state=3).reset_index(drop=True)
    people = adult[["age", "sex", "hours-per-week", "salary"]].copy()
    people.insert(0, "person_id", [f"P{i:05d}" for i in range(ROWS)])
    people["comment"] = [f"note {i}" for i in range(ROWS)]
    out = {}
    for name, frame, schema in (("adult", adult, bundled_schema("adult")),
                                ("people", people, CUSTOM)):
        schema_file = base / f"{name}.json"
        schema_file.write_text(json.dumps(schema.to_dict()))
        files = {}
        for edit, d in {"D": frame, **one_row_edits(frame, schema)}.items():
            path = base / f"{name}-{edit}.csv"
            d.to_csv(path, index=False)
            files[edit] = path
        out[name] = (str(schema_file) if name == "people" else "adult", files)
    return out


def _run(capsys, data, schema, method, policy, out) -> tuple[int, dict | str]:
    code = main(["synth", str(data), "--schema", schema, "--method", method, "--epsilon", "6",
                 "--rows", "60", "--out", str(out), "--seed", SEED, "--on-invalid", policy,
                 "--json", *EXTRA[method]])
    captured = capsys.readouterr()
    return code, json.loads(captured.out) if code == 0 else captured.err


def _fixed_notes(doc: dict) -> dict:
    """AIM's guarantee notes and budget steps list its rounds ("round k: select/measure ..."):
    how many rounds
    and which marginals follow from the exponential mechanism's choices on noisy scores (as
    `details.rounds`), so they may differ between neighbours; every other note may not."""
    g = dict(doc["guarantee"])
    g["notes"] = [n for n in g["notes"] if not n.startswith("round ")]
    steps = [b for b in doc.get("budget", []) if not str(b.get("step", "")).startswith("round ")]
    out = {**doc, "guarantee": g, **({"budget": steps} if "budget" in doc else {})}
    if isinstance(doc.get("details"), dict):  # DP-chosen rounds and cliques: any number
        out["details"] = {k: ([] if k in NOISED["aim"] and isinstance(v, list) else v)
                          for k, v in doc["details"].items()}
    return out


@pytest.mark.parametrize("method", ["mst", "dpvae", "aim"])
@pytest.mark.parametrize("name", ["adult", "people"])
def test_neighbours_give_the_same_structure(method, name, cases, tmp_path, capsys) -> None:
    if method == "dpvae":
        pytest.importorskip("torch", reason="needs the ml extra: pip install -e '.[ml]'")
    schema, files = cases[name]
    for policy in ("coerce", "refuse"):
        ref_out = tmp_path / f"{policy}-D.parquet"
        code, ref = _run(capsys, files["D"], schema, method, policy, ref_out)
        assert code == 0, ref
        ref_table = pd.read_parquet(ref_out)
        assert "person_id" not in ref_table and "comment" not in ref_table  # by declaration
        refused = set()
        for edit, path in files.items():
            if edit == "D":
                continue
            out = tmp_path / f"{policy}-{edit}.parquet"
            code, payload = _run(capsys, path, schema, method, policy, out)
            if policy == "refuse" and code != 0:
                assert code == 2, (edit, payload)
                assert payload.count("\n") == 1 and "column '" in payload, (edit, payload)
                assert not out.exists(), f"{edit}: output written before the refusal"
                refused.add(edit)
                continue
            assert code == 0, (policy, edit, payload)
            assert all(isinstance(w, str) for w in payload[WARNINGS])
            assert_same_structure(_fixed_notes({**ref, WARNINGS: []}),
                                  _fixed_notes({**payload, "out": ref["out"], WARNINGS: []}),
                                  noised=NOISED[method])
            assert_same_frame_structure(ref_table, pd.read_parquet(out))
        assert refused == (REFUSED[name] if policy == "refuse" else set()), policy


# ------------------------------------------------------------------ regression tests


def _age_frame() -> pd.DataFrame:
    gen = np.random.default_rng(0)
    return pd.DataFrame({"age": gen.integers(17, 91, 400),
                         "sex": gen.choice(["Female", "Male"], 400)})


AGE_SCHEMA = {"name": "ages", "columns": {
    "age": {"type": "integer", "bounds": [17, 90], "missing": True},
    "sex": {"type": "categorical", "categories": ["Female", "Male"], "missing": False}}}


@pytest.mark.parametrize("value", [40.5, None, "unknown"])
def test_one_odd_age_does_not_change_the_published_domain(value) -> None:
    """Old path: kinds came from the dtype, so age 40.5 made the column non-integer, a missing
    age made it Int64-or-float, and "unknown" made it categorical."""
    from privlab.synth import MSTSynthesizer

    d = _age_frame()
    d2 = d.copy()
    d2["age"] = d2["age"].astype(object)
    d2.at[0, "age"] = value
    fits = [MSTSynthesizer(schema=AGE_SCHEMA, rng=0).fit(f, 4.0) for f in (d, d2)]
    doms = [s.domain.to_dict() for s in fits]
    assert doms[0] == doms[1]
    age = doms[0]["columns"][0]
    assert age["type"] == "numeric" and age["integer"] and age["bounds"] == [17, 90]
    assert [str(t) for t in fits[0].sample(50).dtypes] == \
        [str(t) for t in fits[1].sample(50).dtypes] == ["Int64", "str"]


@pytest.mark.parametrize("value", [40.5, None, "unknown"])
def test_one_odd_age_does_not_change_a_typed_domain_declaration(value) -> None:
    """The same with a schema that types age numeric, not integer: an old path took
    `integer` from the dtype (int64 on D, float64 or object on D')."""
    from privlab.synth import MSTSynthesizer

    domain = {"columns": {"age": {"type": "numeric", "bounds": [17, 90]},
                          "sex": {"type": "categorical", "categories": ["Female", "Male"]}}}
    d = _age_frame()
    d2 = d.copy()
    d2["age"] = d2["age"].astype(object)
    d2.at[0, "age"] = value
    fits = [MSTSynthesizer(schema=domain, rng=0).fit(f, 4.0) for f in (d, d2)]
    assert fits[0].domain.to_dict() == fits[1].domain.to_dict()
    assert not fits[0].domain.columns[0].integer  # not declared: never read from the dtype
    assert [str(t) for t in fits[0].sample(50).dtypes] == \
        [str(t) for t in fits[1].sample(50).dtypes] == ["float64", "str"]


def test_without_a_schema_synth_refuses_naming_schema_draft(tmp_path, capsys) -> None:
    """Old path: kinds were inferred from the dtype of the private rows."""
    path = tmp_path / "ages.csv"
    _age_frame().to_csv(path, index=False)
    out = tmp_path / "o.csv"
    code = main(["synth", str(path), "--method", "mst", "--epsilon", "1", "--rows", "10",
                 "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and "privlab schema draft" in err and err.count("\n") == 1
    assert not out.exists()


def test_no_exact_row_count_is_released(tmp_path, capsys) -> None:
    """Old path: `rows_fitted` and "fitted on N rows" printed the exact count."""
    path = tmp_path / "ages.csv"
    _age_frame().to_csv(path, index=False)
    schema = tmp_path / "ages.json"
    schema.write_text(json.dumps(AGE_SCHEMA))
    args = ["synth", str(path), "--schema", str(schema), "--method", "mst", "--epsilon", "2",
            "--rows", "10", "--out", str(tmp_path / "o.csv"), "--seed", "1"]
    assert main(args + ["--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert "rows_fitted" not in payload and "fit_seconds" not in payload
    assert payload["rows"] == 10  # the requested count, public
    assert payload["guarantee"]["is_dp"] and payload["guarantee"]["covers"]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert text.splitlines()[0] == "(2, delta=1e-06)-DP"  # the headline first
    assert "fitted on" not in text and "400" not in text


def test_evaluation_is_listed_as_not_covered(tmp_path, capsys) -> None:
    path = tmp_path / "ages.csv"
    _age_frame().to_csv(path, index=False)
    schema = tmp_path / "ages.json"
    schema.write_text(json.dumps(AGE_SCHEMA))
    code = main(["synth", str(path), "--schema", str(schema), "--method", "mst", "--epsilon",
                 "2", "--rows", "100", "--out", str(tmp_path / "o.csv"), "--seed", "1",
                 "--holdout", "0.25", "--evaluate", "--json"])
    assert code == 0
    g = json.loads(capsys.readouterr().out)["guarantee"]
    assert not g["is_dp"] and any("evaluation" in c for c in g["not_covered"])
    assert g["headline"].startswith("NOT differentially private")


def test_integer_dtype_depends_on_the_declaration_not_on_the_draw() -> None:
    """Old path: Int64 only when a missing code happened to be drawn, else int64."""
    spec = ColumnSpec("age", "numeric", edges=tuple(make_edges(17, 90, 32, True)),
                      integer=True, missing=True)
    gen = np.random.default_rng(0)
    assert str(spec.decode(np.array([0, 3, 5]), gen).dtype) == "Int64"
    assert str(spec.decode(np.array([0, spec.missing_code]), gen).dtype) == "Int64"
    strict = ColumnSpec("age", "numeric", edges=spec.edges, integer=True, missing=False)
    assert str(strict.decode(np.array([0, 3]), gen).dtype) == "int64"
