"""The one neighbour check every front end registers with (the way scikit-learn ships
`check_estimator`): run on D and on each D' with the same seed, and only the noised values
may differ.

A front end is a `run` callable from one table (a frame, a file path, a list of rows: what
that front end reads) to what it shows the world: a JSON document, an exit code with its
text, a public view of an HTTP response. It registers once with the names of the keys that
carry noise, and, where a D' may be refused, a predicate naming an allowed refusal (one
clear line, the same exit code whatever the row held). `check_front_end` then runs the
battery and fails on the first difference outside the noise, naming the edit and the path.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from privlab.testing.compare import assert_same_structure

Run = Callable[[Any], Any]
Refusal = Callable[[Any], bool]


@dataclass(frozen=True)
class FrontEnd:
    """One registered front end: how to run it on a table and which keys it noises."""

    name: str
    run: Run
    noised: frozenset[str] = field(default_factory=frozenset)
    refused: Refusal | None = None

    def check(self, base: Any, edits: Mapping[str, Any]) -> dict[str, str]:
        """`check_front_end` with this front end's run, noised keys and refusals."""
        return check_front_end(self.run, base, edits, noised=self.noised,
                               refused=self.refused, name=self.name)


_REGISTRY: dict[str, FrontEnd] = {}


def register_front_end(name: str, run: Run, *, noised: Iterable[str] = (),
                       refused: Refusal | None = None) -> FrontEnd:
    """Register (or re-register: a test module reloaded) front end `name`; returns it."""
    front = FrontEnd(name, run, frozenset(noised), refused)
    _REGISTRY[name] = front
    return front


def front_end(name: str) -> FrontEnd:
    """The front end registered as `name` (KeyError naming the registered ones otherwise)."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"no front end {name!r} registered; registered: "
                       f"{sorted(_REGISTRY)}") from None


def front_ends() -> list[str]:
    """The names registered so far, sorted."""
    return sorted(_REGISTRY)


def check_front_end(run: Run, base: Any, edits: Mapping[str, Any], *,
                    noised: Iterable[str] = (), refused: Refusal | None = None,
                    name: str = "front end") -> dict[str, str]:
    """Run `run` on `base` (D) and on every D' in `edits` and compare each output with D's by
    `assert_same_structure` (only keys in `noised` may differ, in value not in shape).

    D itself must be answered (`refused(out)` false). A D' whose output `refused` accepts is
    an allowed refusal and is not compared. Returns {edit: "same" | "refused"}; raises
    AssertionError naming the front end, the edit and the first differing path."""
    noised = frozenset(noised)
    reference = run(base)
    assert refused is None or not refused(reference), f"{name}: D itself refused: {reference!r}"
    outcome: dict[str, str] = {}
    for edit, table in edits.items():
        out = run(table)
        if refused is not None and refused(out):
            outcome[edit] = "refused"
            continue
        assert_same_structure(reference, out, noised, path=f"{name}[{edit}]")
        outcome[edit] = "same"
    return outcome
