"""Public, data-independent preprocessing and the experiment datasets."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from privlab.errors import InvalidInputError
from privlab.learn.data import (
    TablePreprocessor,
    adult_features,
    adult_preprocessor,
    seed004_split,
    split_target,
)


def test_adult_pipeline_is_public_and_bounded():
    from privlab.data.datasets import load_adult

    frame = load_adult(drop_missing=True).head(2000)
    prep = adult_preprocessor()
    x = prep.fit_transform(adult_features(frame))
    assert x.shape == (2000, 104) and prep.leaks == []
    assert x.min() >= 0 and x.max() <= 1
    assert np.linalg.norm(x, axis=1).max() <= math.sqrt(13) + 1e-6
    # every row hits exactly one category per text column (public lists cover the data)
    assert np.allclose(x[:, 5:].sum(1), 8)


def test_preprocessor_records_what_it_reads_from_the_data():
    frame = pd.DataFrame({"a": [1.0, 5.0, 3.0], "c": ["x", "y", "x"]})
    prep = TablePreprocessor(one_hot=True, bounds={"a": (0.0, 10.0)})
    x = prep.fit_transform(frame)
    assert x.shape == (3, 3) and prep.leaks == ["categories of 'c' read from the data"]
    with pytest.raises(InvalidInputError, match="not numeric"):
        TablePreprocessor().fit(frame)


def test_split_target_errors():
    frame = pd.DataFrame({"a": [1, 2, 3], "y": [1, 1, 1]})
    with pytest.raises(InvalidInputError, match="constant"):
        split_target(frame, "y")
    with pytest.raises(InvalidInputError, match="unknown target column 'z'"):
        split_target(frame, "z")


def test_seed004_splits():
    loss = seed004_split("loss")
    assert len(loss.y_train) == 1000 and len(loss.extra["y_val"]) == 2100
    assert len(loss.y_test) == 3000 and loss.X_train.shape[1] == 100
    shadow = seed004_split("shadow")
    assert (len(shadow.y_train), len(shadow.extra["y_val"]), len(shadow.y_test),
            len(shadow.extra["y_shadow"])) == (2000, 3250, 4500, 5250)
