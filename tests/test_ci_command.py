"""README's test command is exactly what .ci/run runs (both install and run the two suites)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _command(text: str) -> str:
    return next(line.strip() for line in text.splitlines()
                if line.strip().startswith("scripts/ci-setup.sh &&"))


def test_readme_shows_the_command_ci_runs():
    ci = _command((ROOT / ".ci" / "run").read_text())
    assert ci == _command((ROOT / "README.md").read_text())
    # the full run with every extra, then the core package alone with the test tools only,
    # where skips are allowed (each names its extra) and failures are not
    assert '-e ".[all,dev]"' in ci and '.venv-core/bin/pip install -q -e ".[test]"' in ci
    assert ci.index(".venv/bin/python -m pytest") < ci.index(
        "env -u PRIVLAB_TEST_NO_SKIP .venv-core/bin/python -m pytest")
