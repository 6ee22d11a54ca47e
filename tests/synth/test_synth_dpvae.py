"""DP-VAE: exact per-example clipping (checked against Opacus), accounting, sampling, bad
input (epsilon too small, a one-value column, missing values), rare-record copies."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

torch = pytest.importorskip("torch", reason="needs the ml extra: pip install -e '.[ml]'")
opacus = pytest.importorskip("opacus", reason="needs the ml extra: pip install -e '.[ml]'")

from synth_schemas import adult_any_missing, types_schema  # noqa: E402

from privlab.core.accounting import dpsgd_epsilon  # noqa: E402
from privlab.errors import InvalidInputError  # noqa: E402
from privlab.synth.domain import OTHER  # noqa: E402
from privlab.synth.dpvae import DPVAESynthesizer, _make_vae, clipped_gradient_sum  # noqa: E402
from privlab.synth.evaluate import rare_copies  # noqa: E402


def _loss_fn(model, latent: int, slices, gen):
    f = torch.nn.functional

    def loss(x, y, keep=True):
        eps = torch.randn((x.shape[0], latent), generator=gen)
        logits, mu, logvar = model(x, eps, keep=keep)
        out = 0.5 * (mu.pow(2) + logvar.exp() - 1 - logvar).sum(dim=1)
        for j, (s, k) in enumerate(slices):
            out = out + f.cross_entropy(logits[:, s:s + k], y[:, j], reduction="none")
        return out

    return loss


def test_ghost_clipping_matches_opacus_per_sample_gradients() -> None:
    torch.manual_seed(0)
    dim, latent, b = 9, 3, 12
    slices = [(0, 4), (4, 5)]
    model = _make_vae(torch, dim, 16, latent)
    y = torch.stack([torch.randint(0, 4, (b,)), torch.randint(0, 5, (b,))], dim=1)
    x = torch.zeros(b, dim)
    x[torch.arange(b), y[:, 0]] = 1
    x[torch.arange(b), 4 + y[:, 1]] = 1
    clip = 0.5
    sums, losses, factor = clipped_gradient_sum(
        torch, model, _loss_fn(model, latent, slices, torch.Generator().manual_seed(3)),
        x, y, clip)
    # reference: Opacus per-sample gradients with the same reparameterisation noise
    from opacus import GradSampleModule

    gsm = GradSampleModule(model, loss_reduction="sum")
    ref_losses = _loss_fn(gsm, latent, slices, torch.Generator().manual_seed(3))(x, y)
    ref_losses.sum().backward()
    params = list(model.parameters())
    per = torch.cat([p.grad_sample.reshape(b, -1) for p in params], dim=1)
    norms = per.norm(dim=1)
    ref_factor = (clip / norms).clamp(max=1.0)
    assert torch.allclose(losses, ref_losses.detach(), atol=1e-5)
    assert torch.allclose(factor, ref_factor, rtol=1e-4)
    for p, s in zip(params, sums, strict=True):
        ref = torch.einsum("b,b...->...", ref_factor, p.grad_sample)
        assert torch.allclose(s, ref, atol=1e-5)
    clipped_norms = (per * factor[:, None]).norm(dim=1)
    assert bool((clipped_norms <= clip).all())
    gsm._close()


@pytest.fixture(scope="module")
def small_fit(adult_small):
    frame = adult_small.head(1500)
    s = DPVAESynthesizer(schema=adult_any_missing(), epochs=2, batch_size=128, hidden=32, latent=4,
                         rng=4).fit(frame, 2.0, 1e-6)
    return s, frame


def test_dpvae_guarantee_composes_preprocessing_and_dpsgd(small_fit) -> None:
    s, frame = small_fit
    g = s.guarantee
    assert g.is_dp and g.epsilon <= 2.0 and g.epsilon > 1.98
    assert g.delta == pytest.approx(1e-6)
    info = s.train_info
    lines = s.budget_lines()
    assert lines[0]["step"].startswith("row count") and lines[-1]["step"] == "DP-SGD training"
    # the DP-SGD part is what the accountant says for the run that actually happened
    sgd_eps = dpsgd_epsilon(info["noise_multiplier"], info["sample_rate"], info["steps"],
                            lines[-1]["delta"])
    assert lines[-1]["epsilon"] == pytest.approx(sgd_eps, rel=1e-6)
    assert info["steps"] == round(2 / info["sample_rate"])
    # q = batch / (noisy row count): within 5 sigma of the true count
    sigma_count = math.sqrt(1 / (2 * lines[0]["rho"]))
    assert abs(128 / info["sample_rate"] - len(frame)) < 5 * sigma_count
    assert math.isfinite(info["noise_multiplier"]) and info["noise_multiplier"] > 0.5


def test_dpvae_samples_the_declared_domain(small_fit) -> None:
    s, frame = small_fit
    out = s.sample(500)
    assert list(out.columns) == list(frame.columns) and len(out) == 500
    assert set(out["sex"].dropna()) <= {"Female", "Male"}
    assert out["age"].dropna().between(17, 90).all()
    assert pd.api.types.is_integer_dtype(out["age"].dtype)


def test_dpvae_estimates_the_domain_when_not_declared(adult_small) -> None:
    frame = adult_small[["age", "sex", "race", "salary"]].head(1200)
    types = types_schema({k: v for k, v in TYPES.items() if k in frame})
    s = DPVAESynthesizer(schema=types, estimate_domain="all", epochs=1, batch_size=200,
                         hidden=16, latent=2, rng=5).fit(frame, 4.0, 1e-6)
    steps = [b["step"].split(" ")[0] for b in s.budget_lines()]
    assert steps[:2] == ["numeric", "categories"] and "row" in steps
    assert s.guarantee.epsilon <= 4.0
    assert np.isfinite(s.sample(50)["age"].astype(float)).any()


def test_dpvae_epsilon_too_small_is_refused_with_one_line(adult_small) -> None:
    # 300 rows at epsilon 0.05: the row count's noise std (~5,700) dwarfs the count
    with pytest.raises(InvalidInputError, match="too small for --method dpvae") as err:
        DPVAESynthesizer(schema=adult_any_missing(), epochs=1, hidden=8, latent=2, rng=0).fit(
            adult_small.head(300), 0.05)
    assert "noisy row count" in str(err.value) and "\n" not in str(err.value)


#: Column types only (categories and bounds estimated under DP).
TYPES = {"age": "integer", **dict.fromkeys(("sex", "race", "salary", "country"), "categorical")}


def _with_gaps(adult_small: pd.DataFrame) -> pd.DataFrame:
    """Four Adult columns, a constant column, 20% missing race and 10% missing age."""
    frame = adult_small[["age", "sex", "race", "salary"]].copy()
    frame["country"] = "US"
    gen = np.random.default_rng(0)
    frame.loc[gen.random(len(frame)) < 0.2, "race"] = None
    frame["age"] = frame["age"].astype("Int64")
    frame.loc[gen.random(len(frame)) < 0.1, "age"] = pd.NA
    return frame


@pytest.fixture(scope="module")
def gaps_fit(adult_small):
    frame = _with_gaps(adult_small)
    s = DPVAESynthesizer(schema=types_schema(TYPES), estimate_domain="all",
                         epochs=20, batch_size=128, hidden=16, latent=2,
                         rng=1).fit(frame, 4.0)
    return s, frame, s.sample(4000)


def test_dpvae_one_value_column_warns_and_is_nearly_constant(gaps_fit) -> None:
    s, _, out = gaps_fit
    assert any("'country': a single category ('US')" in w for w in s.warnings)
    # the estimated domain keeps <other> and missing codes next to 'US'; the model learns
    # to leave them (nearly) empty: 98% 'US' measured; 4,000 draws have a sampling sd of
    # 0.002, so 0.9 leaves room for model error only
    assert (out["country"] == "US").mean() > 0.9
    assert set(out["country"].dropna()) <= {"US", OTHER}


def test_dpvae_declared_constant_column_is_constant(adult_small) -> None:
    frame = adult_small[["sex", "salary"]].head(1500).assign(country="US")
    domain = {"columns": {"sex": {"type": "categorical", "categories": ["Female", "Male"]},
                          "salary": {"type": "categorical", "categories": ["<=50K", ">50K"]},
                          "country": {"type": "categorical", "categories": ["US"],
                                      "missing": False}}}
    s = DPVAESynthesizer(schema=domain, epochs=1, hidden=8, latent=2, rng=2).fit(frame, 2.0)
    assert (s.sample(500)["country"] == "US").all()  # one code: nothing else can be drawn


def test_dpvae_synthesizes_missing_values_at_their_rate(gaps_fit) -> None:
    _, frame, out = gaps_fit
    # real rates 0.2 (race) and 0.1 (age); measured 0.18 and 0.10; the sampling sd of 4,000
    # draws is <= 0.007, the rest of the 0.05 margin is model error under DP noise
    for col in ("race", "age"):
        real = frame[col].isna().mean()
        assert abs(out[col].isna().mean() - real) < 0.05, col


def test_dpvae_missing_drop_fits_complete_rows_only(adult_small) -> None:
    frame = _with_gaps(adult_small).head(2000)
    s = DPVAESynthesizer(schema=types_schema(TYPES), estimate_domain="all",
                         epochs=1, batch_size=128, hidden=8, latent=2,
                         missing="drop", rng=3).fit(frame, 4.0)
    assert all(spec.missing_code is None for spec in s.domain.columns)
    assert not s.sample(1000).isna().any().any()


def test_dpvae_does_not_copy_rare_records_more_than_the_holdout(adult) -> None:
    frame = adult.drop(columns=["fnlwgt"]).sample(4000, random_state=1).reset_index(drop=True)
    train, holdout = frame.iloc[:3000], frame.iloc[3000:].reset_index(drop=True)
    domain = adult_any_missing(drop=("fnlwgt",))
    for eps in (1.0, 4.0):
        out = DPVAESynthesizer(schema=domain, epochs=5, batch_size=256, hidden=64, latent=8,
                               rng=11).fit(train, eps).sample(len(holdout))
        r = rare_copies(train, holdout, out)
        assert r["holdout_matches_of_unique"] > 5  # the baseline is not vacuous
        assert not r["copies_exceed_baseline"], r
