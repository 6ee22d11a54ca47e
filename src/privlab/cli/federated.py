"""`privlab federated {train,serve,client}`: user-level DP federated training.

`train` runs the in-process simulation; `serve` and `client` run the same algorithm as a Flower
deployment (one server process, client processes holding shards of users).

`python -m privlab.cli.federated {train,serve,client}` runs these verbs alone (`main`): Flower
client processes start without loading every other verb. The entry point lives here, in the
CLI, because it runs CLI commands: `privlab.federated` never imports the CLI.
"""

from __future__ import annotations

import dataclasses
import sys
import warnings
from typing import Annotated, Any

import typer

from privlab.cli.common import (
    check_delta_policy,
    console,
    emit_json,
    err_console,
    parse_range,
)
from privlab.cli.options import AllowWeak, Json, option
from privlab.errors import InvalidInputError

federated_app = typer.Typer(
    name="federated",
    help="User-level DP federated training: DPAM, DP-FedAvg, DP-FTRL (simulation or Flower).",
    no_args_is_help=True,
)

_DATASET = typer.Option("movielens", "--dataset", help="movielens | adult.")
_RATINGS = typer.Option(None, "--ratings",
                        help="MovieLens-format ratings FILE (CSV/Parquet: userId,movieId,rating"
                             "[,timestamp]) instead of the bundled ones (the default); a row "
                             "with a userId "
                             "and neither movieId nor rating enrols a user without ratings.")
_MOVIES = typer.Option(None, "--movies",
                       help="Public catalogue FILE for --ratings (movieId,title,genres): genre "
                            "and year features used without protection. Without it the rated "
                            "movie ids are the catalogue and no public features are used.")
_RANGE = typer.Option(None, "--rating-range",
                      help="Declared public range LO:HI of --ratings, e.g. 1:10 (default: the "
                           "schema's rating bounds, 0.5:5 for movielens-ratings).")
_SCHEMA = Annotated[str, option("declared schema",
                                 "Declared public schema of --ratings (bundled name or YAML/JSON "
                                 "file; default movielens-ratings: privacy unit userId).")]
_ON_INVALID = Annotated[str, option("invalid rows",
                                    "--ratings values outside the schema: refuse (one-line "
                                    "error) or coerce (clamp, drop rows with no place).")]
_USERS = typer.Option(None, "--users",
                      help="Declared public number of enrolled users of --ratings (users "
                           "without ratings are enrolled empty); without it n_users is exact "
                           "and labelled not covered.")
_EVAL = typer.Option(True, "--eval/--no-eval",
                     help="Held-out metrics and baselines (exact on private data: labelled "
                          "not covered); --no-eval for a DP-only output.")
_ALGORITHM = typer.Option("dpam", "--algorithm", help="dpam | dpfedavg | dpftrl.")
_EPSILON = Annotated[float, option("epsilon", "User-level epsilon of the whole run (without "
                                             "it: give --non-private).")]
_DELTA = Annotated[float, option("delta", "User-level delta (<< 1/users).")]
_ROUNDS = typer.Option(..., "--rounds", help="Training rounds.")
_K = typer.Option(None, "--clients-per-round",
                  help="dpfedavg: expected sampled users; dpftrl: users per round "
                       "(default: users/10).")
_SEED = Annotated[int, option("seed", "Seed for reproducible noise (tests only; default "
                                      "CSPRNG).")]
_NONPRIVATE = typer.Option(False, "--non-private",
                           help="No clipping, no noise (a NOT private baseline).")
_MAX_USERS = typer.Option(None, "--max-users", help="Short runs: each user keeps its data "
                          "with probability N / (public user count), by a keyed hash of its "
                          "id (independent of the other users); the rest stay enrolled "
                          "without data (default: every user keeps its data). With "
                          "--ratings it needs --users.")
_SPLIT_SEED = typer.Option(0, "--split-seed", help="Seed of the per-user train/test split.")
_SET = typer.Option(None, "--set", help="Model hyperparameter KEY=VALUE (repeatable), e.g. "
                    "--set dim=8 --set item_reg=20 (default: the model's "
                    "own).")


def _parse_sets(sets: list[str] | None, dataset: str) -> dict[str, Any]:
    from privlab.federated.factorized import FactorizedConfig
    from privlab.federated.mlp import MLPConfig

    cls = FactorizedConfig if dataset == "movielens" else MLPConfig
    fields = {f.name: f.type for f in dataclasses.fields(cls)}
    out: dict[str, Any] = {}
    for item in sets or []:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or key not in fields:
            raise InvalidInputError(f"--set must be KEY=VALUE with KEY one of "
                                    f"{', '.join(sorted(fields))}, got {item!r}")
        try:
            out[key] = int(value) if fields[key] in ("int", int) else float(value)
        except ValueError:
            raise InvalidInputError(f"--set {key} needs a number, got {value!r}") from None
    return out


