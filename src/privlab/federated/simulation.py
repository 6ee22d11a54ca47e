"""Run configuration, assembly of the roles, and the in-process simulation engine.

`train(config)` runs a whole user-level DP training run in one process. The vectorized engine
gives one `Client` all users (every computation is still per user, batched); the loop engine
gives every user its own `Client` and calls them one by one, which is what a naive simulation
does and what `benchmarks/federated.py` compares against. The Flower deployment (flower.py)
assembles the same roles with `build_trusted_side` and runs the same round function.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from privlab.core.guarantee import PrivacyGuarantee, check_delta, check_epsilon
from privlab.core.rng import SEEDED_NOTE, make_rng
from privlab.errors import InvalidInputError, option_name
from privlab.federated import tasks
from privlab.federated.accounting import ALGORITHMS, Plan, RunAccountant, calibrate
from privlab.federated.data import MOVIELENS_RANGE, RatingsData, TabularData
from privlab.federated.factorized import (
    FactorizedConfig,
    FactorizedModel,
    RatingsBatch,
    item_mean_rmse,
)
from privlab.federated.messages import ParameterSubset, RoundInstructions
from privlab.federated.mlp import MLPConfig
from privlab.federated.roles import Client, Server, TrustedAggregator, TrustedDistributor
from privlab.federated.tasks import DATASETS, client_kind, make_batch

MECHANISM_NAMES = {
    "dpam": "DP alternating minimization (private ALS: noisy per-item sufficient statistics)",
    "dpfedavg": "DP-FedAvg (Poisson client sampling, per-user clipping, Gaussian noise)",
    "dpftrl": "DP-FTRL (tree aggregation, no sampling)",
}


@dataclass(frozen=True)
class RunConfig:
    """Everything public about a training run."""

    dataset: str = "movielens"
    algorithm: str = "dpam"
    epsilon: float | None = 4.0  # None: non-private (no clipping, no noise)
    delta: float = 1e-5
    rounds: int = 10
    clients_per_round: int | None = None  # dpfedavg: expected K; dpftrl: batch size
    seed: int | None = None  # None: CSPRNG noise; an int: reproducible (tests only)
    split_seed: int = 0
    max_users: int | None = None
    adult_users: int = 600
    ratings: str | None = None  # a MovieLens-format ratings file instead of the bundled one
    movies: str | None = None  # its public catalogue (movieId,title,genres); None: no features
    rating_range: tuple[float, float] = MOVIELENS_RANGE  # declared public range of the ratings
    schema: str | None = None  # declared schema of `ratings` (None: movielens-ratings)
    on_invalid: str = "refuse"  # refuse | coerce values outside the schema
    declared_users: int | None = None  # public number of enrolled users of `ratings`
    factorized: FactorizedConfig = field(default_factory=FactorizedConfig)
    mlp: MLPConfig = field(default_factory=MLPConfig)

    def __post_init__(self) -> None:
        if self.dataset not in DATASETS:
            raise InvalidInputError(f"{option_name('dataset', '--dataset')} must be one of "
                                    f"{', '.join(DATASETS)}, "
                                    f"got {self.dataset!r}")
        if self.algorithm not in ALGORITHMS:
            raise InvalidInputError(f"{option_name('algorithm', '--algorithm')} must be one of "
                                    f"{'|'.join(ALGORITHMS)}, "
                                    f"got {self.algorithm!r}")
        if self.dataset == "adult" and self.algorithm == "dpam":
            raise InvalidInputError(f"{option_name('algorithm', '--algorithm')}: dpam needs a "
                                    "factorized model (movielens); use dpfedavg or dpftrl for "
                                    "adult")
        if self.epsilon is not None:
            check_epsilon(self.epsilon)
        delta = check_delta(self.delta)
        if self.epsilon is not None and delta == 0:
            raise InvalidInputError(f"{option_name('delta', '--delta')} must be > 0 (e.g. 1e-5): "
                                    "Gaussian noise needs it")
        if isinstance(self.rounds, bool) or not isinstance(self.rounds, int) or self.rounds < 1:
            raise InvalidInputError(f"{option_name('rounds', '--rounds')} must be a whole "
                                    f"number >= 1, got {self.rounds!r}")
        if self.clients_per_round is not None and self.clients_per_round < 1:
            raise InvalidInputError(
                f"{option_name('clients_per_round', '--clients-per-round')} must be >= 1, "
                f"got {self.clients_per_round}")
        if self.max_users is not None and self.max_users < 1:
            raise InvalidInputError(f"{option_name('max_users', '--max-users')} must be >= 1, "
                                    f"got {self.max_users}")
        object.__setattr__(self, "rating_range", tasks.check_data_options(
            self.dataset, self.ratings, self.movies, self.rating_range, self.schema,
            self.declared_users))
        if self.on_invalid not in ("refuse", "coerce"):
            raise InvalidInputError(f"--on-invalid must be refuse or coerce, got "
                                    f"{self.on_invalid!r}")

    @property
    def private(self) -> bool:
        return self.epsilon is not None


def load_task(config: RunConfig) -> RatingsData | TabularData:
    return tasks.load_task(config.dataset, config.split_seed, config.max_users,
                           config.adult_users, ratings=config.ratings, movies=config.movies,
                           rating_range=config.rating_range, schema=config.schema,
                           on_invalid=config.on_invalid, declared_users=config.declared_users)


def make_model(config: RunConfig, data: RatingsData | TabularData) -> Any:
    return tasks.make_model(data, config.factorized, config.mlp)


def default_clients_per_round(config: RunConfig, n_users: int) -> int | None:
    if config.algorithm == "dpam":
        return None
    if config.clients_per_round is not None:
        return min(config.clients_per_round, n_users)
    return max(1, n_users // 10)


@dataclass
class TrustedSide:
    """Everything outside the clients: server (untrusted) and the trusted components."""

    config: RunConfig
    model: Any
    plan: Plan
    server: Server
    distributor: TrustedDistributor
    aggregator: TrustedAggregator
    accountant: RunAccountant
    calibration_seconds: float


def _hyper(config: RunConfig) -> dict[str, float]:
    cfg = config.factorized if config.dataset == "movielens" else config.mlp
    return {"local_lr": cfg.local_lr, "local_steps": float(cfg.local_steps)}


def build_trusted_side(config: RunConfig, model: Any, n_users: int,
                       user_ids: np.ndarray | None = None) -> TrustedSide:
    """Plan, calibrate the noise to the target epsilon, and create server/distributor/
    aggregator. Uses only public facts: the config, the model's shapes and the user count;
    `user_ids` (inside the trust boundary) only key each user's own participation draw."""
    if n_users < 1:
        raise InvalidInputError("the run needs at least one enrolled user")
    kind = client_kind(config.algorithm)
    parts = model.parts(kind)
    k = default_clients_per_round(config, n_users)
    plan = Plan(config.algorithm, config.rounds, n_users, 0.0, len(parts), k)
    started = time.perf_counter()
    if config.private:
        assert config.epsilon is not None
        sigma = calibrate(plan, config.epsilon, config.delta)
        plan = replace(plan, noise_multiplier=sigma)
    seconds = time.perf_counter() - started
    accountant = RunAccountant(plan, config.delta)
    init_rng = np.random.default_rng(
        None if config.seed is None else np.random.SeedSequence([config.seed, 1]))
    server_lr = (config.factorized if config.dataset == "movielens" else config.mlp).server_lr
    server = Server(model, plan, model.init_params(init_rng), server_lr=server_lr)
    aggregator = TrustedAggregator(plan, parts, model.clip_norms(kind), kind, accountant,
                                   make_rng(config.seed), _hyper(config), user_ids)
    return TrustedSide(config, model, plan, server, TrustedDistributor(), aggregator,
                       accountant, seconds)


