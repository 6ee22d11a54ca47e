"""DP-SGD bookkeeping: calibration, the exact noisy update, bad input (the Poisson sampling,
clip factor and noise laws are tested with the DP-SGD core, tests/learn/test_dpsgd_core.py)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch

from privlab.core import accounting
from privlab.core.dpsgd import flat_noise, poisson_batch
from privlab.core.rng import make_rng
from privlab.errors import InvalidInputError
from privlab.learn.dpsgd import (
    TrainConfig,
    accuracy,
    plan_dpsgd,
    train_classifier,
)
from privlab.learn.engine import GradientClipper
from privlab.learn.models import LogisticModel, SeedMLP


def test_calibrated_sigma_reproduces_target_epsilon():
    cfg = TrainConfig(epsilon=2.0, delta=1e-5, batch_size=32, epochs=3, public_size=300)
    plan = plan_dpsgd(300, cfg)
    assert plan.sample_rate == pytest.approx(32 / 300)
    assert plan.steps == 3 * math.ceil(300 / 32)
    eps = accounting.dpsgd_epsilon(plan.noise_multiplier, plan.sample_rate, plan.steps, 1e-5)
    assert 2.0 * 0.99 <= eps <= 2.0
    assert plan.epsilon_pld == pytest.approx(eps)
    # the smallest such sigma: 1% less noise already overshoots the target
    less = accounting.dpsgd_epsilon(plan.noise_multiplier * 0.99, plan.sample_rate, plan.steps,
                                    1e-5)
    assert less > 2.0
    assert plan.epsilon_rdp > plan.epsilon_pld       # RDP is the looser bound


def test_one_step_is_exactly_clipped_sum_plus_calibrated_noise(blobs):
    x, y = blobs
    x, y = x[:40], y[:40]
    torch.manual_seed(0)
    model = LogisticModel(6, 2)
    before = [p.detach().clone() for p in model.parameters()]
    sigma, clip, lr = 0.8, 0.5, 0.1
    cfg = TrainConfig(noise_multiplier=sigma, delta=1e-3, clip=clip, epochs=1, batch_size=40,
                      lr=lr, optimizer="sgd", public_size=40)
    res = train_classifier(model, x, y, cfg, rng=5)
    assert res.plan.steps == 1 and res.plan.sample_rate == 1.0
    # replay: same generator, same draws (Poisson batch, then noise)
    gen = make_rng(5)
    idx = poisson_batch(gen, 40, 1.0)
    ref = LogisticModel(6, 2)
    with torch.no_grad():
        for p, b in zip(ref.parameters(), before, strict=True):
            p.copy_(b)
    out = GradientClipper(ref, clip)(torch.from_numpy(x[idx]), torch.from_numpy(y[idx]))
    noise = torch.from_numpy(flat_noise(gen, sum(p.numel() for p in ref.parameters())))
    offset = 0
    for p, b, g in zip(model.parameters(), before, out.grads, strict=True):
        z = noise[offset:offset + p.numel()].view_as(p)
        offset += p.numel()
        expected = b - lr * (g + sigma * clip * z) / 40.0
        assert torch.allclose(p.detach(), expected, atol=1e-6)


def test_dp_training_learns_and_states_its_guarantee(blobs):
    x, y = blobs
    torch.manual_seed(0)
    model = SeedMLP(6, (16,), 2, dropout=0.0)
    # the test's own synthetic rows: their count is public here
    cfg = TrainConfig(epsilon=4.0, delta=1e-4, batch_size=50, epochs=4, lr=1e-2,
                      public_size=len(x))
    res = train_classifier(model, x, y, cfg, rng=3)
    assert accuracy(model, x, y) > 0.8
    g = res.guarantee
    assert g.is_dp and g.epsilon <= 4.0 and g.delta == 1e-4
    assert g.neighbouring == "add_remove_record"
    assert "PLD" in g.accountant
    text = " ".join(g.notes)
    for needle in ("clipping norm C = 1", f"{res.plan.steps} steps", "Poisson", "RDP",
                   "seeded"):
        assert needle in text
    assert res.engine == "fast"


def test_plain_mode_is_labelled_not_private(blobs):
    x, y = blobs
    res = train_classifier(SeedMLP(6, (8,), 2), x, y,
                           TrainConfig(method="none", epochs=1, batch_size=64), rng=0)
    assert not res.guarantee.is_dp and res.plan is None


def test_epsilon_too_small_is_refused_before_any_training(blobs):
    x, y = blobs
    model = SeedMLP(6, (8,), 2)
    forwards: list[int] = []
    model.register_forward_hook(lambda *_: forwards.append(1))
    with pytest.raises(InvalidInputError, match="too small for useful training"):
        train_classifier(model, x, y, TrainConfig(epsilon=1e-4, batch_size=16, epochs=5,
                                                       public_size=len(x)), rng=0)
    assert forwards == []  # refused from the accounting alone, no batch was run


@pytest.mark.parametrize("kwargs,match", [
    (dict(batch_size=301), "larger than the training set"),
    (dict(delta=0.01), "not below 1/public_size"),
    (dict(delta=0.0), "delta must be > 0"),
    (dict(epochs=0), "epochs"),
    (dict(clip=-1.0), "clip"),
    (dict(epsilon=None), "exactly one of"),
])
def test_bad_configuration(blobs, kwargs, match):
    x, y = blobs
    cfg = TrainConfig(**{**dict(epsilon=1.0, batch_size=32, epochs=1, public_size=len(x)),
                         **kwargs})
    with pytest.raises(InvalidInputError, match=match):
        train_classifier(SeedMLP(6, (8,), 2), x, y, cfg, rng=0)


def test_public_sample_rate_plan_does_not_read_n():
    """With a public q the plan (sigma, steps, normaliser) is the same for any n."""
    cfg = TrainConfig(epsilon=2.0, delta=1e-5, epochs=3, batch_size=50, sample_rate=0.05)
    plans = [plan_dpsgd(n, cfg) for n in (900, 1000, 1001, 5000)]
    assert {(p.noise_multiplier, p.sample_rate, p.steps, p.expected_batch_size)
            for p in plans} == {(plans[0].noise_multiplier, 0.05, 3 * 20, 50.0)}
    # a public size: q = batch / public_size whatever the rows passed
    sized = TrainConfig(epsilon=2.0, epochs=3, batch_size=50, public_size=1000)
    keep = [replace(plan_dpsgd(n, sized), calibration_seconds=0.0) for n in (1000, 1001)]
    assert keep[0] == keep[1]
    assert plan_dpsgd(1001, sized).sample_rate == 0.05
    with pytest.raises(InvalidInputError, match="sample_rate must be in"):
        TrainConfig(epsilon=1.0, sample_rate=1.5).validate(100)
    # delta is checked against the public size batch / q, not n
    with pytest.raises(InvalidInputError, match="batch size / sample rate"):
        TrainConfig(epsilon=1.0, delta=0.01, batch_size=50, sample_rate=0.05).validate(10**6)


def test_private_config_without_a_public_rate_is_refused(blobs):
    """Regression (issue 21): without sample_rate the trainers set q = batch / len(x), the exact
    n of the rows passed (n=1000 vs 1001 gave different rates under one guarantee). Now a
    private TrainConfig needs sample_rate or public_size; refused before any training."""
    x, y = blobs
    cfg = TrainConfig(epsilon=2.0, delta=1e-5, epochs=1, batch_size=32)
    for call in (lambda: plan_dpsgd(1000, cfg),
                 lambda: train_classifier(SeedMLP(6, (8,), 2), x, y, cfg, rng=0)):
        with pytest.raises(InvalidInputError, match="pass sample_rate=q or public_size=N"):
            call()
    with pytest.raises(InvalidInputError, match="not both"):
        TrainConfig(epsilon=1.0, sample_rate=0.1, public_size=10).validate(10)
    with pytest.raises(InvalidInputError, match="public_size must be a whole number"):
        TrainConfig(epsilon=1.0, public_size=0).validate(10)
    # a plain (non-private) run needs no rate
    TrainConfig(method="none", batch_size=32).validate(len(x))


def test_rate_note_says_where_the_size_came_from() -> None:
    """Regression: a size taken from the exact rows (risk pipeline, audit without --members)
    was described as 'a public count the caller passed' and printed."""
    from privlab.learn.dpsgd import rate_note

    public = TrainConfig(epsilon=2.0, delta=1e-5, batch_size=32, public_size=300)
    assert rate_note(public) == ("sample rate = batch_size / public_size 300 (a public count "
                                 "the caller passed, never the rows' count)",)
    rows = TrainConfig(epsilon=2.0, delta=1e-5, batch_size=32, public_size=317,
                       public_size_source="rows")
    (note,) = rate_note(rows)
    assert "317" not in note and "public_size" not in note and "not_covered" in note
    with pytest.raises(InvalidInputError, match="public_size_source"):
        TrainConfig(epsilon=2.0, delta=1e-5, public_size=300,
                    public_size_source="guess").validate(300)


def test_sized_by_sets_the_callers_own_count_only_without_a_public_rate() -> None:
    cfg = TrainConfig(epsilon=2.0, delta=1e-5, batch_size=32)
    assert cfg.sized_by(400).public_size == 400
    given = replace(cfg, public_size=300)
    assert given.sized_by(400) is given and given.sized_by(400, override=True).public_size == 400
    rate = replace(cfg, sample_rate=0.1)
    assert rate.sized_by(400, override=True) is rate
    plain = TrainConfig(method="none")
    assert plain.sized_by(400) is plain
