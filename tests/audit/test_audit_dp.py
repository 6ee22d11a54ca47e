"""The empirical epsilon check on DP-SGD models, with a power check.

The lower end of the Clopper-Pearson interval of the empirical epsilon must never exceed the
accounted epsilon of a DP run. To show the check can fail (it would catch a broken
accountant or training loop), the same attack on a run with almost no noise (accounted
epsilon in the tens of thousands) must give a lower bound well above 1: an accountant that
claimed epsilon <= 1 for that run would be flagged."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="needs the ml extra: pip install -e '.[ml]'")

from privlab.audit import threshold_attack  # noqa: E402


def test_empirical_epsilon_below_accounted_and_the_check_has_power():
    from sklearn.datasets import make_classification

    from privlab.learn.dpsgd import TrainConfig
    from privlab.learn.models import SeedMLP
    from privlab.learn.multi import train_many

    # 30% flipped labels: fitting the members means memorising them
    x, y = make_classification(600, 20, n_informative=10, flip_y=0.3, random_state=0)
    x = x.astype(np.float32)
    mem, non = (x[:300], y[:300]), (x[300:], y[300:])
    common = dict(delta=1e-3, epochs=30, batch_size=100, lr=2e-2, clip=10.0, public_size=300)
    configs = [TrainConfig(epsilon=1.0, **common),
               TrainConfig(noise_multiplier=0.02, **common)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = train_many(lambda: SeedMLP(20, (128,), 2, dropout=0.0), *mem, config=configs,
                         seeds=[0, 1])
    lows = []
    for model, g in zip(res.models, res.guarantees, strict=True):
        e = threshold_attack("loss", model, mem, non).empirical_epsilon(g.delta, level=0.95)
        assert e.lower <= g.epsilon, (e.lower, g.epsilon)
        lows.append(e.lower)
    assert res.guarantees[0].epsilon <= 1.0 * 1.001
    assert res.guarantees[1].epsilon > 1000
    assert lows[1] > 1.0  # the leaky run (1.36 here): a claim of epsilon <= 1 would be caught
