"""The assessment from group-by counts (DuckDB over Parquet) equals the in-memory one: same
richness, tiers, combinations, k / l / t / delta-presence, risks and class details."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from privlab.assess import assess
from privlab.assess.grouped import DuckDBSource, assess_grouped
from privlab.assess.models import evaluate_privacy
from privlab.errors import InvalidInputError


def _close(a: Any, b: Any, path: str = "") -> None:
    if isinstance(a, dict):
        assert set(a) == set(b), (path, set(a) ^ set(b))
        for k in a:
            _close(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _close(x, y, f"{path}[{i}]")
    elif isinstance(a, float) and isinstance(b, (int, float)):
        assert math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12) or (
            math.isnan(a) and math.isnan(b)), (path, a, b)
    else:
        assert a == b, (path, a, b)


@pytest.fixture(scope="module")
def adult_parquet(tmp_path_factory: pytest.TempPathFactory, adult_raw: pd.DataFrame) -> Path:
    frame = adult_raw.copy()
    frame["hours-per-week"] = frame["hours-per-week"].astype(float)
    frame.loc[::11, "hours-per-week"] = np.nan  # NaN in a float column is missing
    path = tmp_path_factory.mktemp("grouped") / "adult.parquet"
    frame.to_parquet(path)
    return path


@pytest.mark.parametrize("options", [
    {},
    {"missing": "drop", "max_combination_size": 3},
    {"bins": 5, "quasi_identifiers": ["age", "sex", "race"], "sensitive": "salary"},
    {"quasi_identifiers": ["age", "education"], "sensitive": "hours-per-week",
     "missing": "drop", "sensitive_kind": "numeric", "recursive_l": 2},
])
def test_duckdb_counts_equal_in_memory(adult_parquet: Path, options: dict[str, Any]) -> None:
    frame = pd.read_parquet(adult_parquet)
    want = assess(frame, source="a", **options).to_dict()
    got = assess_grouped(DuckDBSource(adult_parquet), source="a", **options).to_dict()
    _close(want, got)


def test_population_and_weights(adult_parquet: Path, tmp_path: Path) -> None:
    frame = pd.read_parquet(adult_parquet).iloc[:4000].reset_index(drop=True)
    sample = tmp_path / "s.parquet"
    frame.to_parquet(sample)
    pop = pd.concat([frame, frame.iloc[:1500]], ignore_index=True)
    pop.to_parquet(tmp_path / "p.parquet")
    qis = ["age", "sex"]
    want = assess(frame, quasi_identifiers=qis, sensitive="salary", population=pop,
                  source="s").to_dict()
    got = assess_grouped(DuckDBSource(sample), quasi_identifiers=qis, sensitive="salary",
                         population=DuckDBSource(tmp_path / "p.parquet"), source="s").to_dict()
    _close(want, got)
    assert got["privacy_models"]["delta_presence"]["population_rows"] == 5500
    # weights: a table of counts reads like the records it stands for
    counts = frame.groupby(qis + ["salary"], dropna=False).size().reset_index(name="w")
    w = counts.pop("w").to_numpy()
    a = evaluate_privacy(frame, qis, "salary").to_dict()
    b = evaluate_privacy(counts, qis, "salary", weights=w).to_dict()
    _close(a, b)
    with pytest.raises(InvalidInputError, match="positive integer count"):
        evaluate_privacy(counts, qis, "salary", weights=w[:-1])


def test_bad_input(tmp_path: Path, adult_parquet: Path) -> None:
    from privlab.cli.main import main

    with pytest.raises(InvalidInputError, match="does not exist; pass a Parquet"):
        DuckDBSource(tmp_path / "missing.parquet")
    junk = tmp_path / "junk.parquet"
    junk.write_bytes(b"PAR1 but not really")
    with pytest.raises(InvalidInputError, match="cannot read .* as Parquet"):
        DuckDBSource(junk)
    with pytest.raises(InvalidInputError, match="unknown quasi-identifier 'nope'"):
        assess_grouped(DuckDBSource(adult_parquet), quasi_identifiers=["nope"])
    assert main(["assess", str(tmp_path / "missing.parquet"), "--engine", "duckdb"]) == 2
    assert main(["assess", str(adult_parquet), "--master", "local[1]"]) == 2


def test_no_progress_bar_in_json(adult_parquet: Path) -> None:
    """DuckDB draws a progress bar on stdout for long queries: it would corrupt `--json`."""
    src = DuckDBSource(adult_parquet)
    assert src.sql("SELECT current_setting('enable_progress_bar')")[0][0] is False
