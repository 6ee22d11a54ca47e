"""Language-model secret extraction: corpus, tokenizer, per-text DP clipping, attack, exposure.

The real experiment (a few minutes) is experiments/audit_lm.py; here every piece is checked
on tiny models in seconds."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="needs the ml extra: pip install -e '.[ml]'")
pytest.importorskip("transformers", reason="needs the ml extra: pip install -e '.[ml]'")

from privlab.audit import lm  # noqa: E402
from privlab.errors import InvalidInputError  # noqa: E402


@pytest.fixture(scope="module")
def tok():
    return lm.train_tokenizer(lm.make_public_corpus(300, seed=1), vocab_size=600)


@pytest.fixture(scope="module")
def corpus():
    return lm.make_secret_corpus()


def test_corpus_matches_the_thesis_setup(corpus):
    assert len(corpus.texts) == 250
    kinds = [s.kind for s in corpus.secrets]
    assert kinds.count("email") == kinds.count("phone") == kinds.count("ssn") == 5
    assert all(v == 10 for v in corpus.occurrences().values())
    for s in corpus.secrets:
        contexts = {t.replace(s.value, "#") for t in corpus.texts if s.value in t}
        assert len(contexts) >= 5  # varied contexts
        assert s.owner in s.prompt and s.value not in s.prompt
    assert all(re.fullmatch(r"\d{3}-\d{2}-\d{4}", s.value) for s in corpus.secrets
               if s.kind == "ssn")
    # deterministic given the seed, different for another seed
    assert lm.make_secret_corpus(seed=0).secrets == corpus.secrets
    assert lm.make_secret_corpus(seed=1).secrets != corpus.secrets
    with pytest.raises(InvalidInputError, match="cannot hold"):
        lm.make_secret_corpus(n_texts=100)


def test_public_corpus_holds_no_private_secret(corpus):
    public = " ".join(lm.make_public_corpus(1500, seed=7919))
    assert not any(s.value in public for s in corpus.secrets)


def test_tokenizer_splits_digits_and_round_trips(tok, corpus):
    text = corpus.texts[0]
    ids = tok(text)["input_ids"]
    assert tok.decode(ids) == text
    pieces = tok.tokenize("SSN 123-45-6789")
    assert [p for p in pieces if p.isdigit()] == list("123456789")


def test_per_text_clipping_matches_a_loop(tok):
    model = lm.small_gpt2(tok, lm.LMSpec(16, 1, 2, 64), seed=0)
    texts = ["HR record: Name=Ava Lewis, SSN: 123-45-6789", "The cafeteria will serve soup.",
             "Contact card | Max Evans | max.evans001@inbox.io"]
    ids, labels = lm.encode(tok, texts, 40)
    clip = 0.05
    grads, losses, factors = lm.training._PerTextClipper(model, clip)(ids, labels)
    want = {k: torch.zeros_like(p) for k, p in model.named_parameters()}
    for i in range(len(texts)):
        model.zero_grad()
        loss = lm.model._per_text_loss(model(ids[i:i + 1], use_cache=False).logits,
                                       labels[i:i + 1])
        loss.sum().backward()
        norm = math.sqrt(sum(float(p.grad.pow(2).sum()) for p in model.parameters()))
        c = min(1.0, clip / norm)
        assert factors[i] == pytest.approx(c, rel=1e-3)
        assert losses[i] == pytest.approx(float(loss.detach()), rel=1e-4)
        for k, p in model.named_parameters():
            want[k] += c * p.grad
    for k in want:
        assert torch.allclose(grads[k], want[k], atol=1e-6, rtol=1e-3), k
    total = math.sqrt(sum(float(g.pow(2).sum()) for g in grads.values()))
    assert total <= len(texts) * clip * (1 + 1e-6)


def test_dp_training_reports_an_accounted_guarantee(tok):
    from privlab.core.accounting import dpsgd_epsilon

    model = lm.small_gpt2(tok, lm.LMSpec(16, 1, 2, 64), seed=0)
    texts = lm.make_public_corpus(40, seed=3)
    cfg = lm.LMTrainConfig(epochs=1, batch_size=8, lr=1e-3, epsilon=8.0, delta=1e-3,
                           max_length=48)
    res = lm.train_lm(model, tok, texts, cfg, rng=0)
    g = res.guarantee
    assert g.is_dp and g.epsilon <= 8.0 * 1.001 and g.delta == 1e-3
    n = len(texts)
    assert res.steps == math.ceil(n / 8) and res.sample_rate == pytest.approx(8 / n)
    # the reported epsilon is what the accountant gives for (sigma, q, steps)
    assert dpsgd_epsilon(res.noise_multiplier, res.sample_rate, res.steps, 1e-3) == \
        pytest.approx(g.epsilon, rel=1e-3)
    assert any("privacy unit: one training text" in n for n in g.notes)
    with pytest.raises(InvalidInputError, match="delta"):
        lm.train_lm(model, tok, texts, lm.LMTrainConfig(epsilon=1.0, delta=0.5), rng=0)


class _Parrot(torch.nn.Module):
    """A 'language model' that always continues with a fixed token sequence, then EOS."""

    def __init__(self, tok, continuation: str, prompt: str) -> None:
        super().__init__()
        self.config = type("C", (), {"n_positions": 128})()
        self.start = len(tok(prompt)["input_ids"])
        self.seq = tok(prompt + continuation)["input_ids"][self.start:] + [tok.eos_token_id]
        self.vocab = len(tok)

    def forward(self, ids, use_cache=False):
        pos = ids.shape[1] - self.start
        logits = torch.full((ids.shape[0], ids.shape[1], self.vocab), -30.0)
        nxt = self.seq[min(pos, len(self.seq) - 1)]
        logits[:, -1, nxt] = 30.0
        return type("O", (), {"logits": logits})()


def test_extraction_counts_exact_matches_and_exposure_ranks(tok, corpus):
    secret = corpus.secrets[2]  # an SSN
    parrot = _Parrot(tok, " " + secret.value, secret.prompt)
    res = lm.extraction_attack(parrot, tok, [secret], samples_per_prompt=3, seed=0)
    assert res.to_dict()["extracted"] == 1 and res.hits[secret.value] == 3
    other = corpus.secrets[5]
    miss = lm.extraction_attack(_Parrot(tok, " 000-00-0000", other.prompt), tok, [other],
                                samples_per_prompt=2)
    assert miss.to_dict()["extracted"] == 0
    e = lm.exposure(parrot, tok, secret, n_candidates=30, seed=0)
    assert e["rank"] == 1 and e["exposure_rank"] == pytest.approx(math.log2(31))
    assert e["max_exposure"] == pytest.approx(math.log2(1e9))


def test_exposure_of_an_untrained_model_is_near_chance(tok, corpus):
    model = lm.small_gpt2(tok, lm.LMSpec(16, 1, 2, 64), seed=1)
    exps = [lm.exposure(model, tok, s, n_candidates=63, seed=i)["exposure_rank"]
            for i, s in enumerate(corpus.secrets[:6])]
    # a random model ranks the secret uniformly: E[exposure] = log2(64) - E[log2 U{1..64}] ~ 1.4
    assert np.mean(exps) < 4.0


def test_sequence_log_perplexity_is_additive(tok):
    model = lm.small_gpt2(tok, lm.LMSpec(16, 1, 2, 64), seed=2)
    a = lm.sequence_log_perplexity(model, tok, "Employee contact: Ava Lewis, email:",
                                   [" ava.lewis123@inbox.io"])[0]
    ids = tok("Employee contact: Ava Lewis, email: ava.lewis123@inbox.io")["input_ids"]
    n_pre = len(tok("Employee contact: Ava Lewis, email:")["input_ids"])
    with torch.no_grad():
        logp = torch.log_softmax(model(torch.tensor([ids]), use_cache=False).logits.double(), -1)
    want = -sum(float(logp[0, i - 1, ids[i]]) for i in range(n_pre, len(ids))) / math.log(2)
    assert a == pytest.approx(want, rel=1e-9)


def test_secrets_extracted_without_dp_and_none_with_accounted_dp():
    """The end-to-end audit on a small model (32 dims, 1 layer, 300 public texts): the same
    pretraining, corpus and number of fine-tuning epochs (20), plain vs DP-SGD at an accounted
    eps = 8 per text (Kobylianska's setting). Measured at seed 0: 7 / 15 secrets extracted
    without DP (seeds 1, 2: 12, 8), 0 / 15 with DP; mean exposure 4.39 (every secret ranked
    1st of 21) vs 2.64. The full-size run is experiments/audit_lm.py (docs/audit.md)."""
    import warnings

    cfg = lm.LMAuditConfig(public_texts=300, pretrain_epochs=2, spec=lm.LMSpec(32, 1, 2, 64),
                           train=lm.LMTrainConfig(epochs=20, batch_size=16, lr=5e-3,
                                                  max_length=40),
                           dp_epochs=20, dp_batch_size=64, dp_lr=5e-3, samples_per_prompt=5,
                           n_candidates=20, seed=0)
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matrices: one thread is faster and reproducible
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the "not private" warning of the plain run
            plain = lm.run_lm_audit(None, cfg, rng=0)
            dp = lm.run_lm_audit(8.0, cfg, rng=0)
    finally:
        torch.set_num_threads(before)
    assert plain["guarantee"]["is_dp"] is False
    g = dp["guarantee"]
    assert g["is_dp"] and g["epsilon"] <= 8.0 * 1.001 and g["delta"] == cfg.train.delta
    assert plain["extraction"]["of"] == dp["extraction"]["of"] == 15
    assert plain["extraction"]["extracted"] >= 1, plain["extraction"]["hits_per_secret"]
    assert dp["extraction"]["extracted"] == 0, dp["extraction"]["hits_per_secret"]
    assert len(plain["exposure"]) == len(dp["exposure"]) == 15
    assert plain["mean_exposure"] > dp["mean_exposure"]
