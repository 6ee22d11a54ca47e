"""`privlab query --url URL --key KEY "SELECT ..." --epsilon E`: ask a DP query gateway.

The key can come from PRIVLAB_API_KEY instead of --key (keeps it out of shell history).
`--budget`, `--tables` and `--history` show the caller's budget, the public table metadata
and the caller's past queries instead of running one.
"""

from __future__ import annotations

import os
from typing import Annotated, Any

import typer
from rich.table import Table

from privlab.cli.common import check_delta_policy, console, emit_json
from privlab.cli.options import AllowWeak, Json, option
from privlab.errors import InvalidInputError


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def query_cmd(
    sql: str = typer.Argument(None, help="SELECT ... (aggregates over declared tables)."),
    url: str = typer.Option(..., "--url", help="Gateway URL, e.g. http://127.0.0.1:8000."),
    key: str = typer.Option(None, "--key", help="API key (default: $PRIVLAB_API_KEY)."),
    epsilon: Annotated[float, option("epsilon",
                                     "Epsilon for this query (without it: only --budget, --tables "
                                     "or --history).")] = None,
    delta: Annotated[float, option("delta", "Delta (partition selection, gaussian).")] = 0.0,
    allow_weak: AllowWeak = False,
    mechanism: str = typer.Option(None, "--mechanism", help="laplace (default) or gaussian."),
    budget: bool = typer.Option(False, "--budget", help="Show my budget."),
    tables: bool = typer.Option(False, "--tables", help="Show the tables I may query."),
    history: bool = typer.Option(False, "--history", help="Show my past queries."),
    as_json: Json = False,
) -> None:
    """Send one aggregate SQL query to a DP gateway; prints the noisy answer and its guarantee."""
    from privlab.query.client import Client

    check_delta_policy(delta, allow_weak)  # one delta policy in every command, before sending
    client = Client(url, key or os.environ.get("PRIVLAB_API_KEY", ""))
    if budget or tables or history:
        doc: Any = client.budget() if budget else client.tables() if tables else \
            client.history()
        if as_json:
            emit_json(doc)
        elif budget:
            console.print(f"{doc['analyst']}: epsilon {_fmt(doc['spent_epsilon'])} spent of "
                          f"{_fmt(doc['budget_epsilon'])}, remaining "
                          f"{_fmt(doc['remaining_epsilon'])}; delta remaining "
                          f"{_fmt(doc['remaining_delta'])}")
        elif tables:
            for t in doc["tables"]:
                console.print(f"[bold]{t['name']}[/bold] ({t['neighbouring']}): "
                              + ", ".join(f"{c} {m['type']}" for c, m in t["columns"].items()))
        else:
            for h in doc:
                console.print(f"{h['created_at']}  {h['decision']:<24} eps={h['epsilon']}  "
                              f"{(h['sql'] or '')[:80]}")
        return
    if not sql:
        raise InvalidInputError("give a SQL query (or --budget / --tables / --history)")
    if epsilon is None:
        raise InvalidInputError("--epsilon is required: the privacy budget this query spends")
    answer = client.query(sql, epsilon, delta, mechanism)
    if as_json:
        emit_json(answer)
        return
    table = Table(show_header=True, header_style="bold")
    for c in answer["columns"]:
        table.add_column(c)
    for row in answer["rows"]:
        table.add_row(*(_fmt(v) for v in row))
    console.print(table)
    for c in answer["column_info"]:
        ci = c["confidence_interval_95"]
        if c["kind"] != "group_key":
            shown = "per row" if isinstance(ci, list) else "n/a" if ci is None else _fmt(ci)
            console.print(f"  {c['name']}: 95% noise half-width {shown} (epsilon "
                          f"{_fmt(c['epsilon'])}, {c['mechanism']})")
    g = answer["guarantee"]
    console.print(f"  guarantee: ({_fmt(g['epsilon'])}, {_fmt(g['delta'])})-DP, neighbouring: "
                  f"{g['neighbouring_meaning']}; {g['accountant']}")
    rem = answer["remaining_budget"]
    console.print(f"  remaining budget: epsilon {_fmt(rem['epsilon'])}, delta "
                  f"{_fmt(rem['delta'])}  (query id {answer['query_id']})")


def register(app: typer.Typer) -> None:
    app.command("query")(query_cmd)
