"""`PrivacyGuarantee`: the privacy claim that travels with every released value.

Modelled on OpenDP's "the privacy claim is data": a frozen record of epsilon, delta, the
neighbouring relation, the trust model and the accountant, serialisable to JSON. A setting
that is not differentially private is represented with `is_dp=False` and says so in `notes`.

`covers` names what the (epsilon, delta) claim protects (e.g. "synthetic rows", "model
weights"); `not_covered` names every released or printed value that was computed from the
private rows outside it (e.g. "train_accuracy (exact, on the training rows)"). `is_dp` is
true only when `not_covered` is empty: a release with one exact statistic beside its noisy
ones is NOT differentially private, and its headline says so (docs/guarantees.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from privlab.errors import InvalidInputError

Model = Literal["central", "local"]

#: What "neighbouring" means for each relation privlab uses (docs/guarantees.md has more).
NEIGHBOURING = {
    "add_remove_record": "datasets differ by adding or removing one record",
    "replace_record": "datasets differ by replacing one record with another",
    "user": "datasets differ by all records of one user (user-level DP)",
    "location_event": "one location report differs (event-level local DP)",
    "location_radius": ("two true locations within the protection radius r "
                        "(geo-indistinguishability)"),
    "trajectory": "one user's whole trajectory differs (local DP on that trajectory)",
    "none": "no neighbouring relation: this setting is NOT differentially private",
}


def check_epsilon(epsilon: float, name: str = "epsilon") -> float:
    """Validate a privacy parameter epsilon: finite and > 0."""
    try:
        value = float(epsilon)
    except (TypeError, ValueError):
        raise InvalidInputError(f"{name} must be a number > 0, got {epsilon!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise InvalidInputError(f"{name} must be a finite number > 0, got {epsilon!r}")
    return value


def check_delta(delta: float, name: str = "delta") -> float:
    """Validate delta: 0 <= delta < 1."""
    try:
        value = float(delta)
    except (TypeError, ValueError):
        raise InvalidInputError(f"{name} must be a number in [0, 1), got {delta!r}") from None
    if not math.isfinite(value) or value < 0 or value >= 1:
        raise InvalidInputError(f"{name} must be in [0, 1), got {delta!r}")
    return value


@dataclass(frozen=True)
class PrivacyGuarantee:
    """An (epsilon, delta) claim with the context needed to interpret it.

    `epsilon` may be `math.inf` only when `is_dp` is False (a non-private setting).
    """

    epsilon: float
    delta: float = 0.0
    neighbouring: str = "add_remove_record"
    model: Model = "central"
    mechanism: str = ""
    accountant: str = "basic"
    is_dp: bool = True
    notes: tuple[str, ...] = field(default_factory=tuple)
    covers: tuple[str, ...] = field(default_factory=tuple)
    not_covered: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        object.__setattr__(self, "covers", tuple(str(c) for c in self.covers))
        object.__setattr__(self, "not_covered", tuple(str(c) for c in self.not_covered))
        if self.not_covered and self.is_dp:
            # something data-dependent leaves outside the claim: the release is not DP
            object.__setattr__(self, "is_dp", False)
        if self.is_dp:
            check_epsilon(self.epsilon)
            check_delta(self.delta)
            if self.neighbouring == "none":
                raise InvalidInputError("a DP guarantee needs a neighbouring relation, not 'none'")
        if self.neighbouring not in NEIGHBOURING:
            raise InvalidInputError(
                f"neighbouring must be one of {sorted(NEIGHBOURING)}, got {self.neighbouring!r}"
            )
        if self.model not in ("central", "local"):
            raise InvalidInputError(f"model must be 'central' or 'local', got {self.model!r}")

    @classmethod
    def not_private(cls, mechanism: str, reason: str, model: Model = "central") -> PrivacyGuarantee:
        """The guarantee of a setting that is NOT differentially private, with the reason."""
        return cls(
            epsilon=math.inf,
            delta=1.0,
            neighbouring="none",
            model=model,
            mechanism=mechanism,
            accountant="none",
            is_dp=False,
            notes=(f"NOT differentially private: {reason}",),
        )

    def with_notes(self, *notes: str) -> PrivacyGuarantee:
        return replace(self, notes=self.notes + tuple(notes))

    def with_covers(self, *items: str) -> PrivacyGuarantee:
        """The same claim, also naming what it protects."""
        return replace(self, covers=tuple(dict.fromkeys(self.covers + tuple(items))))

    def with_not_covered(self, *items: str) -> PrivacyGuarantee:
        """The same mechanism, with values released outside the claim: no longer DP."""
        if not items:
            return self
        return replace(self, not_covered=tuple(dict.fromkeys(self.not_covered + tuple(items))))

    @property
    def claim(self) -> str:
        """The (epsilon, delta) claim of the covered parts, e.g. "(1, delta=1e-06)-DP"."""
        if not math.isfinite(self.epsilon):
            return "no DP claim"
        d = f", delta={self.delta:.3g}" if self.delta else ""
        return f"({self.epsilon:.4g}{d})-DP"

    def headline(self) -> str:
        """What a CLI prints first: "(eps, delta)-DP" only when the whole release is DP,
        otherwise "NOT differentially private: <reasons>"."""
        if self.is_dp:
            return self.claim
        reasons = [f"not covered: {', '.join(self.not_covered)}"] if self.not_covered else []
        reasons += [n.removeprefix("NOT differentially private: ") for n in self.notes
                    if n.startswith("NOT differentially private")]
        return "NOT differentially private: " + ("; ".join(reasons) or self.mechanism)

    def describe(self) -> str:
        """One human sentence, e.g. for a report or a CLI summary."""
        if not self.is_dp and (not self.not_covered or not math.isfinite(self.epsilon)):
            return f"{self.mechanism}: " + "; ".join(self.notes + tuple(
                f"not covered: {c}" for c in self.not_covered))
        text = (
            f"{self.claim}, {self.model} model, neighbouring: "
            f"{NEIGHBOURING[self.neighbouring]}; mechanism {self.mechanism}; "
            f"accountant {self.accountant}"
        )
        if self.not_covered:
            text = (f"{self.headline()}. The noisy parts are {text}")
        return text

    def to_dict(self) -> dict[str, Any]:
        return {
            "epsilon": self.epsilon if math.isfinite(self.epsilon) else None,
            "delta": self.delta,
            "neighbouring": self.neighbouring,
            "neighbouring_meaning": NEIGHBOURING[self.neighbouring],
            "model": self.model,
            "mechanism": self.mechanism,
            "accountant": self.accountant,
            "is_dp": self.is_dp,
            "headline": self.headline(),
            "covers": list(self.covers),
            "not_covered": list(self.not_covered),
            "notes": list(self.notes),
        }
