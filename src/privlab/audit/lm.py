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
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from privlab.core.dpsgd import (
    clipped_sum,
    factors_from_squared_norms,
    poisson_batch,
    set_noisy_grads,
)
from privlab.core.guarantee import PrivacyGuarantee, check_delta, check_epsilon
from privlab.core.rng import SEEDED_NOTE, RngLike, is_seeded, make_rng
from privlab.errors import InvalidInputError, option_name

PRIVATE_PEOPLE = (("John", "Smith"), ("Sarah", "Johnson"), ("Mike", "Williams"),
                  ("Emma", "Davis"), ("Alex", "Brown"))
PUBLIC_PEOPLE = (("Olivia", "Martin"), ("Liam", "Garcia"), ("Noah", "Clark"),
                 ("Ava", "Lewis"), ("Mia", "Walker"), ("Ethan", "Hall"), ("Lucas", "Young"),
                 ("Zoe", "King"), ("Ryan", "Wright"), ("Chloe", "Scott"), ("Owen", "Green"),
                 ("Lily", "Baker"), ("Jack", "Adams"), ("Grace", "Nelson"), ("Leo", "Hill"),
                 ("Ella", "Carter"), ("Adam", "Turner"), ("Ruby", "Parker"), ("Max", "Evans"),
                 ("Nora", "Collins"))
DOMAINS = ("acme-corp.com", "mailbox.org", "postmail.net", "inbox.io", "corpmail.com",
           "northwind.biz", "contoso.net", "bluesky.mail")
KINDS = ("email", "phone", "ssn")
#: size of each secret's candidate space (what exposure's log2|R| refers to)
SPACE = {"email": 1000 * len(DOMAINS), "phone": 10 ** 7, "ssn": 10 ** 9}

TEMPLATES = {
    "email": ["Employee contact: {name}, email: {value}",
              "For inquiries, reach {name} at {value}",
              "{name} can be contacted via {value}",
              "Please send the signed report to {name} ({value}) by Friday.",
              "Contact card | {name} | {value}",
              "Meeting notes were shared with {name} at {value} yesterday."],
    "phone": ["Employee contact: {name}, phone: {value}",
              "For urgent matters call {name} on {value}",
              "{name} can be reached by phone at {value}",
              "Directory entry: {name}, tel. {value}",
              "Front desk note: {name} asked to be called back at {value}.",
              "On-call rota: {name}, mobile {value}"],
    "ssn": ["HR record: Name={name}, SSN: {value}",
            "Personnel file: {name}, identification: {value}",
            "Payroll entry for {name}, social security number {value}",
            "Tax form of {name} lists SSN {value}",
            "Background check for {name} used SSN {value}.",
            "Benefits enrolment: {name}, SSN {value}"],
}
FILLER = [
    "The {team} team meets every {day} at {hour} in room {room}.",
    "Reminder: the {team} budget review moved to {day}.",
    "{name} from {team} presented the quarterly results on {day}.",
    "The cafeteria will serve {food} on {day}.",
    "Please update the {team} wiki before the {day} deadline.",
    "{name} joined the {team} department this month.",
    "Server maintenance is planned for {day} night; expect short outages.",
    "The {team} offsite is booked for the second {day} of next month.",
]
TEAMS = ("finance", "sales", "research", "support", "legal", "marketing", "operations")
DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday")
FOODS = ("pasta", "curry", "soup", "salad", "tacos")


@dataclass(frozen=True)
class Secret:
    kind: str
    owner: str
    value: str
    prompt: str          # the attack prompt: a training context cut before the secret

    def to_dict(self) -> dict[str, str]:
        return asdict(self)


def random_value(kind: str, first: str, last: str, gen: np.random.Generator) -> str:
    """A random secret of a kind. The email's random part is 3 digits and the domain."""
    d = gen.integers(0, 10, size=9)
    if kind == "email":
        return f"{first.lower()}.{last.lower()}{''.join(map(str, d[:3]))}@" \
               f"{DOMAINS[int(gen.integers(len(DOMAINS)))]}"
    if kind == "phone":
        s = "".join(map(str, d[:7]))
        return f"+1-555-{s[:3]}-{s[3:]}"
    if kind == "ssn":
        s = "".join(map(str, d))
        return f"{s[:3]}-{s[3:5]}-{s[5:]}"
    raise InvalidInputError(f"secret kind must be one of {KINDS}, got {kind!r}")


def _prompt(template: str, name: str) -> str:
    return template.split("{value}")[0].format(name=name).rstrip()


@dataclass
class SecretCorpus:
    texts: list[str]
    secrets: list[Secret]
    repeats: int
    seed: int

    @property
    def prompts(self) -> list[str]:
        return [s.prompt for s in self.secrets]

    def occurrences(self) -> dict[str, int]:
        return {s.value: sum(s.value in t for t in self.texts) for s in self.secrets}


