"""Real deployment over Flower (flwr >= 1.40): a server process and client processes over gRPC.

The algorithm code is the simulation's: `build_trusted_side` and `run_round`'s steps
(aggregator instructions, distributor, `Client.compute`, clip/sum/noise/charge, server update).
Flower only carries the messages:

* the Flower server process is the trusted side (a TEE in the seed's threat model): it hosts the
  `TrustedAggregator`, the distributor and, behind the `NoisyAggregate`-only boundary, the
  untrusted `Server`;
* each Flower client process is a device node holding a shard of users (users
  `shard, shard + P, ...`). It receives the published parameters (a full broadcast, so nobody
  learns which rows a user needs), a device-side `TrustedDistributor` hands each user its rows,
  and it returns its users' per-user contributions to the aggregator.

Failures: a client process that disconnects during a round is a Flower "failure"; the round
still completes with the other clients' users (absent users contribute nothing, which
add/remove user-level DP covers), the noise is added and the release is charged as always.
A round where no client at all is connected is still released (pure noise) and charged, so the
accounting never depends on who showed up.

Flower's telemetry is switched off (FLWR_TELEMETRY_ENABLED=0) before flwr is imported.
"""

from __future__ import annotations

import json
import logging
import math
import os
import signal
import time
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import numpy as np

from privlab.errors import InvalidInputError, PrivlabError, missing_extra
from privlab.federated import tasks
from privlab.federated.data import MOVIELENS_RANGE
from privlab.federated.factorized import FactorizedConfig
from privlab.federated.messages import Contributions, PublishedModel, RoundInstructions
from privlab.federated.mlp import MLPConfig
from privlab.federated.roles import Client, TrustedDistributor
from privlab.federated.tasks import client_kind, make_batch

if TYPE_CHECKING:  # the simulation module imports the accountant; clients do not need it
    from privlab.federated.simulation import RunConfig


def _import_flwr() -> Any:
    os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")
    try:
        import flwr
    except ImportError:  # pragma: no cover - depends on the extra
        raise missing_extra("flwr", "federated learning (Flower)") from None
    logging.getLogger("flwr").setLevel(
        logging.INFO if os.environ.get("PRIVLAB_FLWR_VERBOSE") else logging.WARNING)
    return flwr


def shard_users(n_users: int, shard: int, num_shards: int) -> np.ndarray:
    if num_shards < 1 or not 0 <= shard < num_shards:
        raise InvalidInputError(f"shard must be in [0, {num_shards}), got {shard}")
    return np.arange(n_users)[shard::num_shards]


def _model_config_json(config: RunConfig, model: Any) -> str:
    """Public model hyperparameters, sent to the device nodes with every round (with the
    declared rating range and public feature count, so a node on other data stops)."""
    spec: dict[str, Any] = {"dataset": config.dataset, "factorized": asdict(config.factorized),
                            "mlp": asdict(config.mlp)}
    if hasattr(model, "rating_range"):
        spec["rating_range"] = list(model.rating_range)
        spec["n_features"] = int(model.q)
    return json.dumps(spec)


# --------------------------------------------------------------------------------------------
# server process
# --------------------------------------------------------------------------------------------


