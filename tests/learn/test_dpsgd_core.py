"""The DP-SGD core (`privlab.core.dpsgd`): the privacy-critical laws, tested in one place.

- clip factors: every clipped example has L2 norm <= C, including when its computed norm is
  rounded down within the norm margin; unclipped examples keep their gradient;
- every DP-SGD site (learn's two engines, the stacked chain, the stacked fast and vmap
  trainers, the DP-VAE's ghost norms, the language model's per-text clipper) takes its clip
  factors from the core: with the margin set to 0.5 each clips one large example to C / 1.5;
- Poisson batches: Binomial(n, q) sizes and per-row inclusion rates, tolerances from the
  binomial;
- noise: one N(0, 1) float32 draw per coordinate, and the released gradient
  (sum + sigma C z) / denominator, with its standard deviation tested against sigma C / denom.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats

from privlab.core import dpsgd as core
from privlab.core.rng import make_rng
from privlab.learn.engine import GradientClipper, per_sample_cross_entropy
from privlab.learn.models import SeedMLP, SmallCNN

# ----------------------------------------------------------------------------- clip factors


@pytest.mark.parametrize("scale", [1e-8, 1e-3, 1.0, 1e3, 1e8])
def test_clipping_bound_holds_for_every_example_including_the_margin(scale):
    gen = torch.Generator().manual_seed(0)
    clip = 0.7
    g = torch.randn(2000, 50, generator=gen) * scale * torch.rand(2000, 1, generator=gen) * 10
    exact = g.double().norm(dim=1)
    # the norm as a site computes it: float32, and also rounded DOWN by 9e-6 relative (worse
    # than any float32 sum's relative error, ~1e-6; the margin must absorb it)
    computed = g.norm(dim=1)
    for norms in (computed, computed * (1 - 9e-6)):
        factors = core.clip_factors(norms, clip)
        assert factors.dtype == torch.float32
        clipped = (g.double() * factors.double()[:, None]).norm(dim=1)
        assert float(clipped.max()) <= clip          # exact: no tolerance
        assert bool((factors <= 1).all()) and bool((factors > 0).all())
    # the margin (and the 1e-6 floor, small next to a norm >= C) costs at most 2e-5 of the
    # clip, and gradients below the clip are left untouched
    factors = core.clip_factors(computed, clip).double()
    want = (clip / exact).clamp(max=1.0)
    assert bool((factors >= want * (1 - 2e-5)).all())
    small = exact < clip * (1 - 1e-4)
    assert bool((factors[small] == 1.0).all())


def test_zero_gradient_gets_factor_one_not_nan():
    f = core.clip_factors(torch.zeros(3), 1.0)
    assert torch.equal(f, torch.ones(3))


def test_factors_from_squared_norms_and_clipped_sum():
    gen = torch.Generator().manual_seed(1)
    per = torch.randn(7, 3, 4, generator=gen)
    sq = per.double().reshape(7, -1).pow(2).sum(1)
    norms, factors = core.factors_from_squared_norms(sq, 0.5)
    assert norms.dtype == torch.float32 and torch.allclose(norms.double(), sq.sqrt())
    assert torch.equal(factors, core.clip_factors(norms, 0.5))
    total = core.clipped_sum(factors, per)
    assert torch.allclose(total, (per * factors[:, None, None]).sum(0), atol=1e-6)


def _norm(grads) -> float:
    return math.sqrt(sum(float(t.double().pow(2).sum()) for t in grads))


def _learn_site(engine: str):
    torch.manual_seed(0)
    model = SeedMLP(6, (8,), 2, dropout=0.0)
    x, y = torch.randn(1, 6) * 50, torch.tensor([1])
    out = GradientClipper(model, CLIP, engine=engine)(x, y)
    return out.grads, out.norms


def _stacked_site(kind: str):
    from privlab.learn.multi import _StackedTrainer

    torch.manual_seed(0)
    if kind == "chain":
        model, x = SeedMLP(6, (8,), 2, dropout=0.0), torch.randn(1, 6) * 50
        engine = "auto"
    elif kind == "fast":        # not a chain (Conv, GroupNorm): the vmapped fast engine
        model, x = SmallCNN(1, 2, channels=(4, 4, 4, 4), image_size=4), \
            torch.randn(1, 1, 4, 4) * 50
        engine = "fast"
    else:
        model, x = SeedMLP(6, (8,), 2, dropout=0.0), torch.randn(1, 6) * 50
        engine = "vmap"
    trainer = _StackedTrainer([model], per_sample_cross_entropy, CLIP, engine)
    trainer.probe(x)
    assert trainer.engine == {"chain": "stacked", "fast": "fast", "vmap": "vmap"}[kind]
    grads, norms, _, _ = trainer.clipped(x[None], torch.tensor([[1]]), torch.ones(1, 1), None)
    return [g[0] for g in grads.values()], norms.reshape(-1)


def _synth_site():
    from privlab.synth.dpsgd import clipped_gradient_sum
    from privlab.synth.dpvae import _make_vae

    torch.manual_seed(0)
    model = _make_vae(torch, 5, 8, 2)
    x = torch.tensor([[0.0, 1.0, 0.0, 0.0, 1.0]])
    y = torch.tensor([[1, 1]])

    def loss(xb, yb):
        logits, mu, logvar = model(xb, torch.zeros(1, 2), keep=True)
        return 50 * (torch.nn.functional.cross_entropy(logits[:, :3], yb[:, 0], reduction="none")
                     + mu.pow(2).sum(1) + logvar.pow(2).sum(1))

    sums, _, factor = clipped_gradient_sum(torch, model, loss, x, y, CLIP)
    # the factor's norm: the clipped gradient is factor * g
    return sums, torch.tensor([_norm(sums) / float(factor[0])])


def _lm_site():
    pytest.importorskip("transformers", reason="needs the ml extra: pip install -e '.[ml]'")
    from privlab.audit import lm

    tok = lm.train_tokenizer(lm.make_public_corpus(60, seed=1), vocab_size=300)
    model = lm.small_gpt2(tok, lm.LMSpec(16, 1, 2, 64), seed=0)
    ids, labels = lm.encode(tok, ["The cafeteria will serve soup."], 40)
    from privlab.audit.lm.training import _PerTextClipper

    grads, _, factors = _PerTextClipper(model, CLIP)(ids, labels)
    return list(grads.values()), torch.tensor([_norm(grads.values()) / float(factors[0])])


CLIP = 1e-3
SITES = {
    "learn-fast": lambda: _learn_site("fast"),
    "learn-vmap": lambda: _learn_site("vmap"),
    "stacked-chain": lambda: _stacked_site("chain"),
    "stacked-fast": lambda: _stacked_site("fast"),
    "stacked-vmap": lambda: _stacked_site("vmap"),
    "synth-ghost": _synth_site,
    "audit-lm-per-text": _lm_site,
}


@pytest.mark.parametrize("site", list(SITES))
def test_every_site_clips_with_the_core_margin(site, monkeypatch):
    """A margin of 0.5 makes the core's factor C / (1.5 ||g||): a site that computes its own
    factors (its own constant or literal) would clip a large example to C, not C / 1.5."""
    monkeypatch.setattr(core, "NORM_MARGIN", 0.5)
    grads, norms = SITES[site]()
    assert float(norms[0]) > 100 * CLIP, "the example must be clipped"
    assert _norm(grads) == pytest.approx(CLIP / 1.5, rel=1e-3)


# ----------------------------------------------------------------------------- Poisson batches


def test_poisson_batches_have_the_right_law():
    gen = make_rng(11)
    n, q, rounds = 200, 0.1, 2000
    counts = np.zeros(n)
    sizes = []
    for _ in range(rounds):
        idx = core.poisson_batch(gen, n, q)
        assert idx.dtype == np.int64
        assert len(np.unique(idx)) == len(idx) and np.all(np.diff(idx) > 0)
        assert len(idx) == 0 or (idx[0] >= 0 and idx[-1] < n)
        counts[idx] += 1
        sizes.append(len(idx))
    sizes = np.asarray(sizes, dtype=float)
    sd = math.sqrt(n * q * (1 - q))                 # Binomial(n, q) batch size: 4.24
    # the mean of `rounds` sizes has sd sd / sqrt(rounds); the sample sd has sd ~ sd /
    # sqrt(2 (rounds - 1)) (near-normal law); 5 sd each
    assert abs(sizes.mean() - n * q) < 5 * sd / math.sqrt(rounds)
    assert abs(sizes.std(ddof=1) - sd) < 5 * sd / math.sqrt(2 * (rounds - 1))
    # the rows' counts add up to the batch sizes (their mean is rounds / n x the mean size,
    # checked above); each row's inclusion count ~ Binomial(rounds, q): mean rounds q, sd
    # 13.4, every one of the n = 200 counts within 6 sd
    assert counts.sum() == sizes.sum()
    row_sd = math.sqrt(rounds * q * (1 - q))
    assert counts.min() > rounds * q - 6 * row_sd and counts.max() < rounds * q + 6 * row_sd
    # and the counts follow that binomial (chi-square test of the rows' counts, fixed seed)
    chi2 = float(((counts - rounds * q) ** 2).sum() / (rounds * q * (1 - q)))
    assert stats.chi2.sf(chi2, n) > 1e-3


def test_poisson_batch_edges_and_csprng():
    secure = make_rng(None)                         # the default: ChaCha20, not seeded
    assert type(secure.bit_generator).__name__ == "ChaCha"
    assert core.poisson_batch(secure, 50, 1.0).tolist() == list(range(50))
    empty = core.poisson_batch(secure, 50, 0.0)
    assert empty.dtype == np.int64 and empty.size == 0
    # the same seed gives the same batches (the exact-replay tests rely on it)
    a, b = make_rng(3), make_rng(3)
    assert all(np.array_equal(core.poisson_batch(a, 100, 0.3), core.poisson_batch(b, 100, 0.3))
               for _ in range(5))


# ----------------------------------------------------------------------------- noise


def test_flat_noise_is_standard_normal_float32():
    z = core.flat_noise(make_rng(5), 200_000)
    assert z.dtype == np.float32 and z.shape == (200_000,)
    m = z.size
    # mean sd 1/sqrt(m); sample variance sd sqrt(2/m): 5 sd each
    assert abs(float(z.mean())) < 5 / math.sqrt(m)
    assert abs(float(z.astype(np.float64).var()) - 1) < 5 * math.sqrt(2 / m)
    assert stats.kstest(z, "norm").pvalue > 1e-3
    buf = np.empty(1000, dtype=np.float32)
    out = core.flat_noise(make_rng(5), 999, out=buf)    # `out`'s size wins
    assert out is buf and np.array_equal(buf, core.flat_noise(make_rng(5), 1000))


def test_noisy_gradients_are_sum_plus_sigma_c_noise_over_denominator():
    sigma, clip, denom = 1.3, 0.4, 25.0
    params = [torch.nn.Parameter(torch.zeros(300, 200)), torch.nn.Parameter(torch.zeros(7))]
    sums = [torch.full((300, 200), 2.0), torch.arange(7.0)]
    core.set_noisy_grads(params, sums, sigma * clip, denom, make_rng(9))
    z = torch.from_numpy(core.flat_noise(make_rng(9), 300 * 200 + 7))
    # exactly the documented formula, one draw per coordinate in parameter order
    assert torch.equal(params[0].grad, (sums[0] + sigma * clip * z[:60000].view(300, 200))
                       / denom)
    assert torch.equal(params[1].grad, (sums[1] + sigma * clip * z[60000:]) / denom)
    assert params[0].grad.is_contiguous()
    # and its law: N(sum / denom, (sigma C / denom)^2) per coordinate
    noise = (params[0].grad * denom - 2.0).double() / (sigma * clip)
    m = noise.numel()
    assert abs(float(noise.mean())) < 5 / math.sqrt(m)
    assert abs(float(noise.std()) - 1) < 5 / math.sqrt(2 * m)


def test_noisy_gradient_broadcasts_over_stacked_models():
    std, denom = torch.tensor([1.0, 0.0]).view(2, 1), torch.tensor([2.0, 4.0]).view(2, 1)
    summed, z = torch.ones(2, 3), torch.full((2, 3), 3.0)
    assert torch.equal(core.noisy_gradient(summed, z, std, denom),
                       torch.tensor([[2.0] * 3, [0.25] * 3]))
