"""The options several commands share, declared once: the budget (--epsilon, --rho, --noise), --delta, the
privacy unit, --seed, where a run is charged (--ledger, --dataset-id, --lock-timeout), the algorithms' options,
and the checks of names given on the command line.  ``when`` prefixes the help of a command where the option
applies only with another one (schema: "With --private").
"""

from __future__ import annotations

import re

import click

from ..text import quoted

LEDGER_DEFAULT = "$DPHIST_LEDGER, else ~/.local/share/dphist/ledger.sqlite"


def _help(when: str | None, text: str) -> str:
    if not when:
        return text
    return f"{when}: " + (text[0].lower() + text[1:] if text[1:2].islower() else text)  # "Protect" but "TEST"


def _options(*decorators):
    """One decorator applying ``decorators`` in the order listed (their options appear in --help in that order)."""
    def apply(command):
        for decorator in reversed(decorators):
            command = decorator(command)
        return command
    return apply


DELTA_HELP = "δ of (ε, δ)-DP, needed only to find the categories of text columns no schema declares, e.g. 1e-6 [0]."


def delta_option(when: str | None = None, text: str = DELTA_HELP):
    return click.option("--delta", metavar="D", help=_help(when, text))


def budget_options(command):
    """--epsilon, --rho and --noise: the release's budget in one of three definitions (planning.DEFINITIONS)."""
    return _options(
        click.option("--epsilon", "-e", metavar="E", help="Total privacy budget ε > 0, e.g. 0.5 (kept exact): pure "
                     "ε-DP with discrete Laplace noise; with --delta D --noise gaussian, (ε, δ)-DP with discrete "
                     "Gaussian noise. Give --epsilon or --rho."),
        click.option("--rho", metavar="R", help="Total budget ρ of ρ-zCDP, e.g. 0.05 (kept exact, at most 1000): "
                     "discrete Gaussian noise of variance Δ₂²/(2ρ), ρ adding up exactly over tables and steps; the "
                     "report also gives the ε it implies at δ = 1e-6. Every column must be declared in --schema."),
        click.option("--noise", type=click.Choice(["laplace", "gaussian"]), help="Noise on the counts: 'laplace' "
                     "(pure ε-DP; the default with --epsilon; not with --rho) or 'gaussian' (the discrete Gaussian: implied by --rho; "
                     "with --epsilon E it needs --delta D and releases (ε, δ)-DP, run as ρ-zCDP with the largest ρ "
                     "whose (ε, δ) holds by the tight CKS20 conversion). Gaussian noise suits many measurements: "
                     "marginal sets, deep trees, large tables."))(command)


def unit_options(when: str | None = None):
    """--privacy-unit and --max-rows-per-unit: the protected unit and its contribution bound."""
    return _options(
        click.option("--privacy-unit", metavar="COLUMN", help=_help(when, "Protect each value of COLUMN (a person, "
                     "a household) with all its rows, not one row; needs --max-rows-per-unit.")),
        click.option("--max-rows-per-unit", type=click.IntRange(min=1), metavar="K", help="With --privacy-unit: "
                     "count at most K rows per unit (chosen at random); noise grows K-fold."))


def seed_option(when: str | None = None):
    return click.option("--seed", type=click.IntRange(min=0), metavar="N", help=_help(
        when, "TEST MODE: deterministic noise. The result is NOT differentially private and is not recorded in "
              "the ledger."))


def checked_name(ctx, param, value):
    """--dataset-id and --run-key as checked, normalised names (dphist.declare.identifiers), refused before anything runs."""
    from ..declare import identifiers

    if value is None:
        return None
    check = identifiers.run_key if param.name == "run_key" else identifiers.dataset_id
    return check(value, param.opts[0])


def ledger_options(when: str | None = None):
    """--ledger, --dataset-id and --lock-timeout: where a run outside test mode is charged."""
    return _options(
        click.option("--ledger", "ledger_path", metavar="PATH", help=_help(
            when, f"Budget ledger [{LEDGER_DEFAULT}]. Every run outside test mode is recorded there.")),
        click.option("--dataset-id", metavar="ID", callback=checked_name, help="The data set's name in the ledger, "
                     "one line of at most 200 characters [the real path of the input file, or of the directory "
                     "holding a directory's or glob's files]."),
        click.option("--lock-timeout", default=60.0, show_default=True, type=click.FloatRange(0, 86_400),
                     metavar="S", callback=lambda ctx, param, value: _finite(param, value),
                     help="Seconds to wait for another run holding the ledger (then exit 4)."))


def algorithm_option_flags(command):
    """--branching, --budget-split and --option: the algorithms' options (see :func:`algorithm_options`)."""
    return _options(
        click.option("--branching", "-b", metavar="B", help="Tree algorithms (h, hb, quadtree): splits per node and "
                     "axis, or 'auto' [h, quadtree: 2; hb: chosen for the domain]."),
        click.option("--budget-split", type=click.Choice(["uniform", "geometric"]),
                     help="Tree algorithms: how ε is shared among tree levels [h, hb: uniform; quadtree: "
                          "geometric]."),
        click.option("--option", "options", multiple=True, metavar="KEY=VALUE",
                     help="An algorithm option, e.g. alpha=0.25 or cap=100 (repeatable; every algorithm's options "
                          "and what they do: 'dphist algorithms')."))(command)


# The budget commands' --ledger: the ledger they read or change.
ledger_option = click.option("--ledger", "ledger_path", metavar="PATH", help=f"Ledger file [{LEDGER_DEFAULT}].")


def account_name(ctx, param, value):
    """A DATASET argument as a checked, normalised account name (dphist.declare.identifiers.account)."""
    from ..declare import identifiers

    return None if value is None else identifiers.account(value, "the data set id")


def _finite(param, value: float) -> float:
    if value != value:  # click's FloatRange lets NaN through
        raise click.BadParameter("must be a number, not nan", param=param)
    return value


def algorithm_options(branching, budget_split, pairs=()) -> dict:
    """The algorithm options of --option KEY=VALUE (repeatable), --branching and --budget-split.  Each option is
    given once: a key repeated, or given both by --option and by its own flag, is a UsageError (which one was
    meant cannot be told).  ('workload', the release's own setting, is refused by ReleaseOptions.)"""
    options = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise click.UsageError(f"--option needs KEY=VALUE, got {quoted(pair)}")
        key = key.strip().replace("-", "_")
        if key in options:
            raise click.UsageError(f"--option {quoted(key, '')} is given twice; give each option once")
        value = value.strip()
        # Whole numbers in ASCII digits become ints; anything else stays text for the algorithm to validate
        # ('²'.isdigit() is true, but int('²') fails).
        whole = re.fullmatch(r"-?[0-9]+", value) is not None and len(value) <= 30
        options[key] = int(value) if whole else value
    for flag, key, value in (("--branching", "branching", branching), ("--budget-split", "budget_split",
                                                                      budget_split)):
        if value is not None and key in options:
            raise click.UsageError(f"{flag} and --option {key}=... both set {key}; give it once")
    if branching is not None:
        options["branching"] = branching if branching == "auto" else _int_option("--branching", branching)
    if budget_split is not None:
        options["budget_split"] = budget_split
    return options


def _int_option(flag: str, value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise click.UsageError(f"{flag} must be an integer or 'auto', got {quoted(value)}") from None
