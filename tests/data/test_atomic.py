"""Atomic writes: all or nothing, and ordinary permissions."""

import os

import pandas as pd
import pytest

from privlab.errors import InvalidInputError
from privlab.utils.atomic import atomic_open, atomic_write_frame


def test_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("old")
    with pytest.raises(RuntimeError), atomic_open(target) as handle:
        handle.write("half")
        raise RuntimeError("crash mid-write")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_written_file_gets_umask_permissions(tmp_path):
    old = os.umask(0o022)
    try:
        atomic_write_frame(pd.DataFrame({"a": [1]}), tmp_path / "x.csv")
    finally:
        os.umask(old)
    assert (tmp_path / "x.csv").stat().st_mode & 0o777 == 0o644


def test_missing_directory_is_a_clear_error(tmp_path):
    with pytest.raises(InvalidInputError, match="output directory does not exist"):
        atomic_write_frame(pd.DataFrame({"a": [1]}), tmp_path / "nope" / "x.csv")
