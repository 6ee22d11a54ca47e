"""Many models at once give the same models as training each alone with the same seeds."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from privlab.errors import InvalidInputError
from privlab.learn.dpsgd import TrainConfig
from privlab.learn.models import SeedMLP, SmallCNN
from privlab.learn.multi import shadow_subsets, train_many, train_one


def _mlp():
    return SeedMLP(6, (12, 8), 2, dropout=0.0)


def _max_diff(a: torch.nn.Module, b: torch.nn.Module) -> float:
    return max(float((p - q).detach().abs().max()) for p, q in zip(a.parameters(), b.parameters(),
                                                           strict=True))


@pytest.mark.parametrize("method,engine", [("none", "auto"), ("dpsgd", "auto"),
                                           ("dpsgd", "vmap")])
def test_many_equals_one_at_a_time(blobs, method, engine):
    x, y = blobs
    subsets = shadow_subsets(len(y), 3, 150, seed=4)
    seeds = [10, 11, 12]
    cfg = TrainConfig(method=method, epsilon=3.0 if method == "dpsgd" else None, delta=1e-4,
                      epochs=2, batch_size=25, lr=1e-2, engine=engine,
                      public_size=150 if method == "dpsgd" else None)
    many = train_many(_mlp, x, y, config=cfg, subsets=subsets, seeds=seeds)
    assert len(many.models) == 3
    for i, seed in enumerate(seeds):
        alone, res = train_one(_mlp, x[subsets[i]], y[subsets[i]], cfg, seed=seed)
        assert _max_diff(alone, many.models[i]) < 1e-5
        assert many.guarantees[i].epsilon == res.guarantee.epsilon
    # different seeds and subsets: genuinely different models
    assert _max_diff(many.models[0], many.models[1]) > 1e-3


def test_epsilon_sweep_in_one_run(blobs):
    x, y = blobs
    configs = [TrainConfig(epsilon=e, delta=1e-4, epochs=1, batch_size=30, lr=1e-2,
                           public_size=len(y))
               for e in (1.0, 8.0)]
    many = train_many(_mlp, x, y, config=configs, seeds=[5, 5])
    assert many.plans[0].noise_multiplier > many.plans[1].noise_multiplier
    assert many.guarantees[0].epsilon <= 1.0 and many.guarantees[1].epsilon <= 8.0
    alone, _ = train_one(_mlp, x, y, configs[1], seed=5)
    assert _max_diff(alone, many.models[1]) < 1e-5


def test_many_cnns_dp(blobs):
    gen = np.random.default_rng(0)
    x = gen.normal(size=(40, 1, 8, 8)).astype(np.float32)
    y = gen.integers(0, 3, 40)

    def cnn():
        return SmallCNN(1, 3, channels=(4, 4, 4, 4), image_size=8)

    cfg = TrainConfig(epsilon=8.0, delta=1e-3, epochs=1, batch_size=10, lr=1e-2,
                      public_size=40)
    many = train_many(cnn, x, y, config=cfg, seeds=[1, 2])
    alone, _ = train_one(cnn, x, y, cfg, seed=2)
    assert many.engine == "multi-fast"
    assert _max_diff(alone, many.models[1]) < 1e-5


def test_bad_subsets(blobs):
    x, y = blobs
    cfg = TrainConfig(method="none", epochs=1, batch_size=10)
    with pytest.raises(InvalidInputError, match="same size"):
        train_many(_mlp, x, y, config=cfg, subsets=[np.arange(10), np.arange(12)],
                   seeds=[1, 2])
    with pytest.raises(InvalidInputError, match="outside"):
        train_many(_mlp, x, y, config=cfg, subsets=[np.arange(290, 310)], seeds=[1])
    with pytest.raises(InvalidInputError, match="differ only"):
        train_many(_mlp, x, y, config=[cfg, TrainConfig(method="none", epochs=2,
                                                        batch_size=10)], seeds=[1, 2])


def test_stacked_chain_only_when_it_is_the_model():
    from torch import nn

    from privlab.learn.stacked import as_chain

    class Doubling(nn.Module):   # one child, but forward is not just the child
        def __init__(self) -> None:
            super().__init__()
            self.net = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))

        def forward(self, x):
            return self.net(2 * x)

    assert as_chain(SeedMLP(4, (3,), 2), (4,)) is not None
    assert as_chain(Doubling(), (4,)) is None
    assert as_chain(SmallCNN(1, 2, channels=(2, 2, 2, 2), image_size=4), (1, 4, 4)) is None


def test_train_many_refuses_a_private_config_without_a_public_rate(blobs):
    """Regression (issue 21): train_many set q from the subset size (the rows passed)."""
    x, y = blobs
    cfg = TrainConfig(epsilon=3.0, delta=1e-4, epochs=1, batch_size=25)
    with pytest.raises(InvalidInputError, match="sample_rate=q or public_size=N"):
        train_many(_mlp, x, y, config=cfg, subsets=[np.arange(100)], seeds=[1])
