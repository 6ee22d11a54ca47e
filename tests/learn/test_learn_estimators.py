"""The scikit-learn contract of the DP estimators, their plain mode, and bad input."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone

from privlab.errors import InvalidInputError
from privlab.learn.estimators import (
    DPCNNClassifier,
    DPLogisticRegression,
    DPMLPClassifier,
    NotPrivateWarning,
    load_model,
)

FAST = dict(epochs=2, batch_size=50, random_state=0)
YES_NO = ["no", "yes"]


@pytest.mark.parametrize("est", [
    DPLogisticRegression(epsilon=2.0, data_norm=4.0, random_state=0, classes=YES_NO),
    DPLogisticRegression(epsilon=2.0, delta=1e-5, method="output", alpha=0.05, data_norm=4.0,
                         random_state=0, classes=YES_NO),
    DPLogisticRegression(epsilon=2.0, delta=1e-4, method="dpsgd", lr=0.05, classes=YES_NO,
                         public_size=300, **FAST),
    DPMLPClassifier(epsilon=4.0, delta=1e-4, hidden_layer_sizes=(16,), lr=1e-2, classes=YES_NO,
                    sample_rate=50 / 300, **FAST),
], ids=["objective", "output", "logreg-dpsgd", "mlp-dpsgd"])
def test_sklearn_contract(blobs, est):
    x, y = blobs
    labels = np.where(y == 1, "yes", "no")
    params = est.get_params()
    for key in ("epsilon", "delta", "method", "random_state"):
        assert key in params
    assert clone(est).get_params() == params
    assert est.fit(x, labels) is est
    assert set(est.classes_) == {"no", "yes"}
    proba = est.predict_proba(x)
    assert proba.shape == (300, 2) and np.allclose(proba.sum(1), 1.0)
    assert set(est.predict(x)) <= {"no", "yes"}
    assert est.score(x, labels) > 0.7
    assert est.guarantee_.is_dp and est.guarantee_.epsilon <= 2.0 + 2.0 * (
        params["method"] == "dpsgd" and isinstance(est, DPMLPClassifier))
    loss = est.per_example_loss(x[:5], labels[:5])
    assert loss.shape == (5,) and np.allclose(
        loss, -np.log(proba[np.arange(5), (labels[:5] == "yes").astype(int)]))


def test_plain_mode_warns_and_overfits(blobs):
    x, y = blobs
    est = DPMLPClassifier(method="none", hidden_layer_sizes=(64, 32), dropout=0.0, epochs=60,
                          batch_size=16, lr=1e-2, random_state=0)
    with pytest.warns(NotPrivateWarning):
        est.fit(x[:60], y[:60])
    assert not est.guarantee_.is_dp
    assert est.score(x[:60], y[:60]) == 1.0
    members = est.per_example_loss(x[:60], y[:60]).mean()
    outsiders = est.per_example_loss(x[200:], y[200:]).mean()
    assert members < outsiders


def test_cnn_on_flat_rows():
    gen = np.random.default_rng(0)
    x = gen.random((80, 16)).astype(np.float32)
    y = (x[:, :8].sum(1) > x[:, 8:].sum(1)).astype(int)
    est = DPCNNClassifier(channels=(4, 4, 4, 4), image_shape=(1, 4, 4), epsilon=8.0, delta=1e-3,
                          epochs=1, batch_size=20, random_state=0, classes=[0, 1],
                          public_size=80).fit(x, y)
    assert est.predict_proba(x).shape == (80, 2) and est.guarantee_.is_dp
    with pytest.raises(InvalidInputError, match="image_shape"):
        DPCNNClassifier(image_shape=(1, 3, 3), classes=[0, 1], public_size=80).fit(x, y)


@pytest.mark.filterwarnings("ignore::privlab.learn.estimators.NotPrivateWarning")
def test_bad_input(blobs):
    x, y = blobs
    frame = pd.DataFrame(x, columns=[f"f{i}" for i in range(6)])
    frame["city"] = "Ankara"
    with pytest.raises(InvalidInputError, match="'city' is not numeric"):
        DPMLPClassifier(**FAST).fit(frame, y)
    with pytest.raises(InvalidInputError, match="constant"):
        DPLogisticRegression(method="none").fit(x, np.zeros(300))
    with pytest.raises(InvalidInputError, match="larger than the training set"):
        DPMLPClassifier(method="none", epochs=1, batch_size=1000).fit(x, y)
    with pytest.raises(InvalidInputError, match="method"):
        DPMLPClassifier(method="objective").fit(x, y)
    with pytest.raises(InvalidInputError, match="not fitted"):
        DPMLPClassifier().predict(x)
    with pytest.raises(InvalidInputError, match="missing or infinite"):
        DPLogisticRegression(classes=[0, 1]).fit(np.where(x > 2, np.nan, x), y)


def test_save_and_load(tmp_path, blobs):
    x, y = blobs
    est = DPLogisticRegression(epsilon=1.0, data_norm=4.0, random_state=0,
                               classes=[0, 1]).fit(x, y)
    path = tmp_path / "model.pkl"
    est.save(path)
    payload = load_model(path)
    assert payload["guarantee"]["epsilon"] == 1.0
    assert np.allclose(payload["estimator"].predict_proba(x), est.predict_proba(x))
    (tmp_path / "junk.pkl").write_bytes(b"not a pickle")
    with pytest.raises(InvalidInputError):
        load_model(tmp_path / "junk.pkl")


def test_no_warning_in_private_mode(blobs):
    x, y = blobs
    with warnings.catch_warnings():
        warnings.simplefilter("error", NotPrivateWarning)
        DPLogisticRegression(epsilon=1.0, data_norm=4.0, random_state=0,
                             classes=[0, 1]).fit(x, y)


def test_declared_classes_set_the_output_layer(blobs):
    """A class with no row still gets its output unit: the model's shape is public."""
    from privlab.learn.estimators import DPLogisticRegression, DPMLPClassifier

    x, y = blobs
    labels = np.where(y == 1, "b", "a")
    mlp = DPMLPClassifier(method="dpsgd", epsilon=4.0, delta=1e-4, epochs=1, batch_size=32,
                          sample_rate=0.1, classes=["a", "b", "c"], random_state=0)
    mlp.fit(x, labels)
    assert mlp.classes_.tolist() == ["a", "b", "c"]
    assert mlp.predict_proba(x).shape == (len(x), 3)
    assert mlp.training_.plan.sample_rate == 0.1
    lr = DPLogisticRegression(epsilon=1.0, classes=["a", "b", "c"], random_state=0)
    lr.fit(x, labels)
    assert lr.coef_.shape == (3, x.shape[1])
