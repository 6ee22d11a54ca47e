"""Model zoo for the experiments of Kobylianska (2025), all DP-SGD compatible (no BatchNorm).

- `SeedMLP`: Kobylianska (2025) Listing 2.1, 100-128-64-2 with LayerNorm, ReLU, Dropout 0.2.
- `SmallCNN`: Kobylianska's (2025) 4-block CNN (channels 32, 64, 128, 256), each block
  conv3x3 -> GroupNorm -> ReLU -> max-pool (pooling stops at 2x2, so 8x8 digits fit too).
- `LogisticModel`: one linear layer (logistic / softmax regression trained by DP-SGD).

Per-sample gradients need every row to be processed on its own: LayerNorm and GroupNorm
normalise inside one example, BatchNorm would mix examples (and is refused by the trainers).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn


class SeedMLP(nn.Module):
    """Kobylianska's MLP: fc1 -> LN -> ReLU -> Dropout -> fc2 -> LN -> ReLU -> Dropout -> fc3."""

    def __init__(self, input_dim: int = 100, hidden_dims: Sequence[int] = (128, 64),
                 num_classes: int = 2, dropout: float = 0.2, layer_norm: bool = True) -> None:
        super().__init__()
        dims = [int(input_dim), *[int(h) for h in hidden_dims]]
        layers: list[nn.Module] = []
        for a, b in zip(dims[:-1], dims[1:], strict=True):
            layers.append(nn.Linear(a, b))
            if layer_norm:
                layers.append(nn.LayerNorm(b))
            layers.append(nn.ReLU())
            if dropout > 0:
                layers.append(nn.Dropout(dropout))
        layers.append(nn.Linear(dims[-1], int(num_classes)))
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class SmallCNN(nn.Module):
    """Kobylianska's (2025) 4-block CNN with GroupNorm, for (C, H, W) images of any size >= 1."""

    def __init__(self, in_channels: int = 1, num_classes: int = 10,
                 channels: Sequence[int] = (32, 64, 128, 256), image_size: int = 8,
                 groups: int = 8) -> None:
        super().__init__()
        blocks: list[nn.Module] = []
        prev, size = int(in_channels), int(image_size)
        for ch in channels:
            g = _groups_for(int(ch), groups)
            blocks += [nn.Conv2d(prev, int(ch), kernel_size=3, padding=1),
                       nn.GroupNorm(g, int(ch)), nn.ReLU()]
            if size >= 4:  # keep >= 2x2 maps so GroupNorm never normalises a single pixel
                blocks.append(nn.MaxPool2d(2))
                size //= 2
            prev = int(ch)
        self.features = nn.Sequential(*blocks)
        self.head = nn.Linear(prev * size * size, int(num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.flatten(self.features(x), 1))


def _groups_for(channels: int, wanted: int) -> int:
    # at least two channels per group, so a 1x1 feature map still has > 1 value per group
    g = max(1, min(wanted, channels // 2))
    while channels % g:
        g -= 1
    return g


class LogisticModel(nn.Module):
    """Multinomial logistic regression as a module (k logits; 2 for binary)."""

    def __init__(self, input_dim: int, num_classes: int = 2) -> None:
        super().__init__()
        self.linear = nn.Linear(int(input_dim), int(num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x)


def adult_mlp(input_dim: int = 104, dropout: float = 0.0) -> SeedMLP:
    """The MLP used on Adult in the benchmarks: input-128-64-2 with LayerNorm."""
    return SeedMLP(input_dim=input_dim, hidden_dims=(128, 64), num_classes=2, dropout=dropout)


def count_parameters(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters() if p.requires_grad)
