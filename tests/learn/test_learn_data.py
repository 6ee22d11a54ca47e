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
    classification_benchmark_split,
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


def test_classification_benchmark_splits():
    loss = classification_benchmark_split("loss")
    assert len(loss.y_train) == 1000 and len(loss.extra["y_val"]) == 2100
    assert len(loss.y_test) == 3000 and loss.X_train.shape[1] == 100
    shadow = classification_benchmark_split("shadow")
    assert (len(shadow.y_train), len(shadow.extra["y_val"]), len(shadow.y_test),
            len(shadow.extra["y_shadow"])) == (2000, 3250, 4500, 5250)


def _schema():
    from privlab.schema import schema_from_columns

    return schema_from_columns("t", {
        "age": {"type": "integer", "bounds": [0, 100], "missing": False},
        "gain": {"type": "numeric", "bounds": [0, 9999], "scale": "log", "missing": True},
        "city": {"type": "categorical", "categories": ["A", "B", "C"], "other": True},
        "id": {"type": "identifier", "missing": False},
        "y": {"type": "categorical", "categories": ["no", "yes"], "missing": False},
    })


def test_schema_encoder_reads_nothing_from_the_rows():
    from privlab.learn.data import SchemaEncoder, schema_classes
    from privlab.schema import conform

    schema = _schema()
    enc = SchemaEncoder.for_target(schema, "y")
    assert enc.columns == ("age", "gain", "city")  # identifiers are never features
    assert enc.feature_names == ["age", "gain", "gain=<missing>", "city=A", "city=B",
                                 "city=C", "city=<other>", "city=<missing>"]
    raw = pd.DataFrame({"age": [0, 50, 150], "gain": [0.0, 9999.0, None],
                        "city": ["A", "Z", None], "id": ["1", "2", "3"],
                        "y": ["no", "yes", "no"]})
    x = enc.transform(conform(raw, schema, "coerce"))
    expected = np.array([[0.0, 0.0, 0, 1, 0, 0, 0, 0],
                         [0.5, 1.0, 0, 0, 0, 0, 1, 0],    # Z -> <other>
                         [1.0, 0.0, 1, 0, 0, 0, 0, 1]])   # 150 clamped, missing indicators
    assert np.allclose(x, expected)
    # log scale: log1p(x) / log1p(9999)
    mid = enc.transform(conform(raw.assign(gain=[99.0, 0, 0]), schema, "coerce"))
    assert mid[0, 1] == pytest.approx(math.log1p(99) / math.log1p(9999), rel=1e-6)
    # one row only: the same width (no category read from the data)
    assert enc.transform(conform(raw.iloc[[0]], schema, "coerce")).shape == (1, 8)
    assert (np.linalg.norm(x, axis=1) <= enc.row_norm_bound + 1e-6).all()
    assert schema_classes(schema, "y") == ["no", "yes"]
    with pytest.raises(InvalidInputError, match="needs a categorical target"):
        schema_classes(schema, "age")


def test_row_split_depends_on_each_row_alone():
    from privlab.learn.data import row_test_mask

    gen = np.random.default_rng(0)
    frame = pd.DataFrame({"a": gen.integers(0, 10**6, 4000).astype(float),
                          "b": gen.choice(["x", "y"], 4000)})
    mask = row_test_mask(frame, 0.25, key=7)
    # removing a row leaves every other row on its side; the test share is Binomial(n, 0.25)
    assert (row_test_mask(frame.drop(index=5).reset_index(drop=True), 0.25, 7)
            == np.delete(mask, 5)).all()
    assert abs(mask.mean() - 0.25) < 4 * math.sqrt(0.25 * 0.75 / 4000)
    assert (row_test_mask(frame, 0.25, key=8) != mask).any()  # the key matters


def test_declared_classes_fix_the_label_codes():
    from privlab.learn.data import encode_labels

    codes, classes = encode_labels(["yes", "yes"], classes=["no", "yes"])
    assert codes.tolist() == [1, 1] and classes.tolist() == ["no", "yes"]
    with pytest.raises(InvalidInputError, match="outside the declared classes"):
        encode_labels(["maybe"], classes=["no", "yes"])
