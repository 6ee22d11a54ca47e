"""A ledger's amounts: exact decimals, never floats.

A float is read through its shortest repr (0.1 is exactly 1/10), stored as canonical decimal
text and added with `decimal` under a context that traps any rounding: ten charges of 0.1
exhaust a budget of 1.0 exactly, an eleventh is refused, and no float drift accumulates over
thousands of charges. Amounts finer than `QUANTUM` are rounded conservatively (charges up,
budgets down). Also here: the checks of the other values a charge or a budget carries (a
principal's name, the guarantee stored with a charge).
"""

from __future__ import annotations

import functools
import json
import math
import numbers
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import (
    ROUND_CEILING,
    ROUND_FLOOR,
    Context,
    Decimal,
    DivisionByZero,
    Inexact,
    InvalidOperation,
    Overflow,
    Rounded,
)
from typing import Any

from privlab.errors import InvalidInputError
from privlab.utils.text import escape_nul

#: Largest epsilon a budget or a charge may carry (larger is not a privacy budget).
MAX_EPSILON = Decimal(10) ** 9
#: Amounts finer than this are rounded: charges up, budgets down (conservative both ways).
QUANTUM = Decimal("1e-30")
#: Every sum fits in 9 + 30 digits; 80 digits of precision and trapped rounding mean any
#: inexact operation is a loud bug, not silent drift.
_EXACT = Context(prec=80, traps=[Inexact, Rounded, InvalidOperation, Overflow, DivisionByZero])
_NAME_RE = re.compile(r"^[^\x00-\x1f\x7f]{1,200}$")


def _amount(value: Any, field: str, *, rounding: str, upper: Decimal,
            upper_inclusive: bool, allow_zero: bool) -> Decimal:
    """Read a user amount as an exact decimal (floats through their shortest repr)."""
    if type(value) is float:  # a pure function of the float: the gateway's repeated amounts
        return _float_amount(value, field, rounding, upper, upper_inclusive, allow_zero)
    return _read_amount(value, field, rounding=rounding, upper=upper,
                        upper_inclusive=upper_inclusive, allow_zero=allow_zero)


@functools.lru_cache(maxsize=4096)
def _float_amount(value: float, field: str, rounding: str, upper: Decimal,
                  upper_inclusive: bool, allow_zero: bool) -> Decimal:
    """`_read_amount` of a float, memoised (a refusal raises and is not cached)."""
    return _read_amount(value, field, rounding=rounding, upper=upper,
                        upper_inclusive=upper_inclusive, allow_zero=allow_zero)


def _read_amount(value: Any, field: str, *, rounding: str, upper: Decimal,
                 upper_inclusive: bool, allow_zero: bool) -> Decimal:
    if isinstance(value, bool):
        raise InvalidInputError(f"{field} must be a number, got {value!r}")
    try:
        if isinstance(value, Decimal):
            dec = value
        elif isinstance(value, numbers.Integral):
            dec = Decimal(int(value))
        elif isinstance(value, numbers.Real):
            as_float = float(value)
            if not math.isfinite(as_float):
                raise InvalidInputError(f"{field} must be a finite number, got {value!r}")
            dec = Decimal(repr(as_float))
        elif isinstance(value, str):
            dec = Decimal(value.strip())
        else:
            raise InvalidInputError(f"{field} must be a number, got {value!r}")
    except InvalidOperation:
        raise InvalidInputError(f"{field} must be a number, got {value!r}") from None
    if not dec.is_finite():
        raise InvalidInputError(f"{field} must be a finite number, got {value!r}")
    lower_ok = dec >= 0 if allow_zero else dec > 0
    upper_ok = dec <= upper if upper_inclusive else dec < upper
    if not (lower_ok and upper_ok):
        low = "[0" if allow_zero else "(0"
        high = f"{upper}]" if upper_inclusive else f"{upper})"
        raise InvalidInputError(f"{field} must be in {low}, {high}, got {value!r}")
    if dec.as_tuple().exponent < QUANTUM.as_tuple().exponent:  # finer than 1e-30
        dec = dec.quantize(QUANTUM, rounding=rounding)
    return _canon(dec)


def _canon(dec: Decimal) -> Decimal:
    """Canonical form (no trailing zeros, no exponent) so stored text compares and sums.
    Normalised in the exact context: the default one (28 digits) rounded an amount of more
    significant digits (0.5 + 1e-30 was stored as 0.5, under-counting the spend)."""
    return Decimal(format(dec.normalize(_EXACT), "f")) if dec else Decimal(0)


def _text(dec: Decimal) -> str:
    return format(_canon(dec), "f")


def _dec(text: str) -> Decimal:
    return Decimal(text)


def _add(a: Decimal, b: Decimal) -> Decimal:
    return _canon(_EXACT.add(a, b))


def _sub(a: Decimal, b: Decimal) -> Decimal:
    return _canon(_EXACT.subtract(a, b))


#: exact sum / difference (raising as `_add` does) without the canonical form: for amounts
#: that are compared and summed but never stored (the gateway's `BudgetView`)
_add_exact = _EXACT.add
_sub_exact = _EXACT.subtract


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def _check_principal(name: Any, field: str = "principal") -> str:
    if type(name) is str:  # a pure function of the name: the gateway charges a few names
        return _checked_name(name, field)
    return _read_principal(name, field)


