"""The attacks on the fine-tuned model: sampling completions of secret prompts and searching
them for exact secrets, and exposure (Carlini et al. 2019): the secret's rank among random
candidates of its format, with the skew-normal extrapolation."""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from privlab.audit.lm.corpus import (
    SPACE,
    Secret,
    random_value,
)
from privlab.errors import InvalidInputError


def sample_completions(model: Any, tokenizer: Any, prompt: str, n: int,
                       max_new_tokens: int = 24, temperature: float = 0.7,
                       seed: int = 0) -> list[str]:
    """n sampled continuations of `prompt` (temperature sampling, as in Kobylianska (2025))."""
    import torch

    if not temperature > 0:
        raise InvalidInputError(f"temperature must be > 0, got {temperature!r}")
    g = torch.Generator().manual_seed(int(seed))
    start = tokenizer(prompt)["input_ids"]
    limit = model.config.n_positions
    ids = torch.tensor([start] * n, dtype=torch.long)
    done = torch.zeros(n, dtype=torch.bool)
    model.eval()
    with torch.no_grad():
        for _ in range(max_new_tokens):
            if ids.shape[1] >= limit:
                break
            logits = model(ids, use_cache=False).logits[:, -1].double() / temperature
            logits[:, tokenizer.pad_token_id] = -math.inf
            nxt = torch.multinomial(torch.softmax(logits, -1), 1, generator=g).squeeze(1)
            nxt = torch.where(done, torch.full_like(nxt, tokenizer.eos_token_id), nxt)
            done |= nxt == tokenizer.eos_token_id
            ids = torch.cat([ids, nxt[:, None]], 1)
            if bool(done.all()):
                break
    outs = []
    for row in ids.tolist():
        cut = row[len(start):]
        if tokenizer.eos_token_id in cut:
            cut = cut[:cut.index(tokenizer.eos_token_id)]
        outs.append(prompt + tokenizer.decode(cut))
    return outs


@dataclass
class ExtractionResult:
    extracted: list[Secret]
    n_secrets: int
    samples_per_prompt: int
    prompts: int
    hits: dict[str, int]
    examples: list[dict[str, str]]

    def to_dict(self) -> dict[str, Any]:
        return {"extracted": len(self.extracted), "of": self.n_secrets,
                "extracted_secrets": [s.to_dict() for s in self.extracted],
                "samples_per_prompt": self.samples_per_prompt, "prompts": self.prompts,
                "hits_per_secret": self.hits, "examples": self.examples}


def extraction_attack(model: Any, tokenizer: Any, secrets: Sequence[Secret], *,
                      samples_per_prompt: int = 10, max_new_tokens: int = 24,
                      temperature: float = 0.7, extra_prompts: Sequence[str] = (),
                      seed: int = 0) -> ExtractionResult:
    """Sample completions of every secret's prompt (and extra prompts); a secret counts as
    extracted when its exact string appears in any completion of any prompt."""
    if not (isinstance(samples_per_prompt, int) and samples_per_prompt >= 1):
        raise InvalidInputError(f"samples_per_prompt must be >= 1, got {samples_per_prompt!r}")
    prompts = list(dict.fromkeys([s.prompt for s in secrets] + list(extra_prompts)))
    hits = {s.value: 0 for s in secrets}
    examples = []
    for i, prompt in enumerate(prompts):
        outs = sample_completions(model, tokenizer, prompt, samples_per_prompt,
                                  max_new_tokens, temperature, seed=seed + i)
        examples.append({"prompt": prompt, "completion": outs[0]})
        for text in outs:
            tail = text[len(prompt):]
            for s in secrets:
                if s.value in tail:
                    hits[s.value] += 1
    extracted = [s for s in secrets if hits[s.value] > 0]
    return ExtractionResult(extracted, len(secrets), samples_per_prompt, len(prompts), hits,
                            examples)


def sequence_log_perplexity(model: Any, tokenizer: Any, prefix: str,
                            continuations: Sequence[str], batch: int = 512) -> np.ndarray:
    """-log2 P(continuation | prefix) for each continuation (bits), batched."""
    import torch

    pre = tokenizer(prefix)["input_ids"]
    rows = [tokenizer(prefix + c)["input_ids"] for c in continuations]
    for r in rows:
        if r[:len(pre)] != pre:
            raise InvalidInputError("the prefix tokenises differently inside the text; end the "
                                    "prompt before a space")
    out = np.empty(len(rows))
    model.eval()
    with torch.no_grad():
        for s in range(0, len(rows), batch):
            chunk = rows[s:s + batch]
            width = max(len(r) for r in chunk)
            ids = torch.full((len(chunk), width), tokenizer.pad_token_id, dtype=torch.long)
            for i, r in enumerate(chunk):
                ids[i, :len(r)] = torch.tensor(r)
            logp = torch.log_softmax(model(ids, use_cache=False).logits.double(), -1)
            for i, r in enumerate(chunk):
                tgt = torch.tensor(r[len(pre):])
                pos = torch.arange(len(pre) - 1, len(r) - 1)
                out[s + i] = -float(logp[i, pos, tgt].sum()) / math.log(2)
    return out


def candidates(secret: Secret, n: int, gen: np.random.Generator) -> list[str]:
    """n distinct random values of the secret's format (never the secret itself)."""
    first, last = secret.owner.split(" ", 1)
    if n >= SPACE[secret.kind]:
        raise InvalidInputError(f"n_candidates must be below the {secret.kind} space "
                                f"({SPACE[secret.kind]})")
    out: set[str] = set()
    while len(out) < n:
        v = random_value(secret.kind, first, last, gen)
        if v != secret.value:
            out.add(v)
    return sorted(out)


def exposure(model: Any, tokenizer: Any, secret: Secret, *, n_candidates: int = 1000,
             seed: int = 0) -> dict[str, Any]:
    """Exposure of one secret given its prompt (Carlini et al. 2019)."""
    from scipy import stats

    gen = np.random.default_rng(seed)
    cands = candidates(secret, n_candidates, gen)
    lp = sequence_log_perplexity(model, tokenizer, secret.prompt,
                                 [" " + v for v in [secret.value, *cands]])
    mine, others = lp[0], lp[1:]
    rank = int((others < mine).sum()) + 1
    exp_rank = math.log2(n_candidates + 1) - math.log2(rank)
    with warnings.catch_warnings():  # degenerate (near-constant) candidate sets warn
        warnings.simplefilter("ignore")
        a, loc, scale = stats.skewnorm.fit(others)
    tail = float(stats.skewnorm.cdf(mine, a, loc, scale))
    exp_fit = min(-math.log2(max(tail, 1e-300)), math.log2(SPACE[secret.kind]))
    return {"secret": secret.value, "kind": secret.kind, "owner": secret.owner,
            "log_perplexity_bits": float(mine),
            "candidates_median_bits": float(np.median(others)), "rank": rank,
            "candidates": n_candidates, "exposure_rank": exp_rank,
            "exposure_extrapolated": exp_fit, "max_exposure": math.log2(SPACE[secret.kind])}
