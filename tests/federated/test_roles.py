"""The privacy boundary and the trusted aggregator's per-user clipping."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest

from privlab.federated.accounting import Plan, RunAccountant
from privlab.federated.data import Interactions, RatingsData, ratings_from_frames
from privlab.federated.factorized import FactorizedModel
from privlab.federated.messages import (
    Contributions,
    NoisyAggregate,
    Part,
    PrivacyBoundaryError,
    RoundInstructions,
)
from privlab.federated.roles import Client, Server, TrustedAggregator
from privlab.federated.simulation import RunConfig, train


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


def _float_arrays(obj):
    """Every float array reachable from obj, lists/tuples of numbers included."""
    for item in _walk(obj):
        if isinstance(item, np.ndarray) and item.dtype.kind == "f" and item.size:
            yield item
        elif isinstance(item, (list, tuple)) and len(item) > 1 and all(
                isinstance(v, (float, np.floating)) for v in item):
            yield np.asarray(item, dtype=float)


def _runs_found(haystack, needles):
    """Indices of `needles` (1-d vectors) that occur BY VALUE as a contiguous run of the
    haystack's values, read row-major or column-major, whatever the haystack's shape."""
    found = set()
    for flat in {id(a): a for a in (haystack.ravel(), haystack.T.ravel())}.values():
        order = np.argsort(flat, kind="stable")
        ranked = flat[order]
        for k, v in enumerate(needles):
            if k in found or len(v) > len(flat):
                continue
            j = int(np.argmax(np.abs(v)))  # anchor on the most distinctive entry
            tol = 1e-9 * max(1.0, float(np.abs(v).max()))
            lo = np.searchsorted(ranked, v[j] - tol, side="left")
            hi = np.searchsorted(ranked, v[j] + tol, side="right")
            starts = order[lo:hi] - j
            starts = starts[(starts >= 0) & (starts + len(v) <= len(flat))]
            if len(starts) == 0:
                continue
            windows = np.lib.stride_tricks.sliding_window_view(flat, len(v))[starts]
            if (np.abs(windows - v).max(axis=1) <= tol).any():
                found.add(k)
    return found


def _scattered_ratings_found(haystack, users):
    """Users whose rating vector sits in an item-indexed haystack at its items' rows."""
    found = set()
    table = haystack.reshape(len(haystack), -1)
    for u, (items, values) in enumerate(users):
        if (np.abs(table[items] - values[:, None]) <= 1e-9).all(axis=0).any():
            found.add(u)
    return found


@pytest.mark.parametrize("algorithm", ["dpam", "dpfedavg", "dpftrl"])
def test_server_never_receives_user_embeddings_or_raw_ratings(small_movielens, algorithm,
                                                              monkeypatch):
    """Record every local parameter vector a client holds in every round and every raw rating
    vector; no message the server receives (nor anything it holds) contains one, by value."""
    data = small_movielens
    local, received, true_sums = [], [], []
    solve, receive, clip_and_sum = (FactorizedModel.local_solve, Server.receive,
                                    TrustedAggregator._clip_and_sum)

    def spy_solve(self, batch, subset):  # runs on the device, every round and at evaluation
        theta = solve(self, batch, subset)
        local.append((batch.users.copy(), theta.copy()))
        return theta

    def spy_receive(self, message):  # the server's only inbound channel
        received.append(message)
        return receive(self, message)

    def spy_sums(self, contrib):  # inside the aggregator: the exact clipped sums, pre-noise
        sums = clip_and_sum(self, contrib)
        true_sums.append({k: v.copy() for k, v in sums.items()})
        return sums

    monkeypatch.setattr(FactorizedModel, "local_solve", spy_solve)
    monkeypatch.setattr(Server, "receive", spy_receive)
    monkeypatch.setattr(TrustedAggregator, "_clip_and_sum", spy_sums)
    out = train(RunConfig(algorithm=algorithm, epsilon=4.0, rounds=3, seed=5,
                          clients_per_round=10), data, baselines=False)
    server, model = out["_side"].server, out["_side"].model
    d = model.dim
    assert len(received) == len(true_sums) == len(server.inbox) == 3
    assert all(a is b for a, b in zip(server.inbox, received, strict=True))
    ratings = []
    for part in (data.train, data.test):
        for u in range(data.n_users):
            a, b = part.indptr[u], part.indptr[u + 1]
            ratings.append((part.items[a:b], part.values[a:b]))
    assert all(len(values) >= 2 for _, values in ratings)

    # 1. only NoisyAggregates, noise declared on every released part and really added
    prefix = {}
    for msg, sums in zip(received, true_sums, strict=True):
        assert type(msg) is NoisyAggregate
        assert sorted(msg.values) == sorted(msg.noise_std) == sorted(sums)
        for name, value in msg.values.items():
            std = msg.noise_std[name]
            assert std > 0, name
            expected = sums[name]
            if msg.kind == "prefix_sum":  # DP-FTRL: tree noise of popcount(step + 1) nodes
                prefix[name] = (prefix.get(name, 0) if msg.step_in_epoch else 0) + expected
                expected = prefix[name]
                std = std * math.sqrt(bin(msg.step_in_epoch + 1).count("1"))
            noise = (value - expected).ravel()
            # n >= 48,710 N(0, std^2) draws: the sample std is within 6 / sqrt(2n) of std
            assert abs(noise.std() / std - 1) < 6 / math.sqrt(2 * noise.size), name
            assert abs(noise.mean()) < 6 * std / math.sqrt(noise.size), name

    # the clients really held local parameters every round (3 rounds + the evaluation); an
    # all-zero vector (a user whose rated items were all zeroed) identifies nobody, so skip it
    assert len(local) == 4 and local[-1][0].tolist() == list(range(data.n_users))
    assert all(theta.shape == (len(users), model.p) for users, theta in local)
    held = sum(len(users) for users, _ in local)
    embeddings = [row[:d] for _, theta in local for row in theta if np.abs(row[:d]).max() > 0]
    feature_weights = [row[d + 1:] for _, theta in local for row in theta]
    assert held > data.n_users and len(embeddings) >= 0.9 * held
    assert all(np.abs(w).max() > 0 for w in feature_weights)

    # 2. by value: no local parameter vector and no rating vector, in any received message or
    # anywhere the server can reach (its parameters, inbox, model object)
    haystacks = list({id(a): a for obj in (received, server) for a in _float_arrays(obj)}
                     .values())
    assert sum(a.size for a in haystacks) > 3 * data.n_items
    for hay in haystacks:
        assert not _runs_found(hay, embeddings), "a user embedding reached the server"
        assert not _runs_found(hay, feature_weights), "a user's local weights reached the server"
        assert not _runs_found(hay, [v for _, v in ratings]), "a rating vector reached the server"
        if len(hay) == data.n_items:
            assert not _scattered_ratings_found(hay, ratings), "ratings reached the server"

    # 3. the server holds no client-side object
    for obj in _walk(server):
        assert not isinstance(obj, (Client, Contributions, Interactions, RatingsData, Part))


