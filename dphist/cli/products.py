"""The products drawn from a release, reading the release only and spending no budget: ``synth`` (synthetic
records), ``plot`` (a picture) and ``review`` (a page for a disclosure review)."""

from __future__ import annotations

import warnings

import click


@click.command("synth")
@click.argument("release_dir", metavar="RELEASE_DIR")
@click.option("--rows", "-n", required=True, type=click.IntRange(0, 10**9), metavar="N", help="Rows to generate.")
@click.option("--table", "-t", metavar="NAME", help="The released table to sample (needed if there are several).")
@click.option("--joint", is_flag=True, help="Draw records over the columns of all tables together: a "
              "maximum-entropy table fitted to all of them by iterative proportional fitting.")
@click.option("--out", "-o", required=True, metavar="FILE", help="Output file: .csv, .parquet or .json.")
@click.option("--seed", type=click.IntRange(min=0), metavar="N", help="Reproducible sampling.")
@click.option("--overwrite", is_flag=True, help="Replace FILE if it exists.")
def synth_command(release_dir, rows, table, joint, out, seed, overwrite):
    """Synthetic records drawn from a released table: cells in proportion to their released counts, then a
    value inside each cell (uniform within a numeric or date bin, the label of a category).

    Post-processing only: it reads the release, never the private data, and spends no budget. The records
    reproduce the released table, nothing more: relations inside a bin, or between columns that are not in one
    table together, are not in the release and are not in the records.

    With --joint the records have the columns of all tables, drawn from the maximum-entropy table that has them
    all as marginals (they must agree, as the tables of 'dphist release --marginals' do). It reproduces each
    table and invents no other association: from age,sex and sex,income, age and income are independent given
    sex.
    """
    import numpy as np

    from ..products.output_file import TABLE_SUFFIXES, atomic_output, check_output_file, write_frames
    from ..products.synth import plan_synthesis

    if joint and table is not None:
        raise click.UsageError("give --table or --joint, not both")
    path = check_output_file(out, overwrite, TABLE_SUFFIXES)  # before the release is read
    with warnings.catch_warnings(record=True) as caught:  # shown as one line each, not Python's two-line form
        warnings.simplefilter("always")
        plan = plan_synthesis(release_dir, rows, table, joint)  # every check, before any record is drawn
    for warning in caught:
        click.echo(f"Warning: {warning.message}", err=True)
    # Streamed a chunk at a time into a temp file renamed into place: memory does not grow with --rows.
    with atomic_output(path) as fh:
        written = write_frames(fh, plan.chunks(np.random.default_rng(seed)), TABLE_SUFFIXES[path.suffix.lower()],
                               plan.prototype())
    click.echo(f"wrote {written} synthetic rows to {out}", err=True)


@click.command("plot")
@click.argument("release_dir", metavar="RELEASE_DIR")
@click.option("--table", "-t", metavar="NAME", help="The released table to draw (needed if there are several).")
@click.option("--out", "-o", required=True, metavar="FILE", help="The picture, e.g. chart.png.")
@click.option("--log/--linear", "log_scale", default=None, help="Counts on a symmetric-log scale (linear "
              "between -1 and 1, so zeros show) or a linear one [heat maps: log when their non-zero counts span "
              "more than two decades; bars: linear].")
@click.option("--overwrite", is_flag=True, help="Replace FILE if it exists.")
def plot_command(release_dir, table, out, log_scale, overwrite):
    """Draw a released table: bars with their 95 % intervals (one column), a heat map (two), or small multiples
    of heat maps (three), hatching cells whose interval includes 0. A note says where a table has no intervals
    and why. Reads the release only. Needs matplotlib: pip install 'dphist[plot]'."""
    from ..products.output_file import check_output_file
    from ..products.plot import picture_suffixes, plot_release

    check_output_file(out, overwrite, picture_suffixes())  # before the release is read
    plot_release(release_dir, out, table, log_scale)
    click.echo(f"wrote {out}", err=True)


@click.command("review", short_help="One self-contained HTML page for a disclosure review of a release.")
@click.argument("release_dir", metavar="RELEASE_DIR")
@click.option("--out", "-o", default="review.html", show_default=True, metavar="FILE.html",
              help="The page to write: outside any release folder (a release's files are hashed in the ledger).")
@click.option("--overwrite", is_flag=True, help="Replace FILE if it exists.")
@click.option("--ledger", "ledger_path", metavar="PATH", help="The ledger the release was charged to, for its "
              "history and what is left under the cap [$DPHIST_LEDGER, else ~/.local/share/dphist/ledger.sqlite].")
def review_command(release_dir, out, overwrite, ledger_path):
    """One self-contained HTML page for a disclosure review of a release: what was released, how private (every
    step's spend, the ledger's history and what is left under the cap), how accurate (expected errors, 95 %
    intervals, unreliable cells, pictures) and what to watch (test mode, no cap, clamped or dropped values).

    Post-processing only: it reads the release and the ledger, never the data, and spends nothing. The page needs
    nothing beside it (no script, no request) and prints to A4 or Letter. To ship the page inside a release, make
    it with the release: 'dphist release ... --review'. Figures need matplotlib: pip install 'dphist[plot]'.
    """
    from ..products.review import write_review

    write_review(release_dir, out, ledger_path, overwrite)
    click.echo(f"wrote {out}", err=True)
