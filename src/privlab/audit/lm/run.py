"""`run_lm_audit`: the whole LM audit end to end (corpora, tokenizer, public pre-training,
plain or DP fine-tuning, extraction and exposure), what `privlab audit lm` runs."""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from privlab.audit.lm.corpus import (
    make_public_corpus,
    make_secret_corpus,
)
from privlab.audit.lm.extraction import (
    exposure,
    extraction_attack,
)
from privlab.audit.lm.model import (
    LMSpec,
    small_gpt2,
    train_tokenizer,
)
from privlab.audit.lm.training import (
    LMTrainConfig,
    Progress,
    train_lm,
)
from privlab.core.rng import RngLike


@dataclass
class LMAuditConfig:
    """Everything `privlab audit lm` runs; `quick()` is the seconds-long test variant."""

    n_texts: int = 250
    repeats: int = 10
    corpus_seed: int = 0
    public_texts: int = 1500
    pretrain_epochs: int = 4
    spec: LMSpec = field(default_factory=LMSpec)
    train: LMTrainConfig = field(default_factory=LMTrainConfig)
    dp_epochs: int = 30
    dp_batch_size: int = 64
    dp_lr: float = 3e-3
    samples_per_prompt: int = 10
    n_candidates: int = 1000
    vocab_size: int = 1000
    seed: int = 0

    @classmethod
    def quick(cls) -> LMAuditConfig:
        """Seconds-long smoke run (tiny model, one epoch): checks the plumbing, not privacy."""
        return cls(public_texts=100, pretrain_epochs=1, spec=LMSpec(16, 1, 2, 64),
                   train=LMTrainConfig(epochs=1, batch_size=64, max_length=64), dp_epochs=1,
                   dp_batch_size=64, samples_per_prompt=1, n_candidates=20)


def run_lm_audit(epsilon: float | None, config: LMAuditConfig | None = None, *,
                 rng: RngLike = None, progress: Progress | None = None) -> dict[str, Any]:
    """Public pretraining, private fine-tuning (plain or DP at `epsilon`), extraction attack,
    exposure of every secret. Returns a JSON-ready dict."""
    import torch

    cfg = config or LMAuditConfig()
    corpus = make_secret_corpus(cfg.n_texts, cfg.repeats, cfg.corpus_seed)
    public = make_public_corpus(cfg.public_texts, seed=cfg.corpus_seed + 7919)
    started = time.perf_counter()
    threads = torch.get_num_threads()
    tokenizer = train_tokenizer(public, cfg.vocab_size)
    model = small_gpt2(tokenizer, cfg.spec, seed=cfg.seed)
    pre = LMTrainConfig(epochs=cfg.pretrain_epochs, batch_size=32, lr=2e-3,
                        max_length=cfg.train.max_length)
    train_lm(model, tokenizer, public, pre, rng=cfg.seed + 1)
    if epsilon is None:
        tcfg = cfg.train
    else:
        tcfg = LMTrainConfig(epochs=cfg.dp_epochs, batch_size=cfg.dp_batch_size, lr=cfg.dp_lr,
                             epsilon=epsilon, delta=cfg.train.delta, clip=cfg.train.clip,
                             max_length=cfg.train.max_length)
    res = train_lm(model, tokenizer, corpus.texts, tcfg, rng=rng, progress=progress)
    attack = extraction_attack(model, tokenizer, corpus.secrets,
                               samples_per_prompt=cfg.samples_per_prompt, seed=cfg.seed)
    exps = [exposure(model, tokenizer, s, n_candidates=cfg.n_candidates, seed=cfg.seed + i)
            for i, s in enumerate(corpus.secrets)]
    g = res.guarantee
    occ = corpus.occurrences()
    r = max(occ.values())
    secret_level = None
    if g.is_dp:
        secret_level = {"repeats": r, "epsilon": r * g.epsilon,
                        "delta": min(1.0, r * math.exp((r - 1) * g.epsilon) * g.delta),
                        "note": "group privacy over the r texts holding one secret"}
    return {
        "guarantee": g.to_dict(),
        "secret_level_guarantee": secret_level,
        "training": {k: v for k, v in res.to_dict().items() if k != "guarantee"},
        "config": {"n_texts": cfg.n_texts, "repeats": cfg.repeats, "public_texts":
                   cfg.public_texts, "pretrain_epochs": cfg.pretrain_epochs,
                   "model": asdict(cfg.spec), "train": asdict(tcfg),
                   "parameters": int(sum(p.numel() for p in model.parameters())),
                   "vocab_size": len(tokenizer), "torch_threads": threads},
        "extraction": attack.to_dict(),
        "exposure": exps,
        "mean_exposure": float(np.mean([e["exposure_rank"] for e in exps])),
        "seconds": time.perf_counter() - started,
    }
