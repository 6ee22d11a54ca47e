"""`privlab studio`: loopback by default, a token required elsewhere, one-line errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from privlab.cli.main import main


def test_studio_always_prints_a_token_url_and_reads_the_token_from_a_file(
        workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture) -> None:
    """A random token per launch in the printed URL (also on loopback), or the token of
    --token-file / PRIVLAB_STUDIO_TOKEN; `--token` on the command line (visible in `ps`) is
    refused with a pointer; --no-token is warned and loopback only; the server runs with
    umask 077 (everything it and its jobs write is owner-only)."""
    import os
    import re

    import uvicorn

    started: list[dict[str, Any]] = []

    def run(app: Any, **kw: Any) -> None:
        mask = os.umask(0)
        os.umask(mask)
        started.append({"app": app, "umask": mask, **kw})

    monkeypatch.setattr(uvicorn, "run", run)
    monkeypatch.delenv("PRIVLAB_STUDIO_TOKEN", raising=False)
    urls = []
    for _ in range(2):
        assert main(["studio", "--workspace", str(workspace)]) == 0
        out = capsys.readouterr().out
        urls.append(re.search(r"http://127\.0\.0\.1:8765/\?token=([\w-]{32,})\s", out).group(1))
    assert urls[0] != urls[1]  # per launch
    assert started[0]["host"] == "127.0.0.1" and started[0]["umask"] == 0o077
    assert started[0]["app"].state.config.token == urls[0]
    token_file = tmp_path / "token"
    token_file.write_text("from-a-file-0123456789\n", encoding="utf-8")
    assert main(["studio", "--workspace", str(workspace), "--host", "0.0.0.0",
                 "--token-file", str(token_file)]) == 0
    assert "?token=from-a-file-0123456789" in capsys.readouterr().out
    monkeypatch.setenv("PRIVLAB_STUDIO_TOKEN", "from-the-environment-42")
    assert main(["studio", "--workspace", str(workspace)]) == 0
    assert "?token=from-the-environment-42" in capsys.readouterr().out
    assert main(["studio", "--workspace", str(workspace), "--token", "s" * 20]) == 2
    err = capsys.readouterr().err
    assert "--token-file" in err and "ps" in err
    assert main(["studio", "--workspace", str(workspace), "--no-token", "--host",
                 "0.0.0.0"]) == 4
    assert "--no-token" in capsys.readouterr().err
    monkeypatch.delenv("PRIVLAB_STUDIO_TOKEN")
    assert main(["studio", "--workspace", str(workspace), "--no-token"]) == 0
    out = capsys.readouterr().out
    assert "warning: --no-token" in out and "token=" not in out
    assert started[-1]["app"].state.config.token is None
    assert main(["studio", "--workspace", str(workspace / "missing")]) == 2
    assert "--workspace: directory does not exist" in capsys.readouterr().err
    assert main(["studio", "--workspace", str(workspace), "--gateway-config",
                 str(workspace / "nope.yaml")]) == 2
    assert len(started) == 5


def test_studio_without_its_extra_names_the_install_command(workspace: Path,
                                                            monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture
                                                            ) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "multipart", None)
    assert main(["studio", "--workspace", str(workspace)]) == 5
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "pip install 'privlab[studio]'" in err[0]