def run_round(side: TrustedSide, round_index: int,
              compute: Callable[[RoundInstructions], list]) -> None:
    """One round: publish -> distribute -> client compute -> clip/sum/noise/charge -> update.

    `compute(instructions)` returns the clients' contributions (in-process or over Flower);
    clients fetch their rows from `side.distributor`, loaded here before they run.
    """
    instructions = side.aggregator.instructions(round_index)
    side.distributor.load(side.server.publish())
    batches = compute(instructions)
    side.server.receive(side.aggregator.aggregate(instructions, batches))


def guarantee_of(side: TrustedSide) -> PrivacyGuarantee:
    config = side.config
    notes = []
    if config.seed is not None:
        notes.append(SEEDED_NOTE)
    notes.append(f"noise multiplier {side.plan.noise_multiplier:.6g} per clipped part; "
                 f"{len(side.model.parts(client_kind(config.algorithm)))} part(s) per round")
    if config.algorithm == "dpfedavg":
        notes.append(f"sample rate q={side.plan.sample_rate:.6g} (expected "
                     f"{side.plan.clients_per_round} of {side.plan.n_users} users a round)")
    if config.algorithm == "dpftrl":
        notes.append(f"epochs (rounds each): {side.plan.epochs()}; each user once per epoch")
    if config.dataset == "movielens" and side.model.q > 0:
        notes.append("public item features (genres, year) used without protection")
    if config.ratings is not None and config.movies is None:
        notes.append("no catalogue given: the set of rated movie ids sizes the released item "
                     "table (named in not_covered) and no public item features are used")
    return side.accountant.guarantee(MECHANISM_NAMES[config.algorithm], tuple(notes))


