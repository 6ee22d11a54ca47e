"""Secret extraction from a small language model (Kobylianska (2025), section 2.3), done properly.

Setup, as in Kobylianska (2025): 250 short texts, 15 planted secrets (5 emails, 5 phone numbers,
5 SSNs, one of each for 5 people) each repeated in several contexts (HR cards, contact lists),
a GPT-2-architecture model fine-tuned on them with and without DP, then prompts such as
"HR record: Name=Mike Williams, SSN:" sampled at temperature 0.7 and searched for exact
secrets. Differences from Kobylianska (2025), on purpose:

- No weight download: the model is built from a `GPT2Config` (tiny: 2 layers, 64 dims) and
  first trained non-privately on a PUBLIC corpus from the same templates with other people
  and fresh random values (it learns the formats, not the secrets); the private corpus
  then fine-tunes it. The tokenizer (byte-level BPE, digits split one per token) is trained
  on the public corpus only: a tokenizer trained on the private texts would itself leak them
  (BPE merges of frequent secret substrings), outside any DP guarantee.
- DP fine-tuning is DP-SGD with per-text clipping (per-example gradients by torch.func),
  Poisson sampling and Gaussian noise, and sigma calibrated to the target epsilon by the PLD
  accountant (`privlab.core.accounting`). Kobylianska clipped the whole batch gradient and set
  a noise multiplier without accounting; that is not DP.
- The guarantee is per TEXT. A secret planted in r texts is protected only by group privacy,
  (r eps, r e^((r-1) eps) delta): the report states it. At eps = 8 and r = 10 that is no
  formal protection of the secret at all; the experiment shows what DP-SGD does in practice.
- Exposure (Carlini et al. 2019, "The Secret Sharer"): rank of the true secret's
  log-perplexity (given its prompt) among random candidates of the same format;
  exposure = log2(#candidates + 1) - log2(rank), and the skew-normal extrapolation of
  Carlini et al. (2019), -log2 P(candidate log-perplexity <= the secret's).

One module per step, this package re-exporting their public names (the path
`privlab.audit.lm` is unchanged): `corpus`, `model` (tokenizer, GPT-2), `training` (plain or
DP-SGD fine-tuning), `extraction` (sampling attack, exposure), `run` (end to end).
"""

from __future__ import annotations

from privlab.audit.lm.corpus import (
    DAYS,
    DOMAINS,
    FILLER,
    FOODS,
    KINDS,
    PRIVATE_PEOPLE,
    PUBLIC_PEOPLE,
    SPACE,
    TEAMS,
    TEMPLATES,
    Secret,
    SecretCorpus,
    make_public_corpus,
    make_secret_corpus,
    random_value,
)
from privlab.audit.lm.extraction import (
    ExtractionResult,
    candidates,
    exposure,
    extraction_attack,
    sample_completions,
    sequence_log_perplexity,
)
from privlab.audit.lm.model import (
    EOS,
    PAD,
    LMSpec,
    encode,
    small_gpt2,
    train_tokenizer,
)
from privlab.audit.lm.run import (
    LMAuditConfig,
    run_lm_audit,
)
from privlab.audit.lm.training import (
    LMTrainConfig,
    LMTrainResult,
    Progress,
    train_lm,
)

__all__ = [
    "DAYS",
    "DOMAINS",
    "EOS",
    "ExtractionResult",
    "FILLER",
    "FOODS",
    "KINDS",
    "LMAuditConfig",
    "LMSpec",
    "LMTrainConfig",
    "LMTrainResult",
    "PAD",
    "PRIVATE_PEOPLE",
    "PUBLIC_PEOPLE",
    "Progress",
    "SPACE",
    "Secret",
    "SecretCorpus",
    "TEAMS",
    "TEMPLATES",
    "candidates",
    "encode",
    "exposure",
    "extraction_attack",
    "make_public_corpus",
    "make_secret_corpus",
    "random_value",
    "run_lm_audit",
    "sample_completions",
    "sequence_log_perplexity",
    "small_gpt2",
    "train_lm",
    "train_tokenizer",
]