def _range(text: str | None, ratings: str | None = None,
           schema: str | None = None) -> tuple[float, float]:
    """--rating-range when given, else the rating bounds of the schema of --ratings."""
    from privlab.federated.data import MOVIELENS_RANGE, ratings_schema

    pair = parse_range(text, "--rating-range")
    if pair is not None:
        return pair
    if ratings is None:
        return MOVIELENS_RANGE
    return ratings_schema(schema)[1]


def _config(dataset: str, algorithm: str, epsilon: float | None, delta: float, rounds: int,
            clients_per_round: int | None, seed: int | None, non_private: bool,
            max_users: int | None, split_seed: int, sets: list[str] | None,
            ratings: str | None = None, movies: str | None = None,
            rating_range: str | None = None, schema: str | None = None,
            on_invalid: str = "refuse", users: int | None = None,
            allow_weak: bool = False) -> Any:
    from privlab.federated.factorized import FactorizedConfig
    from privlab.federated.mlp import MLPConfig
    from privlab.federated.simulation import RunConfig

    if non_private and epsilon is not None:
        raise InvalidInputError("--epsilon and --non-private exclude each other; pick one")
    if not non_private and epsilon is None:
        raise InvalidInputError("--epsilon is required (or --non-private for a NOT private "
                                "baseline)")
    if max_users is not None and max_users < 1:
        raise InvalidInputError(f"--max-users must be >= 1, got {max_users}")
    if max_users is not None and ratings is not None and users is None:
        # an option check, before any row is read: the same refusal on every table
        raise InvalidInputError("--max-users with --ratings needs --users U (the public "
                                "number of enrolled users): each user is kept with "
                                "probability N / U")
    # one delta policy in every command, before any row is read: against the declared public
    # number of users (--users) when given, else only the data-independent ceiling
    check_delta_policy(delta, allow_weak, public_size=users)
    overrides = _parse_sets(sets, dataset)
    kwargs: dict[str, Any] = {}
    if dataset == "movielens":
        kwargs["factorized"] = FactorizedConfig(**overrides)
    elif dataset == "adult":
        kwargs["mlp"] = MLPConfig(**overrides)
    return RunConfig(dataset=dataset, algorithm=algorithm,
                     epsilon=None if non_private else epsilon, delta=delta, rounds=rounds,
                     clients_per_round=clients_per_round, seed=seed, max_users=max_users,
                     split_seed=split_seed, ratings=ratings, movies=movies,
                     rating_range=_range(rating_range, ratings, schema), schema=schema,
                     on_invalid=on_invalid, declared_users=users, **kwargs)


def _summary(out: dict[str, Any]) -> None:
    g = out["guarantee"]
    console.print(g["headline"], highlight=False)
    if out["dataset"] == "movielens" and "test_rmse" in out:
        console.print(f"test RMSE [bold]{out['test_rmse']:.4f}[/bold] (exact, not covered)"
                      + (f"  (item-mean baseline {out['item_mean_rmse']:.4f}, local-only "
                         f"{out['local_only_rmse']:.4f})" if "item_mean_rmse" in out else ""))
    elif "test_accuracy" in out:
        console.print(f"test accuracy [bold]{out['test_accuracy']:.4f}[/bold] (exact, not "
                      "covered)" + (f"  (majority baseline {out['majority_accuracy']:.4f})"
                                    if "majority_accuracy" in out else ""))
    if g["epsilon"] is not None:
        console.print(f"user-level guarantee of {', '.join(g['covers']) or 'the release'}: "
                      f"({g['epsilon']:.4g}, {g['delta']:.3g})-DP, {g['mechanism']}; "
                      f"accountant {g['accountant']}", highlight=False)
    else:
        err_console.print("[yellow]warning:[/yellow] " + "; ".join(g["notes"]))


@federated_app.command("train")
def train_cmd(
    dataset: str = _DATASET, algorithm: str = _ALGORITHM, epsilon: _EPSILON = None,
    delta: _DELTA = 1e-5, allow_weak: AllowWeak = False, rounds: int = _ROUNDS,
    clients_per_round: int = _K,
    seed: _SEED = None, non_private: bool = _NONPRIVATE, max_users: int = _MAX_USERS,
    split_seed: int = _SPLIT_SEED, sets: list[str] = _SET,
    ratings: str = _RATINGS, movies: str = _MOVIES, rating_range: str = _RANGE,
    schema: _SCHEMA = None, on_invalid: _ON_INVALID = "refuse", users: int = _USERS,
    evaluate: bool = _EVAL,
    engine: str = typer.Option("vectorized", "--engine", help="vectorized | loop."),
    as_json: Json = False,
) -> None:
    """Simulate a whole training run in-process; report test RMSE / accuracy and the
    user-level guarantee."""
    from privlab.federated.simulation import train

    config = _config(dataset, algorithm, epsilon, delta, rounds, clients_per_round, seed,
                     non_private, max_users, split_seed, sets, ratings, movies, rating_range,
                     schema, on_invalid, users, allow_weak)
    from privlab.cli.progress import reporter

    with reporter("federated train", as_json) as report, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the non-private warning is printed below
        # no wall-clock timings: they grow with the data (benchmarks/ time the library);
        # progress per round (--rounds), never per client or user
        out = train(config, engine=engine, evaluate=evaluate, timings=False,
                    progress=lambda done, total: report("round", done, total))
    out.pop("_side", None)
    out["config"] = _public(config)
    if as_json:
        emit_json(out)
        return
    _summary(out)


