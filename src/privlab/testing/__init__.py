"""privlab's neighbouring-dataset harness, shipped for every front end and for extensions.

The claim privlab sells is that a release run on D and on D' (one row, or one person,
added, removed or changed) with the same seed differs only in its noised values: exit
status, error text, files, charge and every other field included. This package is the one
judge of that claim:

* `edits`: the one-row edits of a table under its declared schema (`one_row_edits`, the
  representation edits of a file's cells);
* `compare`: the structural comparison (`assert_same_structure`, noised keys free in value);
* `front_ends`: the registration API: `register_front_end(name, run, noised=...)` and
  `check_front_end(run, base, edits, noised=...)`;
* `gateway`, `gateway_types`: the DP SQL gateway's tables, one-row edits of its rows,
  writers (DuckDB, PostgreSQL), the public view of a response and the Hypothesis grammars.

Nothing here is imported by privlab itself; `pandas`/`numpy` are core dependencies,
Hypothesis is imported only by the grammars that need it.
"""

from privlab.testing.compare import (
    assert_same_frame_structure,
    assert_same_shape,
    assert_same_structure,
    saved_model_facts,
)
from privlab.testing.edits import (
    HOSTILE,
    OUTSIDE,
    REPRESENTATION,
    edits_for_policy,
    one_row_edits,
    representation_edits,
)
from privlab.testing.front_ends import (
    FrontEnd,
    check_front_end,
    front_end,
    front_ends,
    register_front_end,
)

__all__ = [
    "HOSTILE", "OUTSIDE", "REPRESENTATION", "FrontEnd", "assert_same_frame_structure",
    "assert_same_shape", "assert_same_structure", "check_front_end", "edits_for_policy",
    "front_end", "front_ends", "one_row_edits", "register_front_end", "representation_edits",
    "saved_model_facts",
]
