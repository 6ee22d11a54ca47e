"""Per-user data: split, public features, and the bad inputs the issue names."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from privlab.errors import InvalidInputError
from privlab.federated.data import movie_features, ratings_from_frames, split_per_user

MOVIES = pd.DataFrame({"movieId": [1, 2, 3],
                       "title": ["A (1995)", "B (2001)", "C"],
                       "genres": ["Comedy|Drama", "Drama", "(no genres listed)"]})


def test_split_is_per_user_and_sized():
    indptr = np.array([0, 10, 10, 13, 33])
    mask = split_per_user(indptr, 0.2, seed=3)
    per_user = [mask[a:b].sum() for a, b in zip(indptr[:-1], indptr[1:], strict=True)]
    assert per_user == [2, 0, 0, 4]
    assert not np.array_equal(mask, split_per_user(indptr, 0.2, seed=4))


def test_a_users_split_depends_on_its_own_id_and_rows_only():
    """Regression (issue 29): one stream consumed user by user gave user 7 another split as
    soon as a user with rows was added before it."""
    alone = split_per_user(np.array([0, 24]), 0.25, seed=3, user_ids=np.array([7]))
    after = split_per_user(np.array([0, 13, 37]), 0.25, seed=3, user_ids=np.array([2, 7]))
    assert alone.sum() == 6 and np.array_equal(after[13:], alone)
    assert not np.array_equal(split_per_user(np.array([0, 24]), 0.25, seed=3,
                                             user_ids=np.array([8])), alone)


def test_movie_features_are_public_catalogue_columns():
    ids, feats, names = movie_features(MOVIES)
    assert list(ids) == [1, 2, 3]
    assert names[:3] == ("genre:(no genres listed)", "genre:Comedy", "genre:Drama")
    assert feats[0, 1] == feats[0, 2] == 1 and feats[1, 1] == 0
    assert feats[0, 3] == pytest.approx((1995 - 1990) / 30) and feats[2, 4] == 1.0  # no year


def test_ratings_outside_declared_range_are_rejected():
    frame = pd.DataFrame({"userId": [1, 1], "movieId": [1, 2], "rating": [4.0, 7.5]})
    with pytest.raises(InvalidInputError, match=r"rating: a value outside.*\[0.5, 5\]"):
        ratings_from_frames(frame, MOVIES)
    frame.loc[1, "rating"] = float("nan")
    with pytest.raises(InvalidInputError, match="rating"):
        ratings_from_frames(frame, MOVIES)
    # the same value is fine once the range is declared to contain it
    frame.loc[1, "rating"] = 7.5
    assert ratings_from_frames(frame, MOVIES, rating_range=(0, 10)).train.nnz >= 1


def test_users_with_no_ratings_are_enrolled_empty_clients():
    frame = pd.DataFrame({"userId": [1, 1, 1, 1, 1], "movieId": [1, 2, 3, 1, 2],
                          "rating": [4.0, 3.0, 5.0, 4.0, 2.0]}).iloc[:3]
    data = ratings_from_frames(frame, MOVIES, users=[1, 7, 9])
    assert list(data.user_ids) == [1, 7, 9]
    assert list(data.train.counts() + data.test.counts()) == [3, 0, 0]


def test_other_bad_inputs_name_the_field():
    frame = pd.DataFrame({"userId": [1, 1], "movieId": [1, 1], "rating": [4.0, 3.0]})
    with pytest.raises(InvalidInputError, match="same movie twice"):
        ratings_from_frames(frame, MOVIES)
    with pytest.raises(InvalidInputError, match="movieId: a rating refers to a movie missing"):
        ratings_from_frames(pd.DataFrame({"userId": [1], "movieId": [99], "rating": [3.0]}),
                            MOVIES)
    with pytest.raises(InvalidInputError, match="not in `users`"):
        ratings_from_frames(pd.DataFrame({"userId": [5], "movieId": [1], "rating": [3.0]}),
                            MOVIES, users=[1])
    with pytest.raises(InvalidInputError, match="rating_range"):
        ratings_from_frames(frame, MOVIES, rating_range=(5, 1))
    with pytest.raises(InvalidInputError, match="column 'rating'"):
        ratings_from_frames(frame.drop(columns="rating"), MOVIES)


def test_movielens_task_shape(small_movielens):
    data = small_movielens
    assert data.n_users == 40 and data.n_items == 9742
    assert data.item_features.shape == (9742, len(data.feature_names))
    counts = data.train.counts() + data.test.counts()
    assert (data.test.counts() == np.floor(0.2 * counts)).all()


def test_rows_without_movie_and_rating_enrol_users_without_ratings():
    frame = pd.DataFrame({"userId": [1, 1, 7, 9, 1], "movieId": [1, 2, None, None, 3],
                          "rating": [4.0, 3.0, None, None, 5.0], "timestamp": [0] * 5})
    data = ratings_from_frames(frame, MOVIES)
    assert list(data.user_ids) == [1, 7, 9]
    assert list(data.train.counts() + data.test.counts()) == [3, 0, 0]
    # an enrolment row for a user who also has ratings changes nothing
    frame.loc[2, "userId"] = 1
    assert list(ratings_from_frames(frame, MOVIES).user_ids) == [1, 9]
    with pytest.raises(InvalidInputError, match=r"^rating: a row with a movieId but no "):
        ratings_from_frames(frame.assign(movieId=[1, 2, 3, None, 3]).iloc[[0, 2]], MOVIES)
    with pytest.raises(InvalidInputError, match=r"^movieId: a value in .* not a whole"):
        ratings_from_frames(frame.assign(movieId=[1, 2.5, None, None, 3]), MOVIES)
