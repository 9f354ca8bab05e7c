"""``dphist budget``: the privacy-budget ledger's commands (set, show, history, verify, recover)."""

from __future__ import annotations

import json
import os
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ..errors import DataError, DphistError, UsageError
from .messages import notice
from .options import account_name, ledger_option

if TYPE_CHECKING:
    from ..publishing.ledger import Ledger


@click.group("budget")
def budget_group():
    """The privacy-budget ledger: caps per data set, what was spent, and a tamper check.

    \b
        dphist budget set ID --epsilon 5          # cap a data set (releases past it exit 3)
        dphist budget set ID --rho 0.5            # or cap it in rho (zCDP)
        dphist budget show [ID]                   # spent, remaining, number of releases
        dphist budget history ID [--format json]  # every entry, oldest first
        dphist budget verify                      # check the file and the hash chain (exit 1 if damaged)
        dphist budget recover                     # finish or clean up runs that were killed
    """


def _recorded_as(dataset: str) -> str | None:
    """If ``dataset`` names an existing file, directory or glob, the id its releases get without --dataset-id,
    when that differs from ``dataset``: a cap set on the path as typed would not apply to them."""
    import glob

    from ..declare import identifiers

    try:
        if not (os.path.lexists(dataset) or glob.glob(dataset, recursive=True)):
            return None
        default = identifiers.default_dataset_id(dataset)
    except (DphistError, OSError, ValueError):
        return None
    return None if default == dataset else default


@budget_group.command("set")
@click.argument("dataset", callback=account_name)
@click.option("--epsilon", "-e", metavar="E", help="Cap the data set in epsilon: its total ε over all releases "
              "(pure and --noise gaussian (ε, δ) releases count their ε and δ; --rho releases are refused).")
@click.option("--rho", metavar="R", help="Cap the data set in rho (zCDP) instead: its total ρ over all releases "
              "(--rho and --noise gaussian releases count their ρ, pure ones ε²/2; pure releases with a δ are "
              "refused).")
@click.option("--delta", default="0", show_default=True, metavar="D", help="With --epsilon, the data set's total "
              "δ; with --rho, the δ at which its spend is shown as (ε, δ) (default then 1e-6).")
@click.option("--reason", default="", metavar="TEXT", help="Why the cap is set or changed (kept in the ledger).")
@click.option("--privacy-unit", metavar="COLUMN", help="Cap the budget of releases protecting each COLUMN value "
              "(release --privacy-unit COLUMN), a separate account from the per-row budget.")
@ledger_option
def budget_set(dataset, epsilon, rho, delta, reason, privacy_unit, ledger_path):
    """Set (or change) the cap of DATASET, in epsilon (--epsilon, with --delta) or in rho (--rho); the change is
    itself a ledger entry. Every release is counted in the cap's definition (see 'dphist budget show')."""
    from ..privacy import parse_delta, parse_epsilon, parse_rho
    from ..publishing.budget_status import budget_status
    from ..publishing.ledger import ROW_UNIT, Ledger

    if epsilon is not None and rho is not None:
        raise click.UsageError("give the cap as --epsilon E (with --delta D) or as --rho R, not both")
    if epsilon is None and rho is None:
        raise click.UsageError("missing --epsilon E or --rho R (the data set's total budget, e.g. --epsilon 5)")
    eps = None if epsilon is None else parse_epsilon(epsilon)
    r = None if rho is None else parse_rho(rho, "--rho")
    dlt = parse_delta(delta, "--delta")
    ledger = Ledger(ledger_path)
    unit = ROW_UNIT if privacy_unit is None else f"unit:{privacy_unit}"
    ledger.set_cap(dataset, unit, eps, dlt, reason, rho=r)
    recorded_as = _recorded_as(dataset)
    if recorded_as is not None:
        notice(f"'{dataset}' is a path, but its releases are recorded as '{recorded_as}' unless they give "
               f"--dataset-id '{dataset}': this cap applies only to those that do")
    (status,) = budget_status(ledger, dataset, unit)
    who = f"{dataset}{'' if privacy_unit is None else ' (per ' + privacy_unit + ')'}"
    click.echo(f"{who}: {status.cap_line()}")
    if status.note:
        notice(f"{who}: {status.note}")


@budget_group.command("show")
@click.argument("dataset", required=False, callback=account_name)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@ledger_option
def budget_show(dataset, fmt, ledger_path):
    """Cap, spent and remaining budget of DATASET (or of every data set in the ledger), in the cap's definition
    (epsilon or rho), and the other definition as converted: a rho cap and its spend as epsilon at a reference
    delta (the cap's, else 1e-6; tight conversion, rounded up), an epsilon-capped spend as rho."""
    from ..publishing.budget_status import budget_status

    ledger = _reading_ledger(ledger_path)
    accounts = budget_status(ledger, dataset)
    if dataset and not accounts:
        raise UsageError(_not_in(ledger, dataset))
    if fmt == "json":
        click.echo(json.dumps([account.fields for account in accounts], indent=2))
        return
    if not accounts:
        click.echo(f"ledger {ledger.path}: no entries; nothing has been recorded there yet")
    for account in accounts:
        click.echo(account.summary())


