"""Integer columns get whole-number histogram bins (issue 23): `release histogram -c
rate_marriage` (declared integer 1-5) gave 10 equal-width bins, half empty by construction,
and the console showed no bin labels."""

from __future__ import annotations

import numpy as np
import pandas as pd
import yaml

from privlab.cli.main import main
from privlab.core.queries import dp_histogram, histogram_edges


def test_small_integer_range_gets_one_bin_per_value():
    edges, labels = histogram_edges((1, 5), 10, integer=True)
    assert edges.tolist() == [1, 2, 3, 4, 5, 6] and labels == ["1", "2", "3", "4", "5"]
    # a wide range: at most `bins` whole-number bins, labelled as closed integer ranges
    edges, labels = histogram_edges((0, 19), 10, integer=True)
    assert len(labels) == 10 and labels[0] == "[0, 1]" and labels[-1] == "[18, 19]"
    # numbers keep equal-width bins
    edges, labels = histogram_edges((1, 5), 4)
    assert labels == ["[1, 2)", "[2, 3)", "[3, 4)", "[4, 5]"]


def test_integer_histogram_counts_each_value():
    values = np.repeat([1, 2, 3, 4, 5], [10, 20, 30, 40, 50])
    rel = dp_histogram(values, 1e6, bounds=(1, 5), integer=True, rng=1)
    assert rel.details["labels"] == ["1", "2", "3", "4", "5"]
    assert np.allclose(rel.value, [10, 20, 30, 40, 50], atol=1)


def test_release_histogram_of_a_declared_integer_column(tmp_path, capsys):
    gen = np.random.default_rng(0)
    frame = pd.DataFrame({"rate_marriage": gen.integers(1, 6, 500)})
    data = tmp_path / "fair.csv"
    frame.to_csv(data, index=False)
    schema = tmp_path / "fair.yaml"
    schema.write_text(yaml.safe_dump({"name": "fair", "columns": {
        "rate_marriage": {"type": "integer", "bounds": [1, 5], "missing": False}}}))
    code = main(["release", "histogram", str(data), "--column", "rate_marriage",
                 "--epsilon", "1", "--schema", str(schema), "--seed", "2"])
    out = capsys.readouterr().out
    assert code == 0
    text = " ".join(out.split())
    assert "bins: 1: " in text and ", 5: " in text and "[1, 1.4)" not in text
