"""Fixtures of the studio tests: a workspace holding a small CSV. Helpers live in
`studio_helpers` (imported by name from the test files)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="privlab studio needs the [studio] extra")
pytest.importorskip("multipart", reason="privlab studio needs the [studio] extra "
                    "(python-multipart)")

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "query"))

from studio_helpers import PEOPLE_CSV  # noqa: E402


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "workspace"
    ws.mkdir()
    (ws / "people.csv").write_text(PEOPLE_CSV, encoding="utf-8")
    return ws
