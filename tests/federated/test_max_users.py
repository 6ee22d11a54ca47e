"""`--max-users N`: which users keep their data must not depend on the other users.

Regression (issue 21, item 5): the option kept the first N users by id, so adding one user
with a small id evicted another and one-user neighbours differed by two users. Now each user
is kept iff a keyed hash of its own id falls below N / (public user count).
"""

from __future__ import annotations

import numpy as np
import pytest

from privlab.errors import InvalidInputError
from privlab.federated.data import (
    RatingsData,
    keyed_user_selection,
    load_movielens_task,
    pad_users,
    ratings_from_frames,
    select_users,
)


def test_adding_a_user_changes_no_other_users_selection() -> None:
    ids = np.arange(100, 400)
    kept = dict(zip(ids.tolist(), keyed_user_selection(ids, 30, 300).tolist(), strict=True))
    for newcomer in (0, 1, 99, 5000):  # small ids first: the old rule evicted user 100+N-1
        more = np.concatenate([[newcomer], ids])
        again = dict(zip(more.tolist(), keyed_user_selection(more, 30, 300).tolist(),
                         strict=True))
        assert all(again[u] == kept[u] for u in ids.tolist())
    # and removing one changes nobody else's either
    fewer = ids[1:]
    assert keyed_user_selection(fewer, 30, 300).tolist() == [kept[u] for u in fewer.tolist()]


def test_expected_count_and_key() -> None:
    ids = np.arange(20_000)
    n = int(keyed_user_selection(ids, 1_000, 20_000).sum())
    # Binomial(20000, 0.05): sd ~ 30.8; 5 sd
    assert abs(n - 1_000) < 155
    other = keyed_user_selection(ids, 1_000, 20_000, split_seed=1)
    assert (other != keyed_user_selection(ids, 1_000, 20_000)).any()  # the key is the seed
    assert keyed_user_selection(ids[:10], 50, 10).all()  # N >= population keeps everybody
    with pytest.raises(InvalidInputError, match="max_users must be >= 1"):
        keyed_user_selection(ids, 0, 10)


def _ratings(users: list[int]) -> RatingsData:
    import pandas as pd

    rows = [(u, m, 3.0 + (u + m) % 2) for u in users for m in range(1, 6)]
    frame = pd.DataFrame(rows, columns=["userId", "movieId", "rating"])
    return ratings_from_frames(frame, None, rating_range=(0.5, 5.0))


def test_one_added_user_leaves_the_others_data_and_the_user_count_unchanged() -> None:
    base = list(range(10, 60))
    for newcomer in (1, 2, 3):
        d = select_users(pad_users(_ratings(base), 80), 10)
        d2 = select_users(pad_users(_ratings([newcomer] + base), 80), 10)
        assert d.n_users == d2.n_users == 80  # the public count, not the number kept
        counts = dict(zip(d.user_ids.tolist(), d.train.counts().tolist(), strict=True))
        counts2 = dict(zip(d2.user_ids.tolist(), d2.train.counts().tolist(), strict=True))
        assert all(counts[u] == counts2[u] for u in base)  # nobody else gained or lost data
        kept = sum(counts[u] > 0 for u in base)
        assert 0 < kept < len(base)


def test_bundled_movielens_keeps_hash_selected_users_not_the_first() -> None:
    data = load_movielens_task(max_users=40)
    assert data.n_users == 610
    with_data = data.user_ids[(data.train.counts() + data.test.counts()) > 0]
    assert 15 < with_data.size < 70
    assert with_data.tolist() != list(range(1, with_data.size + 1))  # not the first N ids


def test_max_users_without_users_is_refused_before_any_file_is_read(tmp_path) -> None:
    """The refusal depends only on the options: it comes before reading (a missing file is
    not even opened)."""
    from privlab.federated.data import load_ratings_files

    with pytest.raises(InvalidInputError, match="max_users with --ratings needs --users U"):
        load_ratings_files(tmp_path / "absent.csv", max_users=5)
