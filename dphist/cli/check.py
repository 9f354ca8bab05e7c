"""``dphist check``: the schema against the data, for the data holder, before a release spends anything."""

from __future__ import annotations

import click

from ..errors import DoesNotFit
from .options import unit_options


@click.command("check")
@click.argument("input", metavar="DATA")
@click.option("--schema", "-s", "schema_path", required=True, metavar="FILE", help="The schema a release would use.")
@click.option("--columns", "-c", metavar="A,B", help="Check these declared columns, and what a table over them "
              "would count [every declared column].")
@unit_options("As in the release (here: count the rows its cap would drop)")
@click.option("--format", "-f", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="json: one JSON object, for scripts.")
def check_command(input, schema_path, columns, privacy_unit, max_rows_per_unit, fmt):
    """Compare DATA with the schema: what a release would do to the rows of each declared column.

    NOT DIFFERENTIALLY PRIVATE: the report gives exact counts and quotes data values (undeclared labels, values
    that are not numbers, the smallest and largest value). It is for the data holder: do not publish it. It
    spends nothing, never opens the ledger and writes no file.

    Per column: rows, nulls (dropped or counted in their own cell), values below and above a numeric or date
    domain (clamped or dropped), the smallest and largest value, undeclared labels with the declared value
    they most likely mean, and values a release could not read as the declared type (a CSV 'n/a' in a numeric
    column stops a release after the budget is charged). Also: declared columns the data lacks, the data's
    columns the schema does not declare, and with --privacy-unit the rows the unit's cap would drop.

    Exit codes: 0 the schema fits (rows it drops on purpose, nulls: drop or out_of_domain: drop, and rows the
    unit's cap drops are listed as notes); 6 it does not (labels it does not declare, values a release cannot
    read, a declared column missing: the report says which); 1 and 2 as for every command (unreadable data, bad
    options or schema). For a nightly job:

    \b
        dphist check data.csv -s schema.yaml && dphist release data.csv -s schema.yaml ...
    """
    from ..read.checking import check_data

    report = check_data(input, schema_path, columns, privacy_unit, max_rows_per_unit)
    click.echo(report.json() if fmt == "json" else report.text())
    if report.problems():
        raise DoesNotFit(report.failure())
