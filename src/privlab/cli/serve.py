"""`privlab serve --config gateway.yaml [--host 127.0.0.1 --port 8000]`: the DP query gateway.

`--new-key` prints a fresh API key and the SHA-256 that goes into the config (the config
never holds keys); `--check` validates the config, the database, the ledger and the audit
log, changes nothing, then exits. Start-up verifies the audit log (`privlab audit-log verify`)
and refuses to serve on a broken one unless `--accept-broken-audit-log` (itself logged).
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import typer

from privlab.cli.common import console, emit_json, err_console, require_extra
from privlab.cli.options import Json
from privlab.errors import InvalidInputError
from privlab.utils.net import is_loopback


def serve_cmd(
    config: Path = typer.Option(None, "--config", "-c", help="Gateway YAML config "
                                "(required unless --init-demo or --new-key; no default)."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on."),
    port: int = typer.Option(8000, "--port", help="TCP port."),
    workers: int = typer.Option(1, "--workers", help="Server processes (each with its own "
                                "rate limiter; budgets are shared through the ledger)."),
    new_key: bool = typer.Option(False, "--new-key", help="Print a new API key and its hash."),
    check: bool = typer.Option(False, "--check", help="Validate config, database and ledger, "
                               "then exit."),
    init_demo: Path = typer.Option(None, "--init-demo", help="Create DIR/demo.duckdb (Adult, "
                                   "MovieLens) and DIR/gateway.yaml with a new key, then exit "
                                   "(optional)."),
    accept_broken: bool = typer.Option(False, "--accept-broken-audit-log",
                                       help="Start although the audit log fails "
                                            "verification (recorded in the log)."),
    as_json: Json = False,
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
    from privlab.query.audit import AuditLog, AuditLogBroken
    from privlab.query.gateway import Gateway

    summary = {"database": cfg.database if "://" not in cfg.database else "postgresql",
               "tables": sorted(cfg.tables), "analysts": sorted(cfg.analysts),
               "url": f"http://{host}:{port}", "workers": workers}
    if check:  # validates everything, writes nothing (no budget sync, no audit row)
        gateway = Gateway(cfg, check_only=True)
        try:
            notes = []
            if gateway.ledger is None:
                notes.append(f"ledger {cfg.ledger} does not exist yet (created by the first "
                             "`privlab serve`)")
            if gateway.audit.exists:
                gateway.audit.require_intact()
            else:
                notes.append("audit log not created yet (created by the first `privlab "
                             "serve`)")
        finally:
            gateway.close()
        if as_json:
            emit_json({"ok": True, **summary, "notes": notes})
        else:
            console.print(f"config ok: {len(cfg.tables)} table(s), {len(cfg.analysts)} analyst(s)")
            for note in notes:
                console.print(f"note: {note}")
        return
    import uvicorn

    from privlab.service.http import uvicorn_options

    # no X-Forwarded-For from uvicorn (the front door believes it from trusted_proxies
    # only), bounded request heads, head / keep-alive deadlines, a connection cap
    options = uvicorn_options(cfg)
    audit = AuditLog(cfg.audit_target, key=cfg.audit_key(create=True),
                     checkpoint=cfg.audit_checkpoint)
    try:
        problems = audit.verify()
        if problems:
            if not accept_broken:
                raise AuditLogBroken(f"audit log {audit.describe()}: {problems[0]}; "
                                     "investigate (`privlab audit-log verify`), then start a "
                                     "new audit log or pass --accept-broken-audit-log "
                                     "(recorded in the log)")
            audit.accept_broken(uuid.uuid4().hex,
                                ("started with --accept-broken-audit-log: "
                                 + problems[0])[:500])
            err_console.print(f"[yellow]warning:[/yellow] audit log fails verification "
                              f"({problems[0]}); started anyway, as --accept-broken-audit-log "
                              "asked (recorded in the log)")
        # validates tables, syncs budgets, reconciles interrupted charges
        gateway = Gateway(cfg, audit=audit)
    except BaseException:
        audit.close()  # the gateway was refused: nothing stays open
        raise
    if not is_loopback(host):
        err_console.print("[yellow]warning:[/yellow] listening on a non-loopback address "
                          "without TLS; API keys travel in clear text. Put a TLS proxy in "
                          "front.")
    err_console.print(f"privlab gateway on http://{host}:{port} (OpenAPI: /docs)")
    if workers == 1:
        from privlab.errors import library_context
        from privlab.service.app import create_app

        with library_context(), gateway:  # requests are library callers: no CLI option names
            uvicorn.run(create_app(gateway=gateway), host=host, port=port, log_level="warning",
                        access_log=False, **options)
        return
    gateway.close()
    os.environ["PRIVLAB_GATEWAY_CONFIG"] = str(Path(config).resolve())
    os.environ["PRIVLAB_GATEWAY_RECONCILE"] = "0"  # done once above, not per worker
    uvicorn.run("privlab.service.app:app_from_env", factory=True, host=host, port=port,
                workers=workers, log_level="warning", access_log=False, **options)


audit_log_app = typer.Typer(help="The DP query gateway's audit log.", no_args_is_help=True)


@audit_log_app.command("verify")
def audit_log_verify_cmd(
    config: Path = typer.Option(..., "--config", "-c", help="Gateway YAML config."),
    as_json: Json = False,
) -> None:
    """Verify the audit log: format, seq without gaps, HMAC chain, signed checkpoint, triggers.

    Exit 0 when intact; 4 with the first bad row named otherwise. Writes nothing."""
    from privlab.query.audit import AuditLog
    from privlab.query.config import load_config

    cfg = load_config(config)
    key = cfg.audit_key(create=False)
    log = AuditLog(cfg.audit_target, key=key, checkpoint=cfg.audit_checkpoint, create=False)
    try:
        if not log.exists:
            raise InvalidInputError(f"audit log {log.describe()} does not exist (it is "
                                    "created by the first `privlab serve`)")
        problems = log.verify()
        rows, head = log.head()
    finally:
        log.close()
    report = {"ok": not problems, "audit_log": log.describe(), "rows": rows, "head_seq": head,
              "keyed": key is not None, "checkpoint": None if cfg.audit_checkpoint is None
              else str(cfg.audit_checkpoint), "problems": problems}
    if as_json:
        emit_json(report)
    elif problems:
        err_console.print(f"[red]audit log broken:[/red] {problems[0]}")
        for extra in problems[1:]:
            err_console.print(f"also: {extra}")
    else:
        console.print(f"audit log intact: {rows} row(s), head row {head}, "
                      f"{'HMAC' if key is not None else 'unkeyed SHA-256 (no audit key)'} chain")
    if problems:
        raise typer.Exit(code=4)


@audit_log_app.command("migrate")
def audit_log_migrate_cmd(
    config: Path = typer.Option(..., "--config", "-c", help="Gateway YAML config."),
    as_json: Json = False,
) -> None:
    """Move a format-1 audit log (before seq was under the MAC) to format 2.

    Verifies the old log, keeps it as the table privlab_gateway_audit_v1 and its checkpoint
    as <checkpoint>.v1, and starts a format-2 log whose first row records the old head.
    Exit 4 (nothing changed) if the old log does not verify."""
    from privlab.query.audit import migrate_v1
    from privlab.query.config import load_config

    cfg = load_config(config)
    report = migrate_v1(cfg.audit_target, key=cfg.audit_key(create=False),
                        checkpoint=cfg.audit_checkpoint)
    if as_json:
        emit_json({"ok": True, **report})
    else:
        console.print(f"audit log migrated: {report['archived_rows']} format-1 row(s) kept as "
                      f"table {report['archived_table']}; a format-2 log starts with a "
                      "log_migrated row recording their head")


def register(app: typer.Typer) -> None:
    app.command("serve")(serve_cmd)
    app.add_typer(audit_log_app, name="audit-log")
