"""`covers` / `not_covered`: a release with anything exact outside its claim is not DP."""

from __future__ import annotations

from privlab.core.guarantee import PrivacyGuarantee


def test_not_covered_turns_is_dp_off_and_the_headline_says_why():
    g = PrivacyGuarantee(1.0, 1e-6, mechanism="DP-SGD", accountant="PLD")
    assert g.is_dp and g.headline() == "(1, delta=1e-06)-DP"
    g = g.with_covers("model weights")
    assert g.is_dp and g.to_dict()["covers"] == ["model weights"]
    h = g.with_not_covered("train_accuracy (exact)", "rows")
    assert not h.is_dp
    assert h.headline() == "NOT differentially private: not covered: train_accuracy (exact), rows"
    d = h.to_dict()
    assert d["is_dp"] is False and d["not_covered"] == ["train_accuracy (exact)", "rows"]
    assert d["epsilon"] == 1.0  # the noisy parts keep their claim
    assert h.describe().startswith("NOT differentially private")
    assert "(1, delta=1e-06)-DP" in h.describe()
    # adding nothing keeps the claim
    assert g.with_not_covered() is g


def test_constructor_with_not_covered_is_not_dp():
    g = PrivacyGuarantee(2.0, not_covered=("exact count",))
    assert not g.is_dp
    assert "exact count" in g.headline()


def test_not_private_headline():
    g = PrivacyGuarantee.not_private("window mean", "bounds from the data")
    assert g.headline() == "NOT differentially private: bounds from the data"
