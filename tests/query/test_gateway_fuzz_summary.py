"""The gateway fuzzes' summary file (`privlab.testing.gateway.write_fuzz_summary`)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from privlab.testing.gateway import write_fuzz_summary

RUN = {"queries": 5, "differing": 0, "server_errors": 0, "engine_failures_after_charge": 0}


def test_the_summary_is_written_atomically(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: the summary was written in place (`Path.write_text`), so a write that
    failed part-way left a truncated JSON file where the previous summary was. Now a failed
    write leaves the previous file as it was, and no temporary file behind."""
    path = tmp_path / "out" / "summary.json"
    assert write_fuzz_summary([RUN], path, examples=5) == 0
    previous = path.read_text(encoding="utf-8")
    assert json.loads(previous)["total_queries"] == 5

    def fail(*args: object, **kwargs: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError, match="disk full"):
        write_fuzz_summary([{**RUN, "differing": 1}], path, examples=5)
    assert path.read_text(encoding="utf-8") == previous
    assert sorted(p.name for p in path.parent.iterdir()) == ["summary.json"]
    monkeypatch.undo()
    assert write_fuzz_summary([{**RUN, "differing": 1}], path, examples=5) == 1
    assert json.loads(path.read_text(encoding="utf-8"))["problems"] == 1
