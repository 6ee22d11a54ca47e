"""The structural comparison of two outputs, one on D and one on D': everything but the
noised values must be identical (keys, types, lengths, labels, exit status, error text,
charge); at a noised key only the type and shape must agree.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd


def _close(a: Any, b: Any) -> bool:
    """Equal; floats up to 1e-12 relative (a sum taken in another order, e.g. the rho of
    AIM's rounds after noisy selections; any count or rate read from n moves far more)."""
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) and math.isnan(b):
            return True
        return math.isclose(a, b, rel_tol=1e-12, abs_tol=0.0)
    return a == b


def assert_same_structure(a: Any, b: Any, noised: Iterable[str] = (), path: str = "$") -> None:
    """Recursively: same keys, same types, same lengths, same values except at keys whose
    name is in `noised` (there only the type and shape must agree)."""
    noised = set(noised)
    if isinstance(a, Mapping):
        assert isinstance(b, Mapping), f"{path}: mapping vs {type(b).__name__}"
        assert list(a.keys()) == list(b.keys()), f"{path}: keys differ {list(a)} vs {list(b)}"
        for k in a:
            sub = f"{path}.{k}"
            if k in noised:
                _same_shape(a[k], b[k], sub)
            else:
                assert_same_structure(a[k], b[k], noised, sub)
        return
    if isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple)), f"{path}: list vs {type(b).__name__}"
        assert len(a) == len(b), f"{path}: lengths differ {len(a)} vs {len(b)}"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same_structure(x, y, noised, f"{path}[{i}]")
        return
    assert type(a) is type(b), f"{path}: {type(a).__name__} vs {type(b).__name__}"
    assert _close(a, b), f"{path}: {a!r} != {b!r} (not a noised value, must not depend on data)"


def _same_shape(a: Any, b: Any, path: str) -> None:
    if isinstance(a, Mapping):
        assert isinstance(b, Mapping) and list(a) == list(b), f"{path}: keys differ"
        for k in a:
            _same_shape(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple)) and len(a) == len(b), f"{path}: lengths differ"
    else:
        assert (a is None) == (b is None), f"{path}: None vs value"
        if a is not None:
            assert isinstance(a, (int, float)) == isinstance(b, (int, float)), \
                f"{path}: {type(a).__name__} vs {type(b).__name__}"


#: Same keys, list lengths and value kinds, values free (outputs labelled NOT DP).
assert_same_shape = _same_shape


def assert_same_frame_structure(a: pd.DataFrame, b: pd.DataFrame, *,
                                same_length: bool = True) -> None:
    """Published tables: same columns, order and dtypes (and length when it is public)."""
    assert list(a.columns) == list(b.columns), f"columns differ: {list(a.columns)} vs " \
        f"{list(b.columns)}"
    assert [str(t) for t in a.dtypes] == [str(t) for t in b.dtypes], \
        f"dtypes differ: {dict(a.dtypes)} vs {dict(b.dtypes)}"
    if same_length:
        assert len(a) == len(b), f"row counts differ: {len(a)} vs {len(b)}"


def saved_model_facts(value: Any) -> Any:
    """What an unpickled model file holds, as facts to compare between D and D': every
    attribute, recursively, with the learnt weights (torch modules, float arrays: the noised
    values) reduced to their shapes and dtypes. Anything else in the file, a timing or a
    count, must be the same on both sides (issue 29: wall-clock times were pickled)."""
    import dataclasses

    if hasattr(value, "state_dict") and callable(value.state_dict):  # a torch module
        return {k: ["weights", list(v.shape)] for k, v in value.state_dict().items()}
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "fc":
            return ["weights", list(value.shape), str(value.dtype)]
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: saved_model_facts(getattr(value, f.name))
                for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): saved_model_facts(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value
        return [saved_model_facts(v) for v in items]
    if hasattr(value, "__dict__"):
        return {"__class__": type(value).__name__,
                **{k: saved_model_facts(v) for k, v in sorted(vars(value).items())}}
    return value

