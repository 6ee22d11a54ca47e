"""The library estimators read n, the sampling rate and the classes only from public
arguments (issue 21, item 4): never from len(X) or np.unique(y)."""

from __future__ import annotations

import numpy as np
import pytest

from privlab.errors import InvalidInputError
from privlab.learn.estimators import DPCNNClassifier, DPLogisticRegression, DPMLPClassifier
from privlab.schema.facts import watch_facts

FAST = dict(epochs=1, batch_size=50, random_state=0)


def _rows(n: int, d: int = 6, seed: int = 7) -> tuple[np.ndarray, np.ndarray]:
    gen = np.random.default_rng(seed)
    x = gen.normal(size=(n, d)).astype(np.float32)
    return x, (x[:, 0] > 0).astype(np.int64)


@pytest.mark.parametrize("make", [
    lambda **k: DPLogisticRegression(method="dpsgd", epsilon=2.0, delta=1e-4, **k),
    lambda **k: DPMLPClassifier(epsilon=2.0, delta=1e-4, hidden_layer_sizes=(8,), **k),
    lambda **k: DPCNNClassifier(channels=(4, 4, 4, 4), image_shape=(1, 4, 4), epsilon=2.0,
                                delta=1e-4, **k),
], ids=["logreg-dpsgd", "mlp", "cnn"])
def test_dpsgd_without_a_public_rate_is_refused(make):
    """Regression: sample_rate=None set q = batch / len(X) (n=500 vs 501: q 0.1 vs 0.0998)."""
    x, y = _rows(500, d=16)
    with pytest.raises(InvalidInputError, match="^sample_rate: .*public_size") as info:
        make(classes=[0, 1], **FAST).fit(x, y)
    assert "\n" not in str(info.value)


def test_neighbours_get_the_same_plan_from_public_size():
    """n=500 vs n=501 (one row added): same sample rate, steps, noise multiplier, guarantee."""
    x, y = _rows(501)
    plans, guarantees = [], []
    for n in (500, 501):
        est = DPLogisticRegression(method="dpsgd", epsilon=2.0, delta=1e-4, classes=[0, 1],
                                   public_size=1000, **FAST).fit(x[:n], y[:n])
        plans.append(est.torch_.training_.plan)
        guarantees.append(est.guarantee_)
    a, b = plans
    assert a.sample_rate == b.sample_rate == 50 / 1000
    assert a.steps == b.steps == 20
    assert a.noise_multiplier == b.noise_multiplier
    assert guarantees[0] == guarantees[1] and guarantees[0].is_dp
    assert any("public_size" in note for note in guarantees[0].notes)


@pytest.mark.parametrize("make", [
    lambda: DPLogisticRegression(epsilon=1.0),
    lambda: DPLogisticRegression(epsilon=1.0, delta=1e-5, method="output"),
    lambda: DPLogisticRegression(method="dpsgd", epsilon=2.0, delta=1e-4, public_size=500,
                                 **FAST),
    lambda: DPMLPClassifier(epsilon=2.0, delta=1e-4, public_size=500, **FAST),
], ids=["objective", "output", "logreg-dpsgd", "mlp"])
def test_private_fit_without_classes_is_refused(make):
    """Regression: classes=None read the class list from y, so one replaced label added a
    class (coef_ (1, d) -> (3, d)) under a DP guarantee."""
    x, y = _rows(500)
    with pytest.raises(InvalidInputError, match="^classes: "):
        make().fit(x, y)


@pytest.mark.parametrize("method", ["objective", "output"])
def test_a_replaced_label_does_not_change_the_model_shape(method):
    x, y = _rows(300)
    labels = np.where(y == 1, "b", "a").astype(object)
    replaced = labels.copy()
    replaced[0] = "c"
    shapes = []
    for lab in (labels, replaced):
        est = DPLogisticRegression(epsilon=1.0, delta=1e-5 if method == "output" else 0.0,
                                   method=method, classes=["a", "b", "c"], random_state=0)
        est.fit(x, lab)
        shapes.append((est.coef_.shape, tuple(est.classes_)))
    assert shapes[0] == shapes[1] == ((3, 6), ("a", "b", "c"))


def test_the_facts_a_fit_reads_come_from_its_arguments():
    """The harness hook: every fact the estimator read is recorded, none from the data."""
    x, y = _rows(200)
    with watch_facts() as reads:
        DPMLPClassifier(epsilon=2.0, delta=1e-4, hidden_layer_sizes=(8,), classes=[0, 1],
                        sample_rate=0.25, **FAST).fit(x, y)
    assert {r.name for r in reads} >= {"classes", "sample_rate"}
    assert {r.origin for r in reads} == {"argument"}


def test_plain_mode_may_still_read_the_classes():
    x, y = _rows(100)
    with pytest.warns(UserWarning, match="WITHOUT differential privacy"):
        est = DPLogisticRegression(method="none").fit(x, y)
    assert est.classes_.tolist() == [0, 1] and not est.guarantee_.is_dp


def test_public_size_must_be_a_whole_number():
    x, y = _rows(100)
    with pytest.raises(InvalidInputError, match="public_size"):
        DPMLPClassifier(classes=[0, 1], public_size=0.5, **FAST).fit(x, y)
