"""The ``dphist`` command line: a thin click layer over the library.  Each command parses its options and calls
the library; what every command shares lives apart:

    contract.py   the entry point's promise: one line on stderr and an exit code for every failure
    messages.py   the run's log format (text or JSON lines), its error line, warnings and notices
    streams.py    stdout and stderr guarded against closed descriptors and vanished readers
    options.py    the options several commands share, declared once
    release.py, schema.py, check.py, budget.py, tools.py (evaluate, bench, audit, algorithms), products.py (synth,
    plot, review)

Only light modules are imported here: ``dphist --version`` and ``--help`` must not load pandas, scipy or the
algorithms (tests/cli/test_startup.py, bench/startup.py).  Each command imports the machinery it runs.
"""

from __future__ import annotations

import click

from ..version import __version__
from .budget import budget_group
from .check import check_command
from .contract import Group
from .products import plot_command, review_command, synth_command
from .release import release_command
from .schema import schema_command
from .tools import algorithms_command, audit_command, bench_command, evaluate_command

__all__ = ["main"]


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="dphist")
def main():
    """Publish differentially private histograms and contingency tables from CSV or Parquet files.

    Typical use:

    \b
        dphist schema data.csv -o schema.yaml      # draft a schema, then REVIEW it (it is public)
        dphist check data.csv --schema schema.yaml # what a release would drop (not private; spends nothing)
        dphist release data.csv --schema schema.yaml --epsilon 0.5 --columns age,sex
    """


for _command in (release_command, schema_command, check_command, evaluate_command, audit_command, bench_command,
                 synth_command, plot_command, review_command, budget_group, algorithms_command):
    main.add_command(_command)


if __name__ == "__main__":  # pragma: no cover
    main()
