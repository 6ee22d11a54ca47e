"""`privlab studio [--workspace DIR] [--host 127.0.0.1 --port 8765] [--token-file F]`: the
local web console (docs/studio.md). Every browser needs the access token, also on loopback
(any local user can reach 127.0.0.1): a random one per launch, printed in the URL, or one
from --token-file / PRIVLAB_STUDIO_TOKEN (never the command line: `ps` shows argv to every
local user). `--no-token` is the explicit, warned opt-out, loopback only. Every
browser-named path stays inside the workspace, and what the studio writes is owner-only."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from privlab.cli.common import console, require_extra
from privlab.errors import InvalidInputError


def studio_cmd(
    workspace: Path = typer.Option(Path("."), "--workspace", "-w",
                                   help="Folder whose data files the studio may read and where "
                                        "it keeps its ledger and sessions' outputs."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on."),
    port: int = typer.Option(8765, "--port", help="TCP port."),
    token_file: Path = typer.Option(None, "--token-file",
                                    help="File whose first line is the access token (>= 16 "
                                         "characters; keep it 0600). Default: "
                                         "PRIVLAB_STUDIO_TOKEN, else a random token per "
                                         "launch, printed in the URL."),
    no_token: bool = typer.Option(False, "--no-token",
                                  help="No access token (loopback only): every local user "
                                       "and every web page that can reach the port can then "
                                       "drive the studio with your file access. Not "
                                       "recommended."),
    token: str = typer.Option(None, "--token", hidden=True,
                              help="Removed: a token in argv is visible in `ps`."),
    max_upload_mb: float = typer.Option(20.0, "--max-upload-mb", help="Largest upload."),
    gateway_config: Path = typer.Option(None, "--gateway-config",
                                        help="A gateway YAML config to administer "
                                             "(optional)."),
    budget_epsilon: float = typer.Option(10.0, "--budget-epsilon",
                                         help="Total epsilon of each data source's budget "
                                              "(set on its first use in the ledger)."),
    budget_delta: float = typer.Option(1e-5, "--budget-delta", help="Total delta likewise."),
) -> None:
    """Start privlab studio, the web console for the curator and the gateway administrator."""
    require_extra(("fastapi", "uvicorn", "multipart", "jinja2"), "studio", "privlab studio")
    import uvicorn

    from privlab.studio import StudioConfig, create_app

    if token is not None:
        raise InvalidInputError("--token: removed (every local user sees a command line in "
                                "`ps`); put the token in a file and pass --token-file FILE, or "
                                "set PRIVLAB_STUDIO_TOKEN, or leave both out for a random one")
    config = StudioConfig(workspace=workspace, host=host, port=port,
                          token=None if no_token else given_token(token_file),
                          no_token=no_token, max_upload_bytes=int(max_upload_mb * 2**20),
                          gateway_config=gateway_config, budget_epsilon=budget_epsilon,
                          budget_delta=budget_delta)
    app = create_app(config)
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{port}/" + (f"?token={config.token}" if config.token else "")
    if no_token:
        console.print("warning: --no-token: any local user, and any web page your browser "
                      "opens that can reach this port, can use the studio with your file "
                      "access", style="bold red", highlight=False)
    console.print(f"privlab studio on {url} (workspace {config.workspace}); Ctrl-C stops it",
                  highlight=False, soft_wrap=True)  # one line: the URL stays copyable
    old = os.umask(0o077)  # sessions, uploads, jobs' outputs: owner-only
    try:
        with app.state.ledger:  # closed when the server stops, even if it never started
            uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)
    finally:
        os.umask(old)


def given_token(token_file: Path | None) -> str | None:
    """The token from --token-file (its first line), else PRIVLAB_STUDIO_TOKEN, else None
    (a random one is drawn)."""
    if token_file is not None:
        try:
            text = Path(token_file).expanduser().read_text(encoding="utf-8")
        except OSError as exc:
            raise InvalidInputError(f"--token-file: cannot read {token_file}: "
                                    f"{exc.strerror}") from None
        lines = text.strip().splitlines()
        if not lines or not lines[0].strip():
            raise InvalidInputError(f"--token-file: {token_file} is empty; write the token "
                                    "on its first line")
        return lines[0].strip()
    return os.environ.get("PRIVLAB_STUDIO_TOKEN") or None


def register(app: typer.Typer) -> None:
    app.command("studio")(studio_cmd)
