"""The privacy boundary and the trusted aggregator's per-user clipping."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest

from privlab.federated.accounting import Plan, RunAccountant
from privlab.federated.data import Interactions, RatingsData, ratings_from_frames
from privlab.federated.messages import (
    Contributions,
    NoisyAggregate,
    Part,
    PrivacyBoundaryError,
    RoundInstructions,
)
from privlab.federated.roles import Client, TrustedAggregator, TrustedDistributor
from privlab.federated.simulation import RunConfig, train
from privlab.federated.tasks import make_batch


def _walk(obj, seen=None):
    """Every object reachable from obj's attributes (to audit what the server holds)."""
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return
    seen.add(id(obj))
    yield obj
    children = []
    if isinstance(obj, dict):
        children = list(obj.keys()) + list(obj.values())
    elif isinstance(obj, (list, tuple, set)):
        children = list(obj)
    elif hasattr(obj, "__dict__") and not isinstance(obj, type):
        children = list(vars(obj).values())
    elif hasattr(obj, "__dataclass_fields__"):
        children = [getattr(obj, f) for f in obj.__dataclass_fields__]
    for child in children:
        yield from _walk(child, seen)


@pytest.mark.parametrize("algorithm", ["dpam", "dpfedavg", "dpftrl"])
def test_server_never_receives_user_embeddings_or_raw_ratings(small_movielens, algorithm):
    data = small_movielens
    out = train(RunConfig(algorithm=algorithm, epsilon=4.0, rounds=3, seed=5,
                          clients_per_round=10), data, baselines=False)
    side = out["_side"]
    server = side.server
    assert len(server.inbox) == 3
    # 1. only DP outputs, each with noise on every coordinate
    for msg in server.inbox:
        assert type(msg) is NoisyAggregate
        assert all(std > 0 for std in msg.noise_std.values())
        for name, value in msg.values.items():
            assert value.shape[0] in (data.n_items, 1), name  # item-indexed, never per user
    # 2. no user embedding: the users' local parameters at the final published model
    client = Client(side.model, make_batch(data))
    dist = TrustedDistributor()
    dist.load(server.publish())
    theta = side.model.local_solve(client._batch, dist.fetch(client.needs()))
    embeddings = theta[:, : side.model.dim]
    ratings = data.train.values
    for obj in _walk(server):
        if isinstance(obj, np.ndarray) and obj.dtype.kind == "f" and obj.size:
            flat = obj.reshape(-1, obj.shape[-1]) if obj.ndim > 1 else obj[None, :]
            if flat.shape[1] == embeddings.shape[1]:
                dist_min = np.abs(flat[:, None, :] - embeddings[None, :, :]).max(axis=2).min()
                assert dist_min > 1e-9
            # no vector of a user's raw ratings
            for u in range(data.n_users):
                r = ratings[data.train.indptr[u]: data.train.indptr[u + 1]]
                assert not (obj.size == r.size and np.allclose(obj.ravel(), r))
        # 3. the server holds no client-side object
        assert not isinstance(obj, (Client, Contributions, Interactions, RatingsData, Part))


def test_server_refuses_anything_but_a_noisy_aggregate(small_movielens):
    out = train(RunConfig(epsilon=4.0, rounds=1, seed=1), small_movielens, baselines=False)
    server = out["_side"].server
    raw = Contributions(np.array([0]), {})
    with pytest.raises(PrivacyBoundaryError, match="only NoisyAggregate"):
        server.receive(raw)
    with pytest.raises(PrivacyBoundaryError, match="only NoisyAggregate"):
        server.receive({"gram": np.zeros((3, 3))})
    with pytest.raises(PrivacyBoundaryError, match="only be created by the TrustedAggregator"):
        NoisyAggregate(0, "sum", {}, {}, {}, 1.0)


def _aggregator(sigma: float, clip: float, algorithm: str = "dpam", n_users: int = 3):
    plan = Plan(algorithm, rounds=5, n_users=n_users, noise_multiplier=sigma, n_parts=1,
                clients_per_round=n_users)
    acc = RunAccountant(plan, 1e-5)
    agg = TrustedAggregator(plan, {"t": (4, 2)}, {"t": clip}, "update", acc,
                            np.random.default_rng(0))
    return agg, acc