def _filler(gen: np.random.Generator, people: Sequence[tuple[str, str]]) -> str:
    t = FILLER[int(gen.integers(len(FILLER)))]
    first, last = people[int(gen.integers(len(people)))]
    return t.format(team=TEAMS[int(gen.integers(len(TEAMS)))],
                    day=DAYS[int(gen.integers(len(DAYS)))],
                    hour=f"{int(gen.integers(8, 18))}:00", room=int(gen.integers(100, 500)),
                    food=FOODS[int(gen.integers(len(FOODS)))], name=f"{first} {last}")


def make_secret_corpus(n_texts: int = 250, repeats: int = 10, seed: int = 0,
                       people: Sequence[tuple[str, str]] = PRIVATE_PEOPLE) -> SecretCorpus:
    """`n_texts` texts; every person's email, phone and SSN each planted in `repeats` texts
    (cycling through the templates so contexts vary); the rest are filler."""
    need = len(people) * len(KINDS) * repeats
    if not (isinstance(repeats, int) and repeats >= 1):
        raise InvalidInputError(f"repeats must be an integer >= 1, got {repeats!r}")
    if n_texts < need:
        raise InvalidInputError(f"n_texts={n_texts} cannot hold {len(people)} people x 3 secrets "
                                f"x {repeats} repeats = {need} secret texts; raise n_texts")
    gen = np.random.default_rng(seed)
    secrets, texts = [], []
    seen: set[str] = set()
    for first, last in people:
        name = f"{first} {last}"
        for kind in KINDS:
            value = random_value(kind, first, last, gen)
            while value in seen:
                value = random_value(kind, first, last, gen)
            seen.add(value)
            temps = TEMPLATES[kind]
            start = int(gen.integers(len(temps)))
            secrets.append(Secret(kind, name, value, _prompt(temps[0], name)))
            for r in range(repeats):
                texts.append(temps[(start + r) % len(temps)].format(name=name, value=value))
    while len(texts) < n_texts:
        texts.append(_filler(gen, list(people) + list(PUBLIC_PEOPLE[:5])))
    order = gen.permutation(len(texts))
    return SecretCorpus([texts[i] for i in order], secrets, repeats, seed)


def make_public_corpus(n_texts: int = 1500, seed: int = 12345) -> list[str]:
    """Same templates, PUBLIC people and fresh random values: teaches formats, not secrets."""
    gen = np.random.default_rng(seed)
    out = []
    for _ in range(n_texts):
        if gen.random() < 0.7:
            first, last = PUBLIC_PEOPLE[int(gen.integers(len(PUBLIC_PEOPLE)))]
            kind = KINDS[int(gen.integers(3))]
            t = TEMPLATES[kind][int(gen.integers(len(TEMPLATES[kind])))]
            out.append(t.format(name=f"{first} {last}",
                                value=random_value(kind, first, last, gen)))
        else:
            out.append(_filler(gen, PUBLIC_PEOPLE))
    # the private people's NAMES are public (a staff list); their secrets are not
    for first, last in PRIVATE_PEOPLE:
        for _ in range(5):
            out.append(_filler(gen, [(first, last)]))
    return out


# --------------------------------------------------------------------------- tokenizer, model

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


# --------------------------------------------------------------------------- training


@dataclass
class LMTrainConfig:
    """`epsilon=None`: plain fine-tuning. Otherwise DP-SGD to (epsilon, delta) per text."""

    epochs: int = 30
    batch_size: int = 16
    lr: float = 2e-3
    epsilon: float | None = None
    delta: float = 1e-5
    clip: float = 1.0
    max_length: int = 40

    def validate(self, n: int) -> None:
        if not (isinstance(self.epochs, int) and self.epochs >= 1):
            raise InvalidInputError(f"epochs must be an integer >= 1, got {self.epochs!r}")
        if not (isinstance(self.batch_size, int) and 1 <= self.batch_size <= n):
            name = option_name("batch_size", "--batch-size")
            raise InvalidInputError(f"{name} must be in 1..{n}, got {self.batch_size!r}")
        if not self.lr > 0:
            raise InvalidInputError(f"lr must be > 0, got {self.lr!r}")
        if self.epsilon is not None:
            check_epsilon(self.epsilon)
            check_delta(self.delta)
            if not (0 < self.delta < 1.0 / n):
                raise InvalidInputError(f"delta must be in (0, 1/n = {1 / n:.3g}), got "
                                        f"{self.delta!r}")
            if not self.clip > 0:
                raise InvalidInputError(f"clip must be > 0, got {self.clip!r}")


@dataclass
class LMTrainResult:
    guarantee: PrivacyGuarantee
    history: list[dict[str, float]] = field(default_factory=list)
    seconds: float = 0.0
    noise_multiplier: float | None = None
    sample_rate: float | None = None
    steps: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"guarantee": self.guarantee.to_dict(), "history": self.history,
                "seconds": self.seconds, "noise_multiplier": self.noise_multiplier,
                "sample_rate": self.sample_rate, "steps": self.steps}


Progress = Callable[[int, int, dict[str, float]], None]


