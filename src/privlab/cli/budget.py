"""`privlab budget {set,show,history,verify} --ledger PATH|URL ...`: manage privacy budgets.

The ledger is the one `privlab release --ledger L --principal P` charges before it computes
anything. Accountant: sequential composition (spent = sum of the charges).
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from privlab.cli.common import check_delta_policy, console, emit_json
from privlab.cli.options import AllowWeak, Json, option
from privlab.core.ledger import ACCOUNTANT, BudgetLedger, check_budget
from privlab.errors import PrivlabError

budget_app = typer.Typer(
    name="budget",
    help="Set, show and audit per-principal privacy budgets (a SQLite file or a DB URL).",
    no_args_is_help=True,
)

# A str, not a Path: a Path would collapse the '//' of postgresql+psycopg://... URLs.
_LEDGER = Annotated[str, option("ledger", "Ledger: a SQLite file path or a SQLAlchemy URL.")]
_ONE_PRINCIPAL = Annotated[str, option("principal", "One principal (default: all).")]


def _g(value: float) -> str:
    return f"{value:.6g}"


@budget_app.command("set")
def set_cmd(
    ledger: _LEDGER = ...,
    principal: Annotated[str, option("principal", "Whose budget (created if new).")] = ...,
    epsilon: Annotated[str, option("epsilon", "Total epsilon budget, > 0.")] = ...,
    delta: Annotated[str, option("delta", "Total delta budget in [0, 1).")] = "0",
    allow_weak: AllowWeak = False,
    as_json: Json = False,
) -> None:
    """Create a principal with a total budget, or change its total (never below spent)."""
    # Taken as text so '0.1' is exactly one tenth, not the nearest binary float. Checked before
    # the ledger is opened: a refused `budget set` leaves no database or lock file behind.
    _, _, total_delta = check_budget(principal, epsilon, delta)
    # one delta policy in every command: a total delta above 1e-3 lets the releases charged
    # to it each reveal a record with that probability (refused, exit 4, unless --allow-weak)
    check_delta_policy(float(total_delta), allow_weak)
    with BudgetLedger(ledger) as book:
        status = book.set_budget(principal, epsilon, delta)
        if as_json:
            emit_json({"ledger": book.location, **status.to_dict()})
            return
        console.print(f"budget of [bold]{status.principal}[/bold]: epsilon "
                      f"{_g(float(status.budget_epsilon_exact))}, delta "
                      f"{_g(float(status.budget_delta_exact))}; spent "
                      f"{_g(float(status.spent_epsilon_exact))}, remaining epsilon "
                      f"{_g(float(status.remaining_epsilon_exact))}")


@budget_app.command("show")
def show_cmd(
    ledger: _LEDGER = ...,
    principal: _ONE_PRINCIPAL = None,
    as_json: Json = False,
) -> None:
    """Budget, spent and remaining (epsilon, delta) per principal."""
    with BudgetLedger(ledger, create=False) as book:
        statuses = [book.status(principal)] if principal is not None else book.statuses()
        if as_json:
            emit_json({"ledger": book.location, "accountant": ACCOUNTANT,
                       "principals": [s.to_dict() for s in statuses]})
            return
        if not statuses:
            console.print("no principals yet; add one with `privlab budget set --ledger "
                          f"{book.location} --principal NAME --epsilon E`")
            return
        table = Table(title=f"privacy budgets in {book.location}",
                      caption=f"accountant: {ACCOUNTANT}")
        for col in ("principal", "eps total", "eps spent", "eps left", "delta total",
                    "delta spent", "delta left", "charges"):
            table.add_column(col, justify="left" if col == "principal" else "right")
        for s in statuses:
            table.add_row(s.principal, *(_g(float(v)) for v in (
                s.budget_epsilon_exact, s.spent_epsilon_exact, s.remaining_epsilon_exact,
                s.budget_delta_exact, s.spent_delta_exact, s.remaining_delta_exact)),
                str(s.n_charges))
        console.print(table)


@budget_app.command("history")
def history_cmd(
    ledger: _LEDGER = ...,
    principal: _ONE_PRINCIPAL = None,
    as_json: Json = False,
) -> None:
    """Every charge in commit order (append-only), and every budget change."""
    with BudgetLedger(ledger, create=False) as book:
        entries = book.history(principal)
        changes = book.budget_changes(principal)
        if as_json:
            emit_json({"ledger": book.location, "principal": principal,
                       "entries": [e.to_dict() for e in entries],
                       "budget_changes": [c.to_dict() for c in changes]})
            return
        if not entries:
            console.print("no charges yet")
        else:
            table = Table(title=f"charges in {book.location}")
            for col in ("#", "when (UTC)", "principal", "epsilon", "delta", "eps left",
                        "description"):
                table.add_column(col, justify="right" if col in ("#", "epsilon", "delta",
                                                                 "eps left") else "left")
            for e in entries:
                table.add_row(str(e.entry_id), e.created_at.strftime("%Y-%m-%d %H:%M:%S"),
                              e.principal, _g(e.epsilon), _g(e.delta), _g(e.remaining_epsilon),
                              e.description)
            console.print(table)
        for c in changes:
            before = ("created" if c.previous_epsilon_exact is None else
                      f"was {_g(float(c.previous_epsilon_exact))}")
            console.print(f"budget {c.created_at:%Y-%m-%d %H:%M:%S} {c.principal}: epsilon "
                          f"{_g(float(c.budget_epsilon_exact))} ({before}), delta "
                          f"{_g(float(c.budget_delta_exact))}")


@budget_app.command("verify")
def verify_cmd(ledger: _LEDGER = ..., as_json: Json = False) -> None:
    """Recompute every total from the entries; exit 1 if anything disagrees."""
    with BudgetLedger(ledger, create=False) as book:
        check = book.verify()
        if as_json:
            emit_json({"ledger": book.location, **check.to_dict()})
        else:
            console.print(f"ledger {book.location}: {check.principals} principals, {check.entries} "
                          f"entries, integrity {check.integrity or 'n/a'}")
            for problem in check.problems:
                console.print(f"  problem: {problem}")
        if not check.ok:
            raise PrivlabError(f"ledger {book.location} is inconsistent: "
                               f"{check.problems[0] if check.problems else check.integrity}")
        if not as_json:
            console.print("  consistent: every total equals the sum of its entries")


def register(app: typer.Typer) -> None:
    app.add_typer(budget_app, name="budget")