def _contrib(users, rows_per_user, values):
    ptr = np.concatenate([[0], np.cumsum([len(r) for r in rows_per_user])])
    return Contributions(np.array(users), {"t": Part(4, 2, ptr, np.concatenate(rows_per_user),
                                                     np.asarray(values, dtype=float))})


def test_each_users_whole_contribution_is_clipped_before_summation():
    # user 0: two rows, joint norm 10 -> scaled by 1/10 (not row by row);
    # user 1: one row of norm 0.5 -> untouched; user 2: norm 5 -> scaled by 1/5
    values = [[6.0, 0.0], [0.0, 8.0], [0.3, 0.4], [3.0, 4.0]]
    contrib = _contrib([0, 1, 2], [np.array([0, 1]), np.array([1]), np.array([1])], values)
    agg, acc = _aggregator(sigma=1e-12, clip=1.0)
    out = agg.aggregate(RoundInstructions(0, "update", np.arange(3)), [contrib])
    expected = np.zeros((4, 2))
    expected[0] = [0.6, 0.0]
    expected[1] = [0.0, 0.8] + np.array([0.3, 0.4]) + np.array([0.6, 0.8])
    np.testing.assert_allclose(out.values["t"], expected, atol=1e-9)
    # summing first and clipping the sum would give a different (wrong) table
    total = np.zeros((4, 2))
    total[0], total[1] = [6, 0], [3.3, 12.4]
    assert not np.allclose(out.values["t"], total / np.linalg.norm(total))
    assert agg.report.clipped_fraction == [pytest.approx(2 / 3)]
    assert len(acc.events) == 1  # the release was charged


def test_aggregator_drops_duplicates_non_participants_and_non_finite():
    agg, _ = _aggregator(sigma=1e-12, clip=100.0)
    good = _contrib([0], [np.array([0])], [[1.0, 1.0]])
    again = _contrib([0], [np.array([2])], [[5.0, 5.0]])  # user 0 a second time
    outsider = _contrib([2], [np.array([3])], [[7.0, 7.0]])  # not sampled this round
    bad = _contrib([1], [np.array([3])], [[math.nan, 1.0]])
    out = agg.aggregate(RoundInstructions(0, "update", np.array([0, 1])),
                        [good, again, outsider, bad])
    expected = np.zeros((4, 2))
    expected[0] = 1.0
    np.testing.assert_allclose(out.values["t"], expected, atol=1e-9)
    assert len(agg.report.dropped) == 3


def test_noise_has_the_calibrated_scale():
    agg, _ = _aggregator(sigma=2.0, clip=0.5)
    draws = np.concatenate([
        agg.aggregate(RoundInstructions(t, "update", np.arange(3)), [None]).values["t"].ravel()
        for t in range(5)])
    # 40 draws of N(0, 1): the sample std is within 5 sigma-of-std of 1.0
    assert abs(draws.std() - 1.0) < 5 * (1.0 / math.sqrt(2 * len(draws)))


def test_enrolled_users_without_ratings_train_without_error():
    movies = pd.DataFrame({"movieId": np.arange(1, 21), "title": ["M (2000)"] * 20,
                           "genres": ["Drama"] * 20})
    rng = np.random.default_rng(0)
    rows = [(u, m, float(rng.integers(1, 6))) for u in range(1, 9)
            for m in rng.choice(np.arange(1, 21), 8, replace=False)]
    frame = pd.DataFrame(rows, columns=["userId", "movieId", "rating"])
    data = ratings_from_frames(frame, movies, users=list(range(1, 13)))  # 4 without ratings
    for algorithm in ("dpam", "dpfedavg", "dpftrl"):
        out = train(RunConfig(algorithm=algorithm, epsilon=2.0, rounds=2, seed=0,
                              clients_per_round=4), data)
        assert math.isfinite(out["test_rmse"]) and out["n_users"] == 12
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = train(RunConfig(epsilon=None, rounds=2, seed=0), data)
    assert out["guarantee"]["is_dp"] is False
    assert any("NOT differentially private" in str(w.message) for w in caught)
