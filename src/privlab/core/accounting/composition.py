"""Basic composition of `PrivacyGuarantee`s: `sequential` (epsilons and deltas add) and
`parallel` (releases on disjoint parts of the data: the largest epsilon and delta)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from privlab.core.guarantee import PrivacyGuarantee
from privlab.errors import InvalidInputError


def _as_list(guarantees: Iterable[PrivacyGuarantee], what: str) -> list[PrivacyGuarantee]:
    items = list(guarantees)
    if not items:
        raise InvalidInputError(f"{what}: pass at least one PrivacyGuarantee")
    for g in items:
        if not isinstance(g, PrivacyGuarantee):
            raise InvalidInputError(
                f"{what}: every item must be a PrivacyGuarantee, got {type(g).__name__}"
            )
    models = {g.model for g in items}
    if len(models) > 1:
        raise InvalidInputError(
            f"{what}: cannot compose central and local guarantees together; account them apart"
        )
    dp = [g for g in items if g.is_dp]
    relations = {g.neighbouring for g in dp}
    if len(relations) > 1:
        raise InvalidInputError(
            f"{what}: guarantees use different neighbouring relations {sorted(relations)}; "
            "convert them to one relation first"
        )
    return items


def _composed_name(kind: str, items: Sequence[PrivacyGuarantee]) -> str:
    names = [g.mechanism or "?" for g in items]
    shown = ", ".join(names[:4]) + (f", ... ({len(names)} in all)" if len(names) > 4 else "")
    return f"{kind}({shown})"


def _merged_notes(items: Sequence[PrivacyGuarantee], extra: str) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for g in items:
        for note in g.notes:
            seen.setdefault(note, None)
    seen.setdefault(extra, None)
    return tuple(seen)


def _non_private_result(kind: str, items: Sequence[PrivacyGuarantee]) -> PrivacyGuarantee | None:
    bad = [g for g in items if not g.is_dp]
    if not bad:
        return None
    out = PrivacyGuarantee.not_private(
        _composed_name(kind, items),
        f"{len(bad)} of the {len(items)} composed parts are not differentially private",
        model=items[0].model,
    )
    inherited = dict.fromkeys(note for g in bad for note in g.notes)
    return out.with_notes(*inherited)


def sequential(guarantees: Iterable[PrivacyGuarantee]) -> PrivacyGuarantee:
    """Basic sequential composition: releases on the same data cost sum(eps), sum(delta).

    Valid for any mechanisms, adaptively chosen; loose for many similar steps (use
    `optimal_homogeneous_composition` or event accounting then).
    """
    items = _as_list(guarantees, "sequential")
    bad = _non_private_result("sequential", items)
    if bad is not None:
        return bad
    eps = math.fsum(g.epsilon for g in items)
    delta = math.fsum(g.delta for g in items)
    if delta >= 1:
        raise InvalidInputError(
            f"sequential: total delta {delta:.3g} >= 1 means no guarantee; use fewer releases"
        )
    return PrivacyGuarantee(
        epsilon=eps,
        delta=delta,
        neighbouring=items[0].neighbouring,
        model=items[0].model,
        mechanism=_composed_name("sequential", items),
        accountant="sequential composition (sum of epsilons and deltas)",
        notes=_merged_notes(items, f"sequential composition of {len(items)} releases"),
    )


def parallel(guarantees: Iterable[PrivacyGuarantee]) -> PrivacyGuarantee:
    """Parallel composition over DISJOINT parts of the data (partition by a public key).

    Under add/remove (or user-level) neighbouring one individual touches one part, so the
    cost is max(eps), max(delta). Under replace-one neighbouring the replaced record may
    leave one part and enter another, so the cost is the sum of the two largest.
    """
    items = _as_list(guarantees, "parallel")
    bad = _non_private_result("parallel", items)
    if bad is not None:
        return bad
    relation = items[0].neighbouring
    eps_sorted = sorted((g.epsilon for g in items), reverse=True)
    delta_sorted = sorted((g.delta for g in items), reverse=True)
    if relation == "replace_record" and len(items) > 1:
        eps, delta = eps_sorted[0] + eps_sorted[1], delta_sorted[0] + delta_sorted[1]
        how = "replace-one neighbours touch two parts: sum of the two largest"
    else:
        eps, delta = eps_sorted[0], delta_sorted[0]
        how = "max over disjoint parts"
    return PrivacyGuarantee(
        epsilon=eps,
        delta=delta,
        neighbouring=relation,
        model=items[0].model,
        mechanism=_composed_name("parallel", items),
        accountant=f"parallel composition ({how})",
        notes=_merged_notes(
            items,
            f"parallel composition of {len(items)} releases on disjoint parts of the data "
            "(the partition must not depend on the data's private values)",
        ),
    )
