"""`privlab studio`: loopback by default, a token required elsewhere, one-line errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from privlab.cli.main import main


def test_studio_starts_on_loopback_and_refuses_an_open_bind(workspace: Path,
                                                            monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture
                                                            ) -> None:
    import uvicorn

    started: list[dict[str, Any]] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: started.append({"app": app, **kw}))
    monkeypatch.delenv("PRIVLAB_STUDIO_TOKEN", raising=False)
    assert main(["studio", "--workspace", str(workspace)]) == 0
    assert started[0]["host"] == "127.0.0.1" and started[0]["port"] == 8765
    assert "http://127.0.0.1:8765/" in capsys.readouterr().out
    assert main(["studio", "--workspace", str(workspace), "--host", "0.0.0.0"]) == 4
    assert "--token" in capsys.readouterr().err and len(started) == 1
    token = "s" * 20
    assert main(["studio", "--workspace", str(workspace), "--host", "0.0.0.0",
                 "--token", token]) == 0
    assert f"?token={token}" in capsys.readouterr().out and started[1]["host"] == "0.0.0.0"
    assert main(["studio", "--workspace", str(workspace / "missing")]) == 2
    assert "--workspace: directory does not exist" in capsys.readouterr().err
    assert main(["studio", "--workspace", str(workspace), "--gateway-config",
                 str(workspace / "nope.yaml")]) == 2
    assert len(started) == 2


def test_studio_without_its_extra_names_the_install_command(workspace: Path,
                                                            monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture
                                                            ) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "multipart", None)
    assert main(["studio", "--workspace", str(workspace)]) == 5
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "pip install 'privlab[studio]'" in err[0]
