"""AIM's released table for a fixed seed, against outputs recorded before the issue-32 speed-ups
(linear candidate weights, cached junction-tree sizes, batched marginals). Those changes do
the same mathematics, so the same seed must give the same table, byte for byte. If a change
of the NOISE SAMPLER's stream ever requires re-recording, the commit must say so."""

from __future__ import annotations

from pathlib import Path

import pytest
from synth_schemas import adult_any_missing

from privlab.synth.aim import AIMSynthesizer

DATA = Path(__file__).parent / "data"
COLS = ["age", "workclass", "education", "marital-status", "sex", "race", "hours-per-week",
        "salary"]


@pytest.mark.parametrize(("name", "options"), [("default", {}),
                                               ("capped", {"max_model_cells": 3000})])
def test_aim_release_for_a_seed_is_unchanged(adult, name, options) -> None:
    frame = adult.sample(2000, random_state=11).reset_index(drop=True)[COLS]
    synth = AIMSynthesizer(schema=adult_any_missing().select(COLS), rng=11, **options)
    out = synth.fit(frame, 1.0, 1e-6).sample(500)
    want = (DATA / f"aim_seed11_{name}.csv").read_text(encoding="utf-8")
    assert out.to_csv(index=False) == want
