"""`privlab serve --config gateway.yaml [--host 127.0.0.1 --port 8000]`: the DP query gateway.

`--new-key` prints a fresh API key and the SHA-256 that goes into the config (the config
never holds keys); `--check` validates the config, the database and the ledger, then exits.
"""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path

import typer

from privlab.cli.common import console, emit_json, err_console, require_extra
from privlab.errors import InvalidInputError


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve_cmd(
    config: Path = typer.Option(None, "--config", "-c", help="Gateway YAML config."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on."),
    port: int = typer.Option(8000, "--port", help="TCP port."),
    workers: int = typer.Option(1, "--workers", help="Server processes (each with its own "
                                "rate limiter; budgets are shared through the ledger)."),
    new_key: bool = typer.Option(False, "--new-key", help="Print a new API key and its hash."),
    check: bool = typer.Option(False, "--check", help="Validate config, database and ledger, "
                               "then exit."),
    init_demo: Path = typer.Option(None, "--init-demo", help="Create DIR/demo.duckdb (Adult, "
                                   "MovieLens) and DIR/gateway.yaml with a new key, then exit."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """Serve aggregate SQL over a database with differential privacy and per-analyst budgets."""
    require_extra(("fastapi", "uvicorn", "yaml", "sqlglot"), "server", "privlab serve")
    from privlab.query.config import hash_key, load_config
    from privlab.query.config import new_key as make_key

    if new_key:
        key = make_key()
        if as_json:
            emit_json({"key": key, "key_sha256": hash_key(key)})
        else:
            console.print(f"API key (give it to the analyst, store it nowhere else): {key}")
            console.print(f"config line:  key_sha256: {hash_key(key)}")
        return
    if init_demo is not None:
        from privlab.query.demo import init_demo as make_demo

        path, key = make_demo(init_demo)
        if as_json:
            emit_json({"config": str(path), "key": key})
        else:
            console.print(f"wrote {path} and {path.parent / 'demo.duckdb'}")
            console.print(f"analyst API key (shown once): {key}")
            console.print(f"start:  privlab serve --config {path}")
        return
    if config is None:
        raise InvalidInputError("--config is required (see examples/gateway.yaml)")
    if not 0 < port < 65536:
        raise InvalidInputError(f"--port must be in 1..65535, got {port}")
    if not 1 <= workers <= 64:
        raise InvalidInputError(f"--workers must be in 1..64, got {workers}")
    cfg = load_config(config)
    from privlab.query.gateway import Gateway

    gateway = Gateway(cfg)  # validates tables, syncs budgets, reconciles interrupted charges
    summary = {"database": cfg.database if "://" not in cfg.database else "postgresql",
               "tables": sorted(cfg.tables), "analysts": sorted(cfg.analysts),
               "url": f"http://{host}:{port}", "workers": workers}
    if check:
        gateway.close()
        if as_json:
            emit_json({"ok": True, **summary})
        else:
            console.print(f"config ok: {len(cfg.tables)} table(s), {len(cfg.analysts)} analyst(s)")
        return
    if not _loopback(host):
        err_console.print("[yellow]warning:[/yellow] listening on a non-loopback address "
                          "without TLS; API keys travel in clear text. Put a TLS proxy in "
                          "front.")
    import uvicorn

    err_console.print(f"privlab gateway on http://{host}:{port} (OpenAPI: /docs)")
    if workers == 1:
        from privlab.service.app import create_app

        uvicorn.run(create_app(gateway=gateway), host=host, port=port, log_level="warning",
                    access_log=False)
        return
    gateway.close()
    os.environ["PRIVLAB_GATEWAY_CONFIG"] = str(Path(config).resolve())
    os.environ["PRIVLAB_GATEWAY_RECONCILE"] = "0"  # done once above, not per worker
    uvicorn.run("privlab.service.app:app_from_env", factory=True, host=host, port=port,
                workers=workers, log_level="warning", access_log=False)


def register(app: typer.Typer) -> None:
    app.command("serve")(serve_cmd)