#: Output keys computed exactly from the private ratings/records (or timed on them): each one
#: present in an output is named in the guarantee's `not_covered`.
_TIMINGS = ("wall-clock timings (train_seconds, rounds_per_second, seconds): they grow with the "
            "number of ratings")
EXACT_OUTPUTS = {
    "test_rmse": "test_rmse (exact RMSE on the users' held-out ratings)",
    "test_accuracy": "test_accuracy (exact, on the users' held-out records)",
    "test_logloss": "test_logloss (exact, on the users' held-out records)",
    "n_test": "n_test (exact number of held-out ratings or records)",
    "item_mean_rmse": "item_mean_rmse (exact non-private baseline: per-item means of the "
                      "training ratings, scored on the held-out ratings)",
    "local_only_rmse": "local_only_rmse (exact, on the held-out ratings)",
    "majority_accuracy": "majority_accuracy (exact: training majority class scored on the "
                         "held-out records)",
    "train_seconds": _TIMINGS,
    "seconds": _TIMINGS,
}
EVALUATION_NOTE = ("test metrics and baselines are the experimenter's held-out evaluation, "
                   "computed exactly on the devices' private test data: they are outside the "
                   "DP release and named in guarantee.not_covered (--no-eval drops them)")


def release_guarantee(side: TrustedSide, out: dict[str, Any]) -> PrivacyGuarantee:
    """The run's guarantee, naming what it covers and every exact value in `out`."""
    config = side.config
    g = guarantee_of(side)
    what = ("item table (item embeddings and biases) published to the untrusted server after "
            "every round and at the end" if config.dataset == "movielens"
            else "model weights published to the untrusted server after every round and at "
                 "the end")
    g = g.with_covers(what)
    missing = [text for key, text in EXACT_OUTPUTS.items() if key in out]
    if config.ratings is not None and config.declared_users is None:
        missing.append("n_users (the exact number of users in --ratings; it also sizes the "
                       "sampling plan and the noise: declare it with --users N)")
    if config.ratings is not None and config.movies is None:
        missing.append("the item table's size and rows (the set of movie ids rated in "
                       "--ratings: pass the public catalogue with --movies)")
    return g.with_not_covered(*missing)


def evaluate_clients(model: Any, clients: list[Client], distributor: TrustedDistributor
                     ) -> dict[str, float]:
    total: dict[str, float] = {}
    for c in clients:
        for key, value in c.evaluate(distributor.fetch(c.needs())).items():
            total[key] = total.get(key, 0.0) + value
    return total


