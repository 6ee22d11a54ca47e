"""The audit's tokenizer and model: byte-level BPE trained on the public corpus only (one
trained on the private texts would leak them outside any DP guarantee), a tiny GPT-2 built from
its config (no weight download), and the per-text loss."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from privlab.errors import InvalidInputError

EOS, PAD = "<|endoftext|>", "<pad>"


def train_tokenizer(texts: Sequence[str], vocab_size: int = 1000) -> Any:
    """Byte-level BPE trained locally; digits are split one per token so every digit of a
    secret is its own prediction (and candidates of one format have equal length)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[EOS, PAD],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(list(texts), trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOS, bos_token=EOS,
                                   pad_token=PAD, unk_token=None)
    return fast


@dataclass
class LMSpec:
    n_embd: int = 64
    n_layer: int = 2
    n_head: int = 2
    n_positions: int = 64


def small_gpt2(tokenizer: Any, spec: LMSpec | None = None, seed: int = 0) -> Any:
    """A GPT-2 architecture built from a config (random init, no download), eager attention
    (torch.func transforms it), dropout off (per-example gradients stay deterministic)."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    spec = spec or LMSpec()
    cfg = GPT2Config(vocab_size=len(tokenizer), n_positions=spec.n_positions,
                     n_embd=spec.n_embd, n_layer=spec.n_layer, n_head=spec.n_head,
                     bos_token_id=tokenizer.eos_token_id, eos_token_id=tokenizer.eos_token_id,
                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    # no pad_token_id in the config: padding is handled here (right padding under causal
    # attention, labels -100), and transformers' "is there padding?" check is data-dependent
    # Python control flow that torch.func.vmap cannot trace
    cfg._attn_implementation = "eager"
    state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        model = GPT2LMHeadModel(cfg)
    finally:
        torch.random.set_rng_state(state)
    return model


def encode(tokenizer: Any, texts: Sequence[str], max_length: int) -> tuple[Any, Any]:
    """(ids, labels) right-padded to max_length; labels are -100 on padding. Causal attention
    means real tokens never attend to the right padding, so no attention mask is needed."""
    import torch

    ids = torch.full((len(texts), max_length), tokenizer.pad_token_id, dtype=torch.long)
    labels = torch.full((len(texts), max_length), -100, dtype=torch.long)
    too_long = 0
    for i, t in enumerate(texts):
        tok = tokenizer(t)["input_ids"] + [tokenizer.eos_token_id]
        if len(tok) > max_length:
            too_long += 1
            tok = tok[:max_length]
        ids[i, :len(tok)] = torch.tensor(tok)
        labels[i, :len(tok)] = torch.tensor(tok)
    if too_long:
        raise InvalidInputError(f"{too_long} texts are longer than max_length={max_length} "
                                "tokens; raise max_length (the model's n_positions)")
    return ids, labels


def _per_text_loss(logits: Any, labels: Any) -> Any:
    """Mean next-token cross-entropy of each text (padding ignored), shape (B,)."""
    import torch.nn.functional as F

    lg, tg = logits[:, :-1], labels[:, 1:]
    ce = F.cross_entropy(lg.reshape(-1, lg.shape[-1]), tg.reshape(-1), ignore_index=-100,
                         reduction="none").view(tg.shape)
    return ce.sum(1) / (tg != -100).sum(1).clamp(min=1)
