"""Per-example clipping: both engines equal a per-example loop, and never exceed the clip."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from privlab.core.dpsgd import clip_factors
from privlab.errors import InvalidInputError, UnsafeConfigurationError
from privlab.learn.engine import GradientClipper
from privlab.learn.models import SeedMLP, SmallCNN


def _reference(clipper: GradientClipper, x: torch.Tensor, y: torch.Tensor, clip: float):
    per = clipper.per_sample_gradients(x, y)
    norms = torch.sqrt(sum(g.double().reshape(len(x), -1).pow(2).sum(1) for g in per))
    factors = clip_factors(norms.float(), clip)
    sums = [torch.einsum("n,n...->...", factors, g) for g in per]
    return per, norms, factors, sums


class Shared(nn.Module):
    """One Linear used twice per forward: the fast engine must hand over to vmap."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.out = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(torch.relu(self.lin(torch.relu(self.lin(x)))))


class Custom(nn.Module):
    """A parameter outside any known layer type: only the vmap engine can serve it."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.ones(4))
        self.out = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(x * self.scale)


class Inplace(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(4, 6)
        self.act = nn.ReLU(inplace=True)
        self.b = nn.Linear(6, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(self.act(self.a(x)))


CASES = [
    ("mlp", lambda: SeedMLP(8, (16, 8), 3, dropout=0.0), (10, 8), 3),
    ("cnn", lambda: SmallCNN(1, 3, channels=(4, 8, 8, 8), image_size=8), (6, 1, 8, 8), 3),
    ("inplace", Inplace, (9, 4), 2),
]


@pytest.mark.parametrize("engine", ["fast", "vmap"])
@pytest.mark.parametrize("name,factory,shape,classes", CASES)
def test_engine_matches_per_example_loop(engine, name, factory, shape, classes):
    torch.manual_seed(0)
    model = factory()
    x = torch.randn(*shape) * 3
    y = torch.randint(0, classes, (shape[0],))
    clip = 0.5
    clipper = GradientClipper(model, clip, engine=engine)
    out = clipper(x, y)
    assert clipper.engine == engine
    _, norms, factors, sums = _reference(clipper, x, y, clip)
    assert torch.allclose(out.norms.double(), norms, rtol=1e-4, atol=1e-6)
    for got, want in zip(out.grads, sums, strict=True):
        assert torch.allclose(got, want, rtol=1e-4, atol=1e-6)
    assert (factors < 1).any(), "the test must exercise clipping"


@pytest.mark.parametrize("engine", ["fast", "vmap"])
@pytest.mark.parametrize("scale", [1.0, 1e3])
def test_clipped_per_example_norms_never_exceed_clip(engine, scale):
    torch.manual_seed(1)
    model = SeedMLP(8, (16, 8), 2, dropout=0.0)
    x = torch.randn(32, 8) * scale
    y = torch.randint(0, 2, (32,))
    clip = 0.7
    clipper = GradientClipper(model, clip, engine=engine)
    out = clipper(x, y)
    per = clipper.per_sample_gradients(x, y)
    clipped = torch.sqrt(sum((g.double() * out.factors.double().view(-1, *[1] * (g.dim() - 1)))
                             .reshape(32, -1).pow(2).sum(1) for g in per))
    assert float(clipped.max()) <= clip           # exact: no tolerance
    total = torch.sqrt(sum(g.double().pow(2).sum() for g in out.grads))
    assert float(total) <= 32 * clip               # the sum's sensitivity argument


def test_shared_layer_falls_back_to_vmap():
    torch.manual_seed(2)
    model = Shared()
    x, y = torch.randn(5, 4), torch.randint(0, 2, (5,))
    clipper = GradientClipper(model, 1.0)
    out = clipper(x, y)
    assert clipper.engine == "vmap"
    _, norms, _, sums = _reference(clipper, x, y, 1.0)
    assert torch.allclose(out.norms.double(), norms, rtol=1e-4)
    for got, want in zip(out.grads, sums, strict=True):
        assert torch.allclose(got, want, rtol=1e-4, atol=1e-6)
    with pytest.raises(UnsafeConfigurationError):
        GradientClipper(Shared(), 1.0, engine="fast")(x, y)


def test_unknown_parameter_uses_vmap():
    torch.manual_seed(3)
    model = Custom()
    x, y = torch.randn(6, 4), torch.randint(0, 3, (6,))
    clipper = GradientClipper(model, 0.3)
    assert clipper.engine == "vmap"
    out = clipper(x, y)
    _, _, _, sums = _reference(clipper, x, y, 0.3)
    for got, want in zip(out.grads, sums, strict=True):
        assert torch.allclose(got, want, rtol=1e-4, atol=1e-6)


def test_batchnorm_refused_and_bad_clip():
    model = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4), nn.Linear(4, 2))
    with pytest.raises(InvalidInputError, match="BatchNorm1d"):
        GradientClipper(model, 1.0)
    with pytest.raises(InvalidInputError, match="clip"):
        GradientClipper(SeedMLP(4, (4,), 2), 0.0)


def test_empty_batch_gives_zero_gradients():
    model = SeedMLP(4, (4,), 2)
    out = GradientClipper(model, 1.0)(torch.zeros(0, 4), torch.zeros(0, dtype=torch.int64))
    assert all(float(g.abs().sum()) == 0 for g in out.grads)
    assert np.isclose(out.loss_sum, 0.0)
