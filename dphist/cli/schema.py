"""``dphist schema``: a draft schema copied from the data, or with --private, one found with differential privacy
and charged to the ledger."""

from __future__ import annotations

from pathlib import Path

import click
from click.core import ParameterSource

from ..errors import UsageError
from ..text import quoted
from .charges import uncapped, warn_uncapped
from .messages import notice
from .options import delta_option, ledger_options, seed_option, unit_options


@click.command("schema")
@click.argument("input", metavar="INPUT")
@click.option("--out", "-o", metavar="FILE", help="Write the schema here instead of stdout.")
@click.option("--private", is_flag=True, help="Find every domain with differential privacy (spends --epsilon, "
              "charged to the ledger): the result may be frozen and used for later releases.")
@click.option("--epsilon", "-e", metavar="E", help="With --private: the ε to spend, shared equally by the columns.")
@delta_option("With --private")
@click.option("--columns", "-c", metavar="A,B", help="With --private: only these columns [all].")
@click.option("--bins", type=click.IntRange(1, 10_000), metavar="N",
              help="Most bins per numeric column; whole-numbered columns of at most 32 values get one bin per value "
                   "[10; with --private 16].")
@click.option("--max-categories", type=click.IntRange(1, 100_000), metavar="N",
              help="Text columns: the draft leaves columns with more values for you to declare [100]; with "
                   "--private, the most categories kept [100].")
@click.option("--binning", type=click.Choice(["equal-width", "quantiles"]), help="With --private: bins of a numeric "
              "column, equal widths or cut at DP quantiles [equal-width].")
@unit_options("With --private")
@seed_option("With --private")
@ledger_options("With --private")
@click.option("--require-cap", is_flag=True, envvar="DPHIST_REQUIRE_CAP", help="With --private: refuse (exit 3, "
              "before reading) a data set that has no cap in the ledger [$DPHIST_REQUIRE_CAP]; without it, an "
              "uncapped data set gets a warning.")
@click.option("--overwrite", is_flag=True, help="Replace FILE if it exists.")
@click.pass_context
def schema_command(ctx, input, out, private, epsilon, delta, columns, bins, max_categories, binning, privacy_unit,
                   max_rows_per_unit, seed, ledger_path, dataset_id, lock_timeout, require_cap, overwrite):
    """Write a schema for INPUT.

    Without --private: a DRAFT that copies bounds and categories FROM THE DATA; they are not private. Review them
    and replace them with public, coarsened values (round bounds, categories from a code list) before any release.

    With --private --epsilon E: the domains are found from noisy counts, exactly as a release without a schema
    finds them, and E (and --delta) is charged to the ledger. The schema may be frozen and reused; releases that
    use it spend nothing on discovery.
    """
    from ..declare.draft import draft_schema
    from ..products.output_file import atomic_output, check_output_file

    if out is not None:  # before the data is read (and, with --private, before anything is charged)
        check_output_file(out, overwrite)
        if Path(out).suffix.lower() == ".json":
            raise UsageError(f"--out {quoted(out, '')}: a schema is written as YAML, and a .json file is read back as "
                             "JSON: name it .yaml or .yml")
    if private:
        _private_schema(input, out, epsilon, delta, columns, bins, max_categories, binning, privacy_unit,
                        max_rows_per_unit, seed, ledger_path, dataset_id, lock_timeout, require_cap)
        return
    given = {p.name: p for p in ctx.command.params}
    used = [given[name].opts[0] for name in ("epsilon", "delta", "columns", "privacy_unit", "max_rows_per_unit",
                                             "seed", "ledger_path", "dataset_id", "lock_timeout", "binning")
            if ctx.get_parameter_source(name) not in (ParameterSource.DEFAULT, None)]
    # $DPHIST_REQUIRE_CAP, set for a cron job, must not stop a draft, which charges nothing.
    if ctx.get_parameter_source("require_cap") == ParameterSource.COMMANDLINE:
        used.append("--require-cap")
    if used:
        raise click.UsageError(f"{used[0]} applies to --private only")
    text = draft_schema(input, bins=bins or 10, max_categories=max_categories or 100)
    if out:
        with atomic_output(out) as fh:
            fh.write(text.encode("utf-8"))
        click.echo(f"wrote draft schema to {out}", err=True)
    else:
        click.echo(text, nl=False)
    click.secho("WARNING: the draft's bounds and categories were copied from the data and are NOT private. "
                "Review and coarsen them before use.", err=True, fg="yellow")


def _private_schema(input, out, epsilon, delta, columns, bins, max_categories, binning, privacy_unit,
                    max_rows_per_unit, seed, ledger_path, dataset_id, lock_timeout, require_cap):
    from ..publishing.execution import charged
    from ..products.output_file import atomic_output
    from ..publishing.assemble import NOT_PRIVATE
    from ..discovery.private_schema import plan_private_schema, run_private_schema

    if epsilon is None:
        raise click.UsageError("--private needs --epsilon E: the budget spent finding the domains")
    plan = plan_private_schema(input, epsilon, delta or 0, columns, bins, max_categories, privacy_unit,
                               max_rows_per_unit, seed, binning or "equal-width")

    def work(ledger_info) -> None:
        result = run_private_schema(plan)
        if out:
            with atomic_output(out) as fh:
                fh.write(result.text.encode("utf-8"))
        else:
            click.echo(result.text, nl=False)
        found = [r["column"] for r in result.report["columns"] if "failed" not in r]
        click.echo(f"schema: {len(found)} column(s) found with epsilon {result.report['epsilon']}, delta "
                   f"{result.report['delta']}" + (f"; written to {out}" if out else ""), err=True)
        for r in result.report["columns"]:
            if "failed" in r:
                click.echo(f"  {r['column']}: not found: {r['failed']}", err=True)

    done = charged(plan, work, ledger=ledger_path, dataset_id=dataset_id, lock_timeout=lock_timeout,
                   detail={"command": "schema --private", "schema": str(Path(out).absolute()) if out else "stdout"},
                   on_test_mode=lambda: notice(NOT_PRIVATE, "test_mode"), require_cap=require_cap)
    if plan.seed is None and uncapped(done.info):
        warn_uncapped(done.dataset, plan.ledger_unit)
