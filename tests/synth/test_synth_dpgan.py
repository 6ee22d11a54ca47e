"""DP-GAN: exact clipping of the discriminator, accounting of every discriminator step against
an independent dp_accounting computation, the generator never reading real rows, sampling,
determinism, bad input, rare-record copies."""

from __future__ import annotations

import pandas as pd
import pytest

torch = pytest.importorskip("torch", reason="needs the ml extra: pip install -e '.[ml]'")

from dp_accounting import GaussianDpEvent, PoissonSampledDpEvent, SelfComposedDpEvent  # noqa: E402
from dp_accounting.pld.pld_privacy_accountant import PLDAccountant  # noqa: E402
from dp_accounting.rdp.rdp_privacy_accountant import RdpAccountant  # noqa: E402

from privlab.core.calibration import zcdp_to_approx_dp  # noqa: E402
from privlab.errors import InvalidInputError  # noqa: E402
from privlab.synth import make_synthesizer  # noqa: E402
from privlab.synth.domain import ADULT_DOMAIN  # noqa: E402
from privlab.synth.dpgan import DPGANSynthesizer, _make_discriminator  # noqa: E402
from privlab.synth.dpsgd import PRE_DELTA_SHARE, clipped_gradient_sum  # noqa: E402
from privlab.synth.evaluate import rare_copies  # noqa: E402

SMALL = {"epochs": 2, "batch_size": 128, "noise_dim": 4, "gen_hidden": 16, "disc_hidden": 8}


def test_discriminator_clipping_matches_opacus_per_sample_gradients() -> None:
    opacus = pytest.importorskip("opacus", reason="needs the ml extra: pip install -e '.[ml]'")
    torch.manual_seed(0)
    d = _make_discriminator(torch, 7, 5)
    x = torch.rand(10, 7)
    target = torch.ones(10)

    def loss(xb, _):
        return torch.nn.functional.binary_cross_entropy_with_logits(
            d(xb, keep=True), target, reduction="none")

    sums, losses, factor = clipped_gradient_sum(torch, d, loss, x, None, 0.05)
    gsm = opacus.GradSampleModule(d, loss_reduction="sum")
    ref = torch.nn.functional.binary_cross_entropy_with_logits(gsm(x), target, reduction="none")
    ref.sum().backward()
    params = list(d.parameters())
    per = torch.cat([p.grad_sample.reshape(10, -1) for p in params], dim=1)
    ref_factor = (0.05 / per.norm(dim=1)).clamp(max=1.0)
    assert bool((ref_factor < 1).all())  # the bound binds: clipping is exercised
    assert torch.allclose(losses, ref.detach(), atol=1e-6)
    assert torch.allclose(factor, ref_factor, rtol=1e-4)
    for p, s in zip(params, sums, strict=True):
        assert torch.allclose(s, torch.einsum("b,b...->...", ref_factor, p.grad_sample),
                              atol=1e-6)
    assert bool(((per * factor[:, None]).norm(dim=1) <= 0.05).all())
    gsm._close()


@pytest.fixture(scope="module")
def small_fit(adult_small):
    frame = adult_small.head(1500)
    calls = {"n": 0}
    s = DPGANSynthesizer(domain="adult", rng=3, **SMALL)
    step = s._discriminator_step

    def counting(*args, **kw):  # every discriminator step, to compare with the accounting
        calls["n"] += 1
        return step(*args, **kw)

    s._discriminator_step = counting
    s.fit(frame, 2.0, 1e-6)
    return s, frame, calls["n"]


def test_guarantee_accounts_every_discriminator_step(small_fit) -> None:
    s, frame, d_steps = small_fit
    g, info, lines = s.guarantee, s.train_info, s.budget_lines()
    assert g.is_dp and g.neighbouring == "add_remove_record" and g.model == "central"
    assert g.epsilon <= 2.0 and g.delta == pytest.approx(1e-6)
    assert info["steps"] == d_steps == round(2 / info["sample_rate"])
    assert [b["step"].split(" ")[0] for b in lines] == ["row", "DP-SGD"]
    # independent of privlab's accountant code: dp_accounting's PLD on the same event
    event = SelfComposedDpEvent(PoissonSampledDpEvent(
        info["sample_rate"], GaussianDpEvent(info["noise_multiplier"])), d_steps)
    delta_sgd = 1e-6 * (1 - PRE_DELTA_SHARE)
    pld = PLDAccountant(value_discretization_interval=1e-4).compose(event)
    sgd_eps = pld.get_epsilon(delta_sgd)
    assert lines[-1]["epsilon"] == pytest.approx(sgd_eps, rel=5e-3)
    assert lines[-1]["delta"] == pytest.approx(delta_sgd)
    # RDP is looser: it must not be below the PLD answer
    assert RdpAccountant().compose(event).get_epsilon(delta_sgd) >= sgd_eps * 0.999
    # total = zCDP row count converted at its delta + DP-SGD (sequential composition)
    pre_eps = zcdp_to_approx_dp(lines[0]["rho"], 1e-6 * PRE_DELTA_SHARE)
    assert pre_eps == pytest.approx(0.02 * 2.0, rel=1e-6)
    assert g.epsilon == pytest.approx(pre_eps + lines[-1]["epsilon"], rel=1e-9)
    # the noise multiplier is the smallest that meets the target: 0.5% less noise misses it
    lower = SelfComposedDpEvent(PoissonSampledDpEvent(
        info["sample_rate"], GaussianDpEvent(info["noise_multiplier"] * 0.995)), d_steps)
    assert PLDAccountant(value_discretization_interval=1e-4).compose(lower).get_epsilon(
        delta_sgd) > 2.0 - pre_eps
    assert any("post-processing" in n for n in g.notes) and any("seeded" in n for n in g.notes)


