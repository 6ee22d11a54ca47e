"""Stacked execution of M copies of a layer chain: one batched kernel per layer for all models.

`vmap` over `functional_call` is general but pays functorch's per-operation overhead; for the
common case of a model that is a plain chain of layers (the Kobylianska (2025) MLP, logistic
regression) we run the M stacked copies directly: Linear -> `baddbmm` on (M, B, d),
LayerNorm -> one `layer_norm` and a per-model affine, activations and dropout elementwise.

`as_chain(module)` returns the chain only after checking, on a random probe input, that
running the chain gives exactly what `module(x)` gives (eval mode); otherwise None and the
caller uses vmap. The DP step uses the book-keeping trick on the stacked tensors: one
backward pass gives each layer's output gradient b (M, B, out), the per-example norms come
from (a, b) and the clipped sums are batched matrix products; the clip factors come from the
DP-SGD core (`privlab.core.dpsgd`).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from privlab.core.dpsgd import factors_from_squared_norms
from privlab.learn.engine import LossFn

ELEMENTWISE = (nn.ReLU, nn.GELU, nn.Tanh, nn.Sigmoid, nn.SiLU, nn.LeakyReLU, nn.ELU,
               nn.Identity, nn.Dropout)


@dataclass
class _Layer:
    kind: str                     # "linear", "layernorm", "elementwise"
    module: nn.Module
    weight: str | None = None     # parameter names in the stacked dict
    bias: str | None = None


def _flatten(module: nn.Module) -> list[nn.Module] | None:
    if isinstance(module, nn.Sequential):
        out: list[nn.Module] = []
        for child in module:
            sub = _flatten(child)
            if sub is None:
                return None
            out += sub
        return out
    if isinstance(module, (nn.Linear, nn.LayerNorm, *ELEMENTWISE)):
        return [module]
    children = list(module.children())
    if len(children) == 1:       # a wrapper such as SeedMLP(net=Sequential(...))
        return _flatten(children[0])
    return None


def as_chain(module: nn.Module, sample_shape: tuple[int, ...]) -> list[_Layer] | None:
    """The module as a checked chain of supported layers, or None."""
    if len(sample_shape) != 1:
        return None
    leaves = _flatten(module)
    if not leaves:
        return None
    names = {id(p): n for n, p in module.named_parameters()}
    trainable = {n for n, p in module.named_parameters() if p.requires_grad}
    layers, covered = [], set()
    for leaf in leaves:
        if isinstance(leaf, nn.Linear):
            kind = "linear"
        elif isinstance(leaf, nn.LayerNorm):
            if len(leaf.normalized_shape) != 1:
                return None
            kind = "layernorm"
        else:
            kind = "elementwise"
        w = getattr(leaf, "weight", None) if kind != "elementwise" else None
        b = getattr(leaf, "bias", None) if kind != "elementwise" else None
        if kind == "layernorm" and (w is None) != (b is None):
            return None
        for p in (w, b):
            if p is not None and not p.requires_grad:
                return None      # frozen parameters: leave them to the general path
        layer = _Layer(kind, leaf, names[id(w)] if w is not None else None,
                       names[id(b)] if b is not None else None)
        covered.update(n for n in (layer.weight, layer.bias) if n)
        layers.append(layer)
    if covered != trainable or len(covered) != len({id(p) for p in module.parameters()}):
        return None
    # the chain must BE the model: compare outputs on a probe input
    probe = copy.deepcopy(module).eval()
    x = torch.randn((3, *sample_shape), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        want = probe(x)
        params = {n: p.detach().unsqueeze(0) for n, p in probe.named_parameters()}
        got, _ = run_chain(layers, params, x.unsqueeze(0), training=False)
    if want.shape != got.shape[1:] or not torch.allclose(want, got[0], rtol=1e-5, atol=1e-6):
        return None
    return layers


def run_chain(layers: list[_Layer], params: dict[str, torch.Tensor], x: torch.Tensor,
              training: bool, record: bool = False) -> tuple[torch.Tensor, list]:
    """Forward M stacked models on x (M, B, d). With `record`, keep what the DP step needs:
    per parameterised layer (layer, input a, normalised input or None, raw output)."""
    h = x
    tape = []
    for layer in layers:
        mod = layer.module
        if layer.kind == "linear":
            w = params[layer.weight]                       # (M, out, in)
            if layer.bias is not None:
                out = torch.baddbmm(params[layer.bias].unsqueeze(1), h, w.transpose(1, 2))
            else:
                out = torch.bmm(h, w.transpose(1, 2))
            if record:
                tape.append((layer, h, None, out))
            h = out
        elif layer.kind == "layernorm":
            xhat = F.layer_norm(h, mod.normalized_shape, eps=mod.eps)
            out = xhat
            if layer.weight is not None:
                out = xhat * params[layer.weight].unsqueeze(1) + params[layer.bias].unsqueeze(1)
                if record:
                    tape.append((layer, h, xhat, out))
            h = out
        elif isinstance(mod, nn.Dropout):
            h = F.dropout(h, mod.p, training)
        elif getattr(mod, "inplace", False):
            h = mod(h.clone())   # never overwrite a recorded layer output
        else:
            h = mod(h)
    return h, tape


def chain_mean_grads(layers: list[_Layer], params: dict[str, torch.Tensor], x: torch.Tensor,
                     y: torch.Tensor, loss_fn: LossFn) -> tuple[dict, torch.Tensor]:
    """Gradient of each model's mean loss (non-private step) and the per-example losses."""
    m, b = x.shape[:2]
    with torch.enable_grad():
        logits, _ = run_chain(layers, params, x, training=True)
        losses = loss_fn(logits.flatten(0, 1), y.flatten()).view(m, b)
        names = list(params)
        grads = torch.autograd.grad(losses.mean(1).sum(), [params[n] for n in names])
    return dict(zip(names, grads, strict=True)), losses.detach()