@functools.lru_cache(maxsize=4096)
def _checked_name(name: str, field: str) -> str:
    """`_read_principal` of a str, memoised (a refusal raises and is not cached)."""
    return _read_principal(name, field)


def _read_principal(name: Any, field: str) -> str:
    if not isinstance(name, str) or not _NAME_RE.match(name.strip() or ""):
        raise InvalidInputError(f"{field} must be a non-empty name of at most 200 printable "
                                f"characters, got {name!r}")
    return name.strip()


def _guarantee_mapping(guarantee: Any) -> dict[str, Any]:
    """The guarantee as a dict, refused if it is not one or says it is not DP."""
    if hasattr(guarantee, "to_dict"):
        guarantee = guarantee.to_dict()
    if not isinstance(guarantee, dict):
        raise InvalidInputError(f"guarantee must be a dict or a PrivacyGuarantee, got "
                                f"{type(guarantee).__name__}")
    if guarantee.get("is_dp") is False:
        raise InvalidInputError("guarantee: a release that is not differentially private cannot "
                                "be charged to a privacy budget; do not charge it")
    return guarantee


def _claims(guarantee: dict[str, Any]) -> tuple[tuple[str, Any, Decimal | None], ...]:
    """(key, claimed value, its exact decimal or None when not finite) of the epsilon and
    delta the guarantee states as numbers."""
    found = []
    for key in ("epsilon", "delta"):
        claimed = guarantee.get(key)
        if not isinstance(claimed, numbers.Real) or isinstance(claimed, bool):
            continue
        finite = math.isfinite(float(claimed))
        found.append((key, claimed, Decimal(repr(float(claimed))) if finite else None))
    return tuple(found)


def _serialise(guarantee: dict[str, Any]) -> str:
    try:
        return json.dumps(guarantee, sort_keys=True, allow_nan=False, default=str)
    except ValueError as exc:
        raise InvalidInputError(f"guarantee must be JSON serialisable: {exc}") from None


@dataclass(frozen=True)
class GuaranteeJSON:
    """A guarantee checked and serialised once, as the ledger stores it with each charge:
    what a caller charging the same guarantee many times hands over (the gateway builds one
    per `QueryMeasurement`). Each charge still checks its claims against what it pays."""

    text: str
    claims: tuple[tuple[str, Any, Decimal | None], ...]

    @classmethod
    def of(cls, guarantee: Any) -> GuaranteeJSON:
        mapping = _guarantee_mapping(guarantee)
        return cls(_serialise(mapping), _claims(mapping))


def _check_claims(claims: tuple[tuple[str, Any, Decimal | None], ...], epsilon: Decimal,
                  delta: Decimal) -> None:
    for key, claimed, exact in claims:
        paid = epsilon if key == "epsilon" else delta
        if exact is None or exact > paid:
            raise InvalidInputError(f"guarantee {key}={claimed} is larger than the charged "
                                    f"{key}={_text(paid)}; charge what the release spends")


def _guarantee_json(guarantee: Any, epsilon: Decimal, delta: Decimal) -> str | None:
    """Serialise the guarantee stored with a charge and check it does not claim more than paid
    (a `GuaranteeJSON`: serialised already, its claims checked here)."""
    if guarantee is None:
        return None
    if isinstance(guarantee, GuaranteeJSON):
        _check_claims(guarantee.claims, epsilon, delta)
        return guarantee.text
    mapping = _guarantee_mapping(guarantee)
    _check_claims(_claims(mapping), epsilon, delta)
    return _serialise(mapping)


def check_budget(principal: str, epsilon: Any, delta: Any = 0.0) -> tuple[str, Decimal, Decimal]:
    """Validate a budget before any ledger is opened (a refused `budget set` creates no file)."""
    name = _check_principal(principal)
    eps = _amount(epsilon, "epsilon", rounding=ROUND_FLOOR, upper=MAX_EPSILON,
                  upper_inclusive=True, allow_zero=False)
    dlt = _amount(delta, "delta", rounding=ROUND_FLOOR, upper=Decimal(1),
                  upper_inclusive=False, allow_zero=True)
    return name, eps, dlt


def check_charge(principal: Any, epsilon: Any, delta: Any, description: Any,
                 guarantee: Any) -> tuple[str, Decimal, Decimal, str, str | None]:
    """A charge's arguments as the ledger stores them (name, epsilon and delta rounded up,
    description, guarantee JSON); `InvalidInputError` naming the first bad one."""
    name = _check_principal(principal)
    eps = _amount(epsilon, "epsilon", rounding=ROUND_CEILING, upper=MAX_EPSILON,
                  upper_inclusive=True, allow_zero=False)
    dlt = _amount(delta, "delta", rounding=ROUND_CEILING, upper=Decimal(1),
                  upper_inclusive=False, allow_zero=True)
    if not isinstance(description, str):
        raise InvalidInputError(f"description must be text, got {type(description).__name__}")
    return name, eps, dlt, escape_nul(description), _guarantee_json(guarantee, eps, dlt)