@budget_group.command("history")
@click.argument("dataset", callback=account_name)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@ledger_option
def budget_history(dataset, fmt, ledger_path):
    """Every ledger entry of DATASET, oldest first."""
    from ..privacy import format_fraction

    ledger = _reading_ledger(ledger_path)
    entries = ledger.history(dataset)
    if not entries:
        raise UsageError(_not_in(ledger, dataset))
    if fmt == "json":
        click.echo(json.dumps(entries, indent=2))
        return
    for e in entries:
        amount = ""
        if e["kind"] in ("RESERVE", "CAP"):
            # An entry with no ε (a --rho release, a rho cap) has an empty epsilon column; ρ is in its detail.
            detail = e["detail"]
            if e["epsilon"]:
                amount += f" epsilon {format_fraction(Fraction(e['epsilon']))}"
            if e["delta"] not in ("", "0") and not (e["kind"] == "CAP" and detail.get("definition") == "zcdp"):
                amount += f" delta {format_fraction(Fraction(e['delta']))}"
            if detail.get("definition") in ("zcdp", "approximate") and "rho" in detail:
                amount += f" rho {format_fraction(Fraction(detail['rho']))}"
        key = f" key {e['run_key']}" if e["run_key"] else ""
        click.echo(f"{e['seq']:>6} {e['ts']} {e['kind']:<7} run {e['run_id'][:8]}{amount}{key}")


@budget_group.command("verify")
@ledger_option
def budget_verify(ledger_path):
    """Check the ledger file and its hash chain: exit 0 if intact, 1 if damaged (the problems on stdout, one line
    on stderr), 2 if it could not be checked (no file there, a full disk, an I/O error: the line says which; the
    ledger was not found damaged). Reads only: it works on a full disk."""
    from ..publishing.ledger import LedgerDamaged, LedgerError

    try:
        ledger = _reading_ledger(ledger_path)
        problems = ledger.verify()
    except LedgerDamaged as exc:
        raise DataError(str(exc)) from None
    except LedgerError as exc:
        raise type(exc)(f"cannot check {exc}") from None
    if problems:
        for p in problems:
            click.echo(p)
        raise DataError(f"ledger {ledger.path}: damaged or edited outside dphist ({len(problems)} problem(s): "
                        f"{problems[0]}); restore it from a backup")
    click.echo(f"ledger {ledger.path}: hash chain intact, head {ledger.head()}")


@budget_group.command("recover")
@ledger_option
def budget_recover(ledger_path):
    """Finish or clean up the runs of this host that were killed: a release that was complete is moved into
    place, partial output is removed, and reservations of runs that never read data are given back. Every
    release also does this before it starts; this command does it now. It never reads data or draws noise.

    A release whose folder no longer holds exactly the files it committed (a file put in, changed or removed) is
    left as it is, with a line saying what to do, and the command exits 1; run it again once that is done."""
    from ..publishing.ledger import Ledger
    from ..publishing.transaction import recover

    ledger = Ledger(ledger_path)
    done = recover(ledger)
    for run in done:
        click.echo(run.line)
    left = sum(run.left for run in done)
    click.echo(f"ledger {ledger.path}: {len(done) - left} interrupted run(s) recovered"
               + (f", {left} left as they are" if left else ""))
    if left:
        raise DataError(f"ledger {ledger.path}: {left} interrupted run(s) could not be finished and were left as "
                        "they are (the lines above say why and what to do); their budget stays spent")


def _reading_ledger(ledger_path) -> Ledger:
    """The ledger for the reading commands (show, history, verify), opened read-only: they never write it, so they
    work on a full disk or a read-only mount (reservations of runs that died before reading are shown as given
    back; the next release or 'budget recover' records that).  No file there is LedgerMissing (exit 2): a
    mistyped --ledger must not look like a ledger with nothing spent."""
    from ..publishing.ledger import Ledger, default_ledger_path

    return Ledger(Path(ledger_path) if ledger_path else default_ledger_path(), readonly=True)


def _not_in(ledger: Ledger, dataset: str) -> str:
    """The data set is not in the ledger: say so, and under which id its releases are recorded if it is a path."""
    recorded_as = _recorded_as(dataset)
    hint = "" if recorded_as is None else f" (releases of that path are recorded as '{recorded_as}')"
    return f"data set '{dataset}' is not in the ledger {ledger.path}{hint}"
