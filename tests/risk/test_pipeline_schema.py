"""choose-epsilon takes its feature domain from a declared schema (issue 21, item 6)."""

import json

import numpy as np
import pytest
from risk_tables import small_frame, small_schema

from privlab.cli.main import main
from privlab.risk import pipeline as P

pytest.importorskip("torch", reason="needs the ml extra: pip install -e '.[ml]'")

FAST = ["--epochs", "1", "--shadow-models", "1", "--batch-size", "32", "--seed", "3"]

def test_cli_encodes_from_the_schema(tmp_path, capsys):
    data = tmp_path / "d.csv"
    small_frame().to_csv(data, index=False)
    rc = main(["choose-epsilon", str(data), "--target", "label", "--epsilons", "2",
               "--json", "--schema", small_schema(tmp_path), *FAST])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    doc = json.loads(captured.out)
    assert doc["data"]["preprocessing"] == "declared schema 'small'"
    assert doc["data"]["preprocessing_leaks"] == []


def test_cli_refuses_a_user_table_without_a_schema(tmp_path, capsys):
    """Regression (issue 21, item 6): choose-epsilon read the features' numeric ranges and
    categories from the rows without saying so; train and synth refuse that. Now a user table
    needs --schema (one line naming it) before any training, and with one nothing is read."""
    data = tmp_path / "d.csv"
    small_frame().to_csv(data, index=False)
    rc = main(["choose-epsilon", str(data), "--target", "label", *FAST])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "--schema" in err


def test_schema_encoding_ignores_the_rows_ranges(tmp_path):
    """With a schema, one extreme row changes no other row's encoding (ranges are declared)."""
    from privlab.schema import load_schema

    sch = load_schema(small_schema(tmp_path))
    f = small_frame(300)
    g = f.copy()
    g.loc[0, "f0"] = 4.9  # inside the declared bounds, outside the data's own range
    a = P.prepare(f, "label", schema=sch, seed=1)
    b = P.prepare(g, "label", schema=sch, seed=1)
    assert a.classes == b.classes == ["no", "yes"] and a.info["preprocessing_leaks"] == []
    rows_a = {tuple(r) for r in np.vstack([a.x_train, a.x_test, a.x_pool]).tolist()}
    rows_b = {tuple(r) for r in np.vstack([b.x_train, b.x_test, b.x_pool]).tolist()}
    assert len(rows_a ^ rows_b) <= 2  # only the edited row's encoding differs