def _make_strategy(flwr: Any, side: Any, num_clients: int, connect_timeout: float) -> Any:
    from flwr.common import (
        EvaluateIns,
        FitIns,
        ndarrays_to_parameters,
        parameters_to_ndarrays,
    )
    from flwr.server.strategy import Strategy

    config: RunConfig = side.config
    names = sorted(side.model.shapes())
    part_names = sorted(side.model.parts(client_kind(config.algorithm)))
    model_json = _model_config_json(config, side.model)

    class PrivlabStrategy(Strategy):
        """Flower strategy whose aggregation is privlab's TrustedAggregator."""

        def __init__(self) -> None:
            self.instructions: RoundInstructions | None = None
            self.failures: list[int] = []
            self.results: list[int] = []
            self.eval_sums: dict[str, float] = {}
            self.released = 0

        def initialize_parameters(self, client_manager: Any) -> Any:
            published = side.server.publish()
            return ndarrays_to_parameters([published.params[n] for n in names])

        def configure_fit(self, server_round: int, parameters: Any, client_manager: Any) -> list:
            if server_round == 1 and not client_manager.wait_for(
                    num_clients, timeout=int(math.ceil(connect_timeout))):
                raise PrivlabError(
                    f"only {client_manager.num_available()} of {num_clients} Flower clients "
                    f"connected within {connect_timeout:g} s")
            t = server_round - 1
            instr = side.aggregator.instructions(t)
            self.instructions = instr
            published = side.server.publish()
            side.distributor.load(published)
            proxies = list(client_manager.all().values())
            if not proxies:  # nobody connected: still release (noise only) and charge
                self._release([], 0)
                return []
            fit_ins = FitIns(ndarrays_to_parameters([published.params[n] for n in names]), {
                "round": t, "kind": instr.kind,
                "participants": instr.participants.astype(np.int64).tobytes(),
                "hyper": json.dumps(instr.hyper), "tables": json.dumps(names),
                "parts": json.dumps(part_names), "model": model_json,
            })
            return [(proxy, fit_ins) for proxy in proxies]

        def _release(self, batches: list, n_failures: int) -> None:
            assert self.instructions is not None
            side.server.receive(side.aggregator.aggregate(self.instructions, batches))
            self.failures.append(n_failures)
            self.results.append(len(batches))
            self.released += 1

        def aggregate_fit(self, server_round: int, results: list, failures: list) -> tuple:
            batches = []
            for _, fit_res in results:
                arrays = parameters_to_ndarrays(fit_res.parameters)
                if arrays:
                    batches.append(Contributions.from_arrays(arrays, part_names))
            self._release(batches, len(failures))
            published = side.server.publish()
            return ndarrays_to_parameters([published.params[n] for n in names]), {
                "failures": len(failures)}

        def configure_evaluate(self, server_round: int, parameters: Any,
                               client_manager: Any) -> list:
            if server_round != config.rounds:
                return []
            published = side.server.publish()
            ins = EvaluateIns(ndarrays_to_parameters([published.params[n] for n in names]), {
                "round": server_round, "tables": json.dumps(names), "model": model_json})
            return [(proxy, ins) for proxy in client_manager.all().values()]

        def aggregate_evaluate(self, server_round: int, results: list, failures: list) -> tuple:
            for _, res in results:
                for key, value in res.metrics.items():
                    self.eval_sums[key] = self.eval_sums.get(key, 0.0) + float(value)
            return None, {}

        def evaluate(self, server_round: int, parameters: Any) -> None:
            return None

    return PrivlabStrategy()


def serve(config: RunConfig, address: str = "127.0.0.1:8080", num_clients: int = 3,
          round_timeout: float = 600.0, connect_timeout: float = 120.0) -> dict[str, Any]:
    """Run the trusted side and the untrusted server as a Flower server until the run ends."""
    flwr = _import_flwr()
    from flwr.server import ServerConfig, start_server

    from privlab.federated.simulation import (
        EVALUATION_NOTE,
        build_trusted_side,
        load_task,
        make_model,
        release_guarantee,
        summarize_metrics,
    )

    if num_clients < 1:
        raise InvalidInputError(f"num_clients must be >= 1, got {num_clients}")
    data = load_task(config)  # only public facts are used: user count, catalogue, shapes
    model = make_model(config, data)
    side = build_trusted_side(config, model, data.n_users, getattr(data, "user_ids", None))
    strategy = _make_strategy(flwr, side, num_clients, connect_timeout)
    started = time.perf_counter()
    # Flower installs its own SIGINT/SIGTERM handlers; give the caller's back afterwards.
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        start_server(server_address=address, strategy=strategy,
                     config=ServerConfig(num_rounds=config.rounds,
                                         round_timeout=round_timeout))
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
    seconds = time.perf_counter() - started
    if strategy.released != config.rounds:
        raise PrivlabError(f"only {strategy.released} of {config.rounds} rounds were released")
    metrics = summarize_metrics(config.dataset, strategy.eval_sums)
    out = {
        "dataset": config.dataset, "algorithm": config.algorithm, "engine": "flower",
        "rounds": config.rounds, "n_users": data.n_users, "num_clients": num_clients,
        "clients_per_round": side.plan.clients_per_round,
        "noise_multiplier": side.plan.noise_multiplier, **metrics,
        "releases_charged": len(side.accountant.events),
        "client_failures_per_round": strategy.failures,
        "client_results_per_round": strategy.results,
        "seconds": seconds,
        "evaluation_note": EVALUATION_NOTE.replace(" (--no-eval drops them)", ""),
    }
    out["guarantee"] = release_guarantee(side, out).to_dict()
    return out


