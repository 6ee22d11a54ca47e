"""`privlab studio [--workspace DIR] [--host 127.0.0.1 --port 8765] [--token T]`: the local
web console (docs/studio.md). Loopback only unless a token is given; every browser-named path
stays inside the workspace."""

from __future__ import annotations

from pathlib import Path

import typer

from privlab.cli.common import console, require_extra


def studio_cmd(
    workspace: Path = typer.Option(Path("."), "--workspace", "-w",
                                   help="Folder whose data files the studio may read and where "
                                        "it keeps its ledger and sessions' outputs."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on (another than "
                             "loopback needs --token)."),
    port: int = typer.Option(8765, "--port", help="TCP port."),
    token: str = typer.Option(None, "--token", envvar="PRIVLAB_STUDIO_TOKEN",
                              help="Access token (>= 16 characters) every browser must present "
                                   "once as ?token=...; required off loopback (default: "
                                   "none on loopback)."),
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

    config = StudioConfig(workspace=workspace, host=host, port=port, token=token,
                          max_upload_bytes=int(max_upload_mb * 2**20),
                          gateway_config=gateway_config, budget_epsilon=budget_epsilon,
                          budget_delta=budget_delta)
    app = create_app(config)
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{port}/" + ("?token=" + token if token else "")
    console.print(f"privlab studio on {url} (workspace {config.workspace}); Ctrl-C stops it",
                  highlight=False)
    with app.state.ledger:  # closed when the server stops, even if it never started
        uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)


def register(app: typer.Typer) -> None:
    app.command("studio")(studio_cmd)