def test_generator_never_reads_real_rows(adult_small) -> None:
    """Blank the real rows inside the discriminator step: if nothing else reads them, two
    different tables of the same size then give the same generator (same seed)."""
    a, b = adult_small.iloc[:600].reset_index(drop=True), adult_small.iloc[600:1200]
    b = b.reset_index(drop=True)
    opts = dict(domain="adult", epochs=1, batch_size=100, noise_dim=4, gen_hidden=16,
                disc_hidden=8)

    def fit(frame: pd.DataFrame, blank: bool) -> pd.DataFrame:
        s = DPGANSynthesizer(rng=9, **opts)
        if blank:
            step = s._discriminator_step

            def blanked(torch_, opt, real, *rest):
                return step(torch_, opt, None if real is None else torch.zeros_like(real),
                            *rest)

            s._discriminator_step = blanked
        return s.fit(frame, 4.0).sample(300)

    pd.testing.assert_frame_equal(fit(a, True), fit(b, True))
    assert not fit(a, False).equals(fit(b, False))  # the check can fail: real rows matter


def test_samples_the_declared_domain_and_is_deterministic(small_fit, adult_small) -> None:
    s, frame, _ = small_fit
    out = s.sample(400)
    assert list(out.columns) == list(frame.columns) and len(out) == 400
    for name, spec in ADULT_DOMAIN["columns"].items():
        values = out[name].dropna()
        if "categories" in spec:
            assert set(values.astype(str)) <= set(spec["categories"]), name
        else:
            lo, hi = spec["bounds"]
            assert values.between(lo, hi).all(), name
    assert pd.api.types.is_integer_dtype(out["age"].dtype)
    again = DPGANSynthesizer(domain="adult", rng=3, **SMALL).fit(frame, 2.0, 1e-6)
    fresh = DPGANSynthesizer(domain="adult", rng=3, **SMALL).fit(frame, 2.0, 1e-6)
    pd.testing.assert_frame_equal(again.sample(200), fresh.sample(200))
    other = DPGANSynthesizer(domain="adult", rng=4, **SMALL).fit(frame, 2.0, 1e-6)
    assert not other.sample(200).equals(fresh.sample(200))


def test_non_private_baseline_is_labelled(adult_small) -> None:
    s = DPGANSynthesizer(domain="adult", rng=1, **SMALL).fit(adult_small.head(500), None)
    assert not s.guarantee.is_dp and s.budget_lines() == []
    assert any("NOT differentially private" in w for w in s.warnings)


def test_epsilon_too_small_is_refused_with_one_line(adult_small) -> None:
    with pytest.raises(InvalidInputError, match="too small for --method dpgan") as err:
        DPGANSynthesizer(domain="adult", rng=0, **SMALL).fit(adult_small.head(300), 0.05)
    assert "raise --epsilon" in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("option, value", [("gen_lr", 0.0), ("tau", -1.0), ("noise_dim", 0),
                                           ("disc_hidden", 1.5), ("epochs", 0)])
def test_bad_options(option: str, value) -> None:
    with pytest.raises(InvalidInputError, match=option):
        make_synthesizer("dpgan", **{option: value})


def test_dpgan_does_not_copy_rare_records_more_than_the_holdout(adult) -> None:
    frame = adult.drop(columns=["fnlwgt"]).sample(4000, random_state=1).reset_index(drop=True)
    train, holdout = frame.iloc[:3000], frame.iloc[3000:].reset_index(drop=True)
    domain = {"columns": {k: v for k, v in ADULT_DOMAIN["columns"].items() if k != "fnlwgt"}}
    for eps in (1.0, 4.0):
        out = DPGANSynthesizer(domain=domain, rng=11, epochs=2, batch_size=256).fit(
            train, eps).sample(len(holdout))
        r = rare_copies(train, holdout, out)
        assert r["holdout_matches_of_unique"] > 5  # the baseline is not vacuous
        assert not r["copies_exceed_baseline"], r