def summarize_metrics(dataset: str, sums: dict[str, float]) -> dict[str, float]:
    n = sums.get("n", 0.0)
    if n <= 0:
        return {"n_test": 0}
    if dataset == "movielens":
        return {"test_rmse": math.sqrt(sums["sse"] / n), "n_test": int(n)}
    return {"test_accuracy": sums["correct"] / n, "test_logloss": sums["logloss"] / n,
            "n_test": int(n)}


def local_only_rmse(model: FactorizedModel, batch: RatingsBatch) -> float:
    """Baseline of the billboard model with NO shared information: each user's local solve
    on public item features and its own bias (item table all zeros)."""
    zero = ParameterSubset({model.table: np.arange(model.n_items)},
                           {model.table: np.zeros((model.n_items, model.k))})
    sums = model.evaluate(batch, zero)
    return math.sqrt(sums["sse"] / sums["n"]) if sums["n"] else math.nan


def majority_accuracy(data: TabularData) -> float:
    """Baseline: predict the training majority class."""
    major = float(data.y_train.mean() >= 0.5)
    return float((data.y_test == major).mean()) if len(data.y_test) else math.nan


def train(config: RunConfig, data: RatingsData | TabularData | None = None, *,
          engine: str = "vectorized", progress: Callable[[int, int], None] | None = None,
          baselines: bool = True, evaluate: bool = True, timings: bool = True
          ) -> dict[str, Any]:
    """Run a whole training round by round in-process; return metrics and the guarantee.

    `evaluate` adds the held-out metrics (and, with `baselines`, the non-private baselines),
    `timings` the wall-clock times: all are exact values on the private data, so the
    guarantee lists each of them in `not_covered` (release_guarantee).
    """
    if engine not in ("vectorized", "loop"):
        raise InvalidInputError(f"engine must be 'vectorized' or 'loop', got {engine!r}")
    data = load_task(config) if data is None else data
    model = make_model(config, data)
    side = build_trusted_side(config, model, data.n_users, getattr(data, "user_ids", None))
    if not config.private:
        warnings.warn("non-private federated run: no clipping and no noise; the released "
                      "parameters are NOT differentially private", stacklevel=2)
    if engine == "vectorized":
        clients = [Client(model, make_batch(data))]
    else:
        full = make_batch(data)
        clients = [Client(model, full.select(np.array([i]))) for i in range(data.n_users)]

    def compute(instr: RoundInstructions) -> list:
        return [c.compute(side.distributor.fetch(c.needs()), instr) for c in clients]

    started = time.perf_counter()
    for t in range(config.rounds):
        run_round(side, t, compute)
        if progress is not None:
            progress(t + 1, config.rounds)
    train_seconds = time.perf_counter() - started
    side.distributor.load(side.server.publish())
    out: dict[str, Any] = {
        "dataset": config.dataset,
        "algorithm": config.algorithm,
        "engine": engine,
        "rounds": config.rounds,
        "n_users": data.n_users,
        "clients_per_round": side.plan.clients_per_round,
        "noise_multiplier": side.plan.noise_multiplier,
    }
    if evaluate:
        out.update(summarize_metrics(config.dataset, evaluate_clients(model, clients,
                                                                      side.distributor)))
    out["releases_charged"] = len(side.accountant.events)
    if timings:
        out["train_seconds"] = train_seconds
        out["rounds_per_second"] = (config.rounds / train_seconds if train_seconds > 0
                                    else math.inf)
        out["calibration_seconds"] = side.calibration_seconds
    if evaluate and baselines and isinstance(data, RatingsData):
        out["item_mean_rmse"] = item_mean_rmse(data)
        out["local_only_rmse"] = local_only_rmse(model, make_batch(data))
    elif evaluate and baselines:
        out["majority_accuracy"] = majority_accuracy(data)
    if evaluate:
        out["evaluation_note"] = EVALUATION_NOTE
    out["guarantee"] = release_guarantee(side, out).to_dict()
    out["_side"] = side  # for tests and experiments; dropped by the CLI
    return out