def test_the_boundary_audit_detects_a_forwarded_embedding_or_rating_vector():
    """The helpers above are what makes the audit fail: check that they find real leaks."""
    rng = np.random.default_rng(0)
    table = rng.normal(size=(50, 5))
    emb = rng.normal(size=4)
    ratings = (np.array([3, 7, 9]), np.array([4.0, 2.5, 5.0]))
    assert not _runs_found(table, [emb]) and not _scattered_ratings_found(table, [ratings])
    leaked = table.copy()
    leaked[17, 1:] = emb  # inside a row
    assert _runs_found(leaked, [emb]) == {0}
    leaked = table.copy()
    leaked[20:24, 2] = emb  # down a column
    assert _runs_found(leaked, [emb]) == {0}
    assert _runs_found(np.concatenate([[0.1], emb]), [emb]) == {0}  # in a flat vector
    assert _runs_found(table, [table[3, 1:5]]) == {0}  # any shape, not just width 4
    assert _runs_found(np.asarray([[2.0, 4.0, 2.5, 5.0]]), [ratings[1]]) == {0}
    leaked = table.copy()
    leaked[ratings[0], 3] = ratings[1]  # scattered to the items' rows
    assert _scattered_ratings_found(leaked, [ratings]) == {0}
    # and a near miss (noise of 1e-6) is not a match
    assert not _runs_found(table + 1e-6, [table[3, 1:5]])


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


@pytest.mark.parametrize("algorithm", ["dpfedavg", "dpftrl"])
def test_a_users_participation_depends_on_its_own_id(algorithm):
    """Regression (issue 29): participants were drawn from one stream over the positions, so
    enrolling user 0 (sorted first) moved every other user's coins. Each user's Poisson coin
    (DP-FedAvg) and shuffle key (DP-FTRL) is now a keyed hash of (round or epoch, its id)."""
    def draws(ids):
        plan = Plan(algorithm, rounds=8, n_users=len(ids), noise_multiplier=1.0, n_parts=1,
                    clients_per_round=5)
        agg = TrustedAggregator(plan, {"t": (4, 2)}, {"t": 1.0}, "update",
                                RunAccountant(plan, 1e-5), np.random.default_rng(0),
                                user_ids=np.asarray(ids))
        if algorithm == "dpftrl":  # the order of the users in the epoch's shuffle
            agg.instructions(0)
            return [ids[p] for p in agg._order]
        return [{ids[p] for p in agg.instructions(r).participants} for r in range(8)]

    ids = list(range(1, 21))
    with_zero = [0, *ids[:-1]]  # user 0 enrolled, user 20 gone: the same public n
    common = set(ids) & set(with_zero)
    a, b = draws(ids), draws(with_zero)
    if algorithm == "dpftrl":
        assert [u for u in a if u in common] == [u for u in b if u in common]
    else:
        assert any(a) and [r & common for r in a] == [r & common for r in b]