def chain_clipped(layers: list[_Layer], params: dict[str, torch.Tensor], x: torch.Tensor,
                  y: torch.Tensor, mask: torch.Tensor, clip: float,
                  loss_fn: LossFn) -> tuple[dict, torch.Tensor]:
    """Per-example clipped gradient sums of M models at once (padded rows: mask 0)."""
    m, b = x.shape[:2]
    with torch.enable_grad():
        # gradients are taken w.r.t. the layer outputs only, never the parameters
        logits, tape = run_chain(layers, params, x, training=True, record=True)
        losses = loss_fn(logits.flatten(0, 1), y.flatten()).view(m, b)
        outs = [rec[3] for rec in tape]
        backs = torch.autograd.grad((losses * mask).sum(), outs, allow_unused=True)
    sq = torch.zeros(m, b, dtype=torch.float64)
    parts = []
    for (layer, a, xhat, out), g in zip(tape, backs, strict=True):
        g = torch.zeros_like(out) if g is None else g.detach()
        a = a.detach()
        b2 = g.pow(2).sum(-1)
        if layer.kind == "linear":
            part = a.pow(2).sum(-1) * b2 + (b2 if layer.bias is not None else 0.0)
            parts.append((layer, a, g, None))
        else:
            gw = xhat.detach() * g
            part = gw.pow(2).sum(-1) + b2
            parts.append((layer, a, g, gw))
        sq += part.to(torch.float64)
    norms, factors = factors_from_squared_norms(sq, clip)
    factors = factors * mask                                   # (M, B): padded rows get 0
    grads: dict[str, torch.Tensor] = {}
    for layer, a, g, gw in parts:
        scaled = g * factors.unsqueeze(-1)
        if layer.kind == "linear":
            grads[layer.weight] = torch.bmm(scaled.transpose(1, 2), a)
        else:
            grads[layer.weight] = (gw * factors.unsqueeze(-1)).sum(1)
        if layer.bias is not None:
            grads[layer.bias] = scaled.sum(1)
    return grads, norms
