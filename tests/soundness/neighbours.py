"""The table harness, re-exported from `privlab.testing` (its home since issue 31) so the
soundness tests keep `from neighbours import ...`."""

from privlab.testing import (  # noqa: F401 - re-exported
    HOSTILE,
    OUTSIDE,
    REPRESENTATION,
    assert_same_frame_structure,
    assert_same_shape,
    assert_same_structure,
    check_front_end,
    edits_for_policy,
    one_row_edits,
    register_front_end,
    representation_edits,
    saved_model_facts,
)
