"""The neighbour fuzz over the library API (tests/soundness/library_fuzz.py), bounded for CI.

Issue 21's library leaks are explicit examples: the DP-SGD sample rate read from the exact n
(`sample_rate=None`), a replaced label that adds a class (`classes=None`), and `--max-users`
keeping the first N users by id.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from library_fuzz import (
    check_estimator,
    check_max_users,
    check_query,
    check_synth,
    estimator_cases,
    federated_cases,
    query_cases,
    synth_cases,
)


def _settings(n: int) -> settings:
    return settings(max_examples=n, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@_settings(60)
@given(case=query_cases())
@example(case=("dp_count", {"epsilon": 1.0, "mechanism": "geometric"}, [], "add", 1.0))
def test_queries_neighbours_fuzz(case) -> None:
    check_query(*case)


@_settings(4)
@given(case=estimator_cases())
@example(case=("logreg", {"epsilon": 2.0, "random_state": 11, "method": "dpsgd",
                          "delta": 1e-5, "epochs": 1, "batch_size": 16, "sample_rate": None,
                          "classes": [0, 1, 2]}, 40, "add"))
@example(case=("logreg", {"epsilon": 2.0, "random_state": 11, "method": "objective",
                          "classes": None}, 40, "new_label"))
def test_estimators_neighbours_fuzz(case) -> None:
    pytest.importorskip("torch", reason="needs the ml extra: pip install -e '.[ml]'")
    check_estimator(*case)


@_settings(4)
@given(case=synth_cases())
def test_synthesizers_neighbours_fuzz(case) -> None:
    check_synth(*case)


@_settings(4)
@given(case=federated_cases())
@example(case=(4, "add_user"))
@example(case=(None, "add_user"))  # issue 29: one split stream moved every user's rows
@example(case=(None, "remove_user"))
# issue 29: representation edits (a blank id; 19-digit ids with one blank read as floats)
@example(case=(None, "missing_unit"))
@example(case=(4, "long_ids_missing_one"))
def test_max_users_neighbours_fuzz(case) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        check_max_users(Path(tmp), *case)