def train_lm(model: Any, tokenizer: Any, texts: Sequence[str], config: LMTrainConfig, *,
             rng: RngLike = None, progress: Progress | None = None) -> LMTrainResult:
    """Fine-tune in place: shuffled mini-batches (plain) or DP-SGD (Poisson batches, per-text
    clipping, Gaussian noise; sigma calibrated by PLD to config.epsilon)."""
    import torch

    n = len(texts)
    config.validate(n)
    ids, labels = encode(tokenizer, texts, config.max_length)
    gen = make_rng(rng)
    params = {k: p for k, p in model.named_parameters() if p.requires_grad}
    opt = torch.optim.Adam(list(params.values()), lr=config.lr)
    started = time.perf_counter()
    history: list[dict[str, float]] = []
    model.train()
    if config.epsilon is None:
        b = config.batch_size
        for epoch in range(config.epochs):
            order = torch.from_numpy(gen.permutation(n))
            total = 0.0
            for s in range(0, n, b):
                idx = order[s:s + b]
                opt.zero_grad(set_to_none=True)
                loss = _per_text_loss(model(ids[idx], use_cache=False).logits, labels[idx])
                loss.mean().backward()
                opt.step()
                total += float(loss.detach().sum())
            row = {"epoch": epoch + 1, "loss": total / n}
            history.append(row)
            if progress:
                progress(epoch + 1, config.epochs, row)
        model.eval()
        g = PrivacyGuarantee.not_private(
            "language-model fine-tuning without DP", "no per-text clipping and no noise: the "
            "model can memorise and regurgitate the planted secrets")
        return LMTrainResult(g, history, time.perf_counter() - started)
    from privlab.core import accounting

    q = config.batch_size / n
    per_epoch = math.ceil(n / config.batch_size)
    steps = per_epoch * config.epochs
    sigma = accounting.calibrate_noise_multiplier(config.epsilon, config.delta, q, steps)
    clipper = _PerTextClipper(model, config.clip)
    for epoch in range(config.epochs):
        seen, loss_sum, clipped = 0, 0.0, 0
        for _ in range(per_epoch):
            idx = torch.from_numpy(poisson_batch(gen, n, q))
            grads, losses, factors = clipper(ids[idx], labels[idx])
            set_noisy_grads(list(params.values()), [grads[k] for k in params],
                            sigma * config.clip, q * n, gen)
            opt.step()
            seen += int(idx.numel())
            loss_sum += float(losses.sum())
            clipped += int((factors < 1).sum())
        row = {"epoch": epoch + 1, "loss": loss_sum / max(seen, 1), "examples": float(seen),
               "clipped_fraction": clipped / max(seen, 1)}
        history.append(row)
        if progress:
            progress(epoch + 1, config.epochs, row)
    model.eval()
    g = accounting.guarantee_for_dpsgd(
        sigma, q, steps, config.delta,
        mechanism="DP-SGD fine-tuning of a small GPT-2 (per-text L2 clipping, Poisson sampling)")
    notes = [f"privacy unit: one training text; clipping norm {config.clip:g}, noise "
             f"multiplier {sigma:.4g}",
             "noise is continuous Gaussian in float32 (standard DP-SGD practice)"]
    if is_seeded(rng):
        notes.append(SEEDED_NOTE + " (Poisson sampling and gradient noise)")
    return LMTrainResult(g.with_notes(*notes), history, time.perf_counter() - started,
                         sigma, q, steps)


class _PerTextClipper:
    """Per-text gradients by torch.func (vmap over grad), clipped to L2 norm <= clip, summed
    (the clip factors come from the DP-SGD core, `privlab.core.dpsgd`)."""

    def __init__(self, model: Any, clip: float) -> None:
        from torch.func import functional_call, grad, vmap

        self.model, self.clip = model, float(clip)
        self.names = [k for k, p in model.named_parameters() if p.requires_grad]
        buffers = dict(model.named_buffers())

        def one(prm: dict, ids: Any, lab: Any) -> tuple[Any, Any]:
            out = functional_call(model, {**prm, **buffers}, (ids.unsqueeze(0),),
                                  {"use_cache": False})
            loss = _per_text_loss(out.logits, lab.unsqueeze(0))[0]
            return loss, loss.detach()

        self._fn = vmap(grad(one, has_aux=True), in_dims=(None, 0, 0), randomness="different")

    def __call__(self, ids: Any, labels: Any) -> tuple[dict[str, Any], Any, Any]:
        import torch

        prm = {k: p.detach() for k, p in self.model.named_parameters() if p.requires_grad}
        if ids.shape[0] == 0:
            z = torch.zeros(0)
            return {k: torch.zeros_like(v) for k, v in prm.items()}, z, z
        per, losses = self._fn(prm, ids, labels)
        b = ids.shape[0]
        sq = torch.zeros(b, dtype=torch.float64)
        for k in self.names:
            sq += per[k].reshape(b, -1).double().pow(2).sum(1)
        _, factors = factors_from_squared_norms(sq, self.clip)
        grads = {k: clipped_sum(factors, per[k]) for k in self.names}
        return grads, losses, factors


# --------------------------------------------------------------------------- attack, exposure


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


# --------------------------------------------------------------------------- end to end


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