def _public(config: Any) -> dict[str, Any]:
    return dataclasses.asdict(config)


@federated_app.command("serve")
def serve_cmd(
    dataset: str = _DATASET, algorithm: str = _ALGORITHM, epsilon: _EPSILON = None,
    delta: _DELTA = 1e-5, allow_weak: AllowWeak = False, rounds: int = _ROUNDS,
    clients_per_round: int = _K,
    seed: _SEED = None, non_private: bool = _NONPRIVATE, max_users: int = _MAX_USERS,
    split_seed: int = _SPLIT_SEED, sets: list[str] = _SET,
    ratings: str = _RATINGS, movies: str = _MOVIES, rating_range: str = _RANGE,
    schema: _SCHEMA = None, on_invalid: _ON_INVALID = "refuse", users: int = _USERS,
    address: str = typer.Option("127.0.0.1:8080", "--address", help="HOST:PORT to listen on."),
    num_clients: int = typer.Option(3, "--num-clients", help="Client processes to wait for."),
    round_timeout: float = typer.Option(600.0, "--round-timeout",
                                        help="Seconds before a silent client counts as "
                                             "failed."),
    connect_timeout: float = typer.Option(120.0, "--connect-timeout",
                                          help="Seconds to wait for the clients to connect."),
    as_json: Json = False,
) -> None:
    """Flower server: trusted aggregator + distributor + untrusted server, one run.

    With --ratings it reads the same file as the clients, for public facts only (user count,
    catalogue, declared range); the clients must be started with the same file options."""
    from privlab.federated.flower import serve

    config = _config(dataset, algorithm, epsilon, delta, rounds, clients_per_round, seed,
                     non_private, max_users, split_seed, sets, ratings, movies, rating_range,
                     schema, on_invalid, users, allow_weak)
    out = serve(config, address=address, num_clients=num_clients, round_timeout=round_timeout,
                connect_timeout=connect_timeout)
    out["config"] = _public(config)
    if as_json:
        emit_json(out)
        return
    _summary(out)


@federated_app.command("client")
def client_cmd(
    dataset: str = _DATASET,
    address: str = typer.Option("127.0.0.1:8080", "--address", help="Server HOST:PORT."),
    shard: int = typer.Option(0, "--shard", help="This node's shard (0-based)."),
    num_shards: int = typer.Option(1, "--num-shards", help="Number of client processes."),
    max_users: int = _MAX_USERS, split_seed: int = _SPLIT_SEED,
    ratings: str = _RATINGS, movies: str = _MOVIES, rating_range: str = _RANGE,
    schema: _SCHEMA = None, on_invalid: _ON_INVALID = "refuse", users: int = _USERS,
    fail_at_round: int = typer.Option(None, "--fail-at-round", hidden=True,
                                      help="Exit abruptly in this round (failure tests)."),
    max_wait_time: float = typer.Option(120.0, "--max-wait",
                                        help="Seconds to keep retrying the connection."),
    as_json: Json = False,
) -> None:
    """Flower client: a device node holding users shard, shard+P, ... of the dataset (or of
    the --ratings file, with the server's --movies and --rating-range)."""
    from privlab.federated.flower import run_client

    out = run_client(dataset, address=address, shard=shard, num_shards=num_shards,
                     split_seed=split_seed, max_users=max_users, fail_at_round=fail_at_round,
                     max_wait_time=max_wait_time, ratings=ratings, movies=movies,
                     rating_range=_range(rating_range, ratings, schema), schema=schema,
                     on_invalid=on_invalid, declared_users=users)
    if as_json:
        emit_json(out)
        return
    console.print(f"client shard {shard}/{num_shards} served {out['users']} users")


def register(app: typer.Typer) -> None:
    app.add_typer(federated_app, name="federated")


def main(argv: list[str] | None = None) -> int:
    """The `privlab federated` verbs alone, with the CLI's one error-to-exit-code mapping."""
    from privlab.cli.exits import run_command

    return run_command(federated_app, argv, "privlab federated")


if __name__ == "__main__":
    sys.exit(main())