# --------------------------------------------------------------------------------------------
# client process
# --------------------------------------------------------------------------------------------


def _model_from_json(text: str, data: Any) -> Any:
    spec = json.loads(text)
    model = tasks.make_model(data, FactorizedConfig(**spec["factorized"]),
                             MLPConfig(**spec["mlp"]))
    if "rating_range" in spec and (tuple(spec["rating_range"]) != tuple(model.rating_range)
                                   or spec["n_features"] != model.q):
        raise InvalidInputError(
            f"rating_range/--movies: the server declares range {tuple(spec['rating_range'])} "
            f"and {spec['n_features']} public feature(s), this client's data has "
            f"{tuple(model.rating_range)} and {model.q}: start server and clients on the "
            "same data")
    return model


def make_numpy_client(data: Any, users: np.ndarray, fail_at_round: int | None = None) -> Any:
    """A Flower NumPyClient serving the users `users` of `data` (one device node)."""
    _import_flwr()
    from flwr.client import NumPyClient

    class PrivlabClient(NumPyClient):
        def __init__(self) -> None:
            self.client: Client | None = None
            self.distributor = TrustedDistributor()  # device side of the trusted download

        def _ensure(self, model_json: str) -> Client:
            if self.client is None:
                model = _model_from_json(model_json, data)
                self.client = Client(model, make_batch(data, users))
            return self.client

        def _load(self, parameters: list, config: dict) -> Client:
            client = self._ensure(str(config["model"]))
            names = json.loads(str(config["tables"]))
            shapes = client.model.shapes()
            params = {}
            for name, value in zip(names, parameters, strict=True):
                if tuple(value.shape) != tuple(shapes[name]):
                    raise InvalidInputError(
                        f"published {name!r} has shape {value.shape}, this client's data "
                        f"expects {shapes[name]}: start server and clients on the same data")
                params[name] = value
            self.distributor.load(PublishedModel(int(config["round"]), params))
            return client

        def get_parameters(self, config: dict) -> list:
            return []

        def fit(self, parameters: list, config: dict) -> tuple:
            round_index = int(config["round"])
            if fail_at_round is not None and round_index == fail_at_round:
                os._exit(3)  # simulate a device vanishing mid-round (tests)
            client = self._load(parameters, config)
            participants = np.frombuffer(config["participants"], dtype=np.int64)
            instr = RoundInstructions(round_index, str(config["kind"]), participants,
                                      {k: float(v) for k, v in
                                       json.loads(str(config["hyper"])).items()})
            contrib = client.compute(self.distributor.fetch(client.needs()), instr)
            if contrib is None:
                return [], 0, {}
            return contrib.to_arrays(), len(contrib.users), {}

        def evaluate(self, parameters: list, config: dict) -> tuple:
            client = self._load(parameters, config)
            sums = client.evaluate(self.distributor.fetch(client.needs()))
            return 0.0, int(sums.get("n", 0)), {k: float(v) for k, v in sums.items()}

    return PrivlabClient()


def run_client(dataset: str = "movielens", address: str = "127.0.0.1:8080", shard: int = 0,
               num_shards: int = 1, *, split_seed: int = 0, max_users: int | None = None,
               adult_users: int = 600, fail_at_round: int | None = None,
               max_wait_time: float = 120.0, ratings: str | None = None,
               movies: str | None = None,
               rating_range: tuple[float, float] = MOVIELENS_RANGE, schema: str | None = None,
               on_invalid: str = "refuse", declared_users: int | None = None
               ) -> dict[str, Any]:
    """Load this node's users and serve the Flower server until it ends the run.

    `ratings`/`movies`/`rating_range`: the same MovieLens-format files the server was started
    with (every process reads the file and keeps users `shard, shard + P, ...` of it)."""
    _import_flwr()
    from flwr.client import start_client

    data = tasks.load_task(dataset, split_seed, max_users, adult_users, ratings=ratings,
                           movies=movies, rating_range=rating_range, schema=schema,
                           on_invalid=on_invalid, declared_users=declared_users)

    users = shard_users(data.n_users, shard, num_shards)
    client = make_numpy_client(data, users, fail_at_round)
    started = time.perf_counter()
    start_client(server_address=address, client=client.to_client(), insecure=True,
                 max_wait_time=max_wait_time)
    return {"shard": shard, "num_shards": num_shards, "users": len(users),
            "seconds": time.perf_counter() - started}
