"""The tools around releases that read true counts and so publish nothing: ``evaluate`` (algorithms compared on
your table), ``bench`` (on your histograms), ``audit`` (the privacy audit) and ``algorithms`` (the list)."""

from __future__ import annotations

import functools
import json
import os
import sys

import click

from ..declare.choices import EVALUATE_WORKLOADS
from ..errors import UsageError
from ..text import quoted
from .options import algorithm_option_flags, algorithm_options, budget_options, delta_option


@click.command("evaluate")
@click.argument("input", metavar="INPUT")
@budget_options
@delta_option(text="With --epsilon and --noise gaussian: the release's δ.")
@click.option("--schema", "-s", "schema_path", required=True, metavar="FILE", help="The release's schema.")
@click.option("--columns", "-c", required=True, metavar="A,B", help="The table to evaluate.")
@click.option("--algorithm", "-a", "algorithms", default=None, metavar="A,B",
              help="Algorithms to compare, comma-separated [every one that fits the table and needs no option].")
@click.option("--trials", "-k", default=10, show_default=True, type=click.IntRange(1, 10_000),
              help="Runs per algorithm.")
@click.option("--workload", "-w", type=click.Choice(EVALUATE_WORKLOADS),
              help="Queries to score: ranges (all ranges for one column, 2000 random boxes otherwise; the default), "
                   "cells, marginals (one-way), or all-ranges, prefix, random-ranges, random-boxes, identity.")
@algorithm_option_flags
@click.option("--seed", type=click.IntRange(min=0), metavar="N", help="Deterministic noise.")
def evaluate_command(input, epsilon, rho, noise, delta, schema_path, columns, algorithms, trials, workload,
                     branching, budget_split, options, seed):
    """Compare algorithms on your own table: error on a range workload over several runs.

    A TUNING AID computed from the TRUE counts: the figures are NOT private and must not be published.
    Choosing an algorithm from them depends on the data; for a strict guarantee evaluate a public or synthetic
    stand-in with the same schema. Reports the scaled average L1 error per query (error / number of rows)
    and the RMSE per query of the released (post-processed) table.
    """
    from ..algorithms import REGISTRY
    from ..evaluation.evaluate import WARNING, evaluate

    names = [a.strip() for a in algorithms.split(",")] if algorithms else sorted(REGISTRY)
    table, info = evaluate(input, epsilon, schema_path, columns, names, trials=trials, workload=workload,
                           seed=seed, algorithm_options=algorithm_options(branching, budget_split, options),
                           skip_refused=not algorithms, rho=rho, noise=noise, delta=delta)
    click.secho(WARNING, err=True, fg="yellow")  # after the checks, so that a failure stays one line
    for name, reason in info["skipped"].items():
        click.echo(f"skipped {name}: {reason}", err=True)
    budget = f"rho {info['rho']}" if info["definition"] == "zcdp" else f"epsilon {info['epsilon']}" + (
        f" (Gaussian noise, rho {info['rho']})" if info["definition"] == "approximate" else "")
    click.echo(f"table {info['table']} ({info['cells']} cells), {budget}, workload "
               f"{info['workload']} ({info['queries']} queries), {info['trials']} runs each")
    click.echo(f"{'algorithm':<10} {'scaled L1':>12} {'± sd':>10} {'RMSE/query':>12} {'ms/run':>8}")
    for row in table.itertuples():
        sd = "" if row.scaled_l1_sd != row.scaled_l1_sd else f"{row.scaled_l1_sd:.2e}"
        click.echo(f"{row.algorithm:<10} {row.scaled_l1_mean:>12.3e} {sd:>10} {row.rmse_mean:>12.3g} "
                   f"{1000 * row.seconds_per_run:>8.1f}")


@click.command("audit")
@click.option("--algorithm", "-a", "algorithm", default="all", show_default=True, metavar="NAME|all",
              help="Audit one algorithm, 'marginals' (the marginal-set strategies separate and residual), 'units' (contribution "
                   "bounding per privacy unit), 'discovery' (private domain discovery), or all of them.")
@click.option("--quick", is_flag=True,
              help="Under a minute: one case per algorithm and the mutants of large effect, at 2e4 runs per table "
                   "(400 for data-adaptive algorithms), instead of every case at 2e6.")
@click.option("--seed", default=0, show_default=True, type=click.IntRange(min=0), help="Audit seed.")
@click.option("--no-mutants", is_flag=True, help="Skip the deliberately broken variants.")
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=None, metavar="N",
              help="Cases run in N processes at once [the number of CPUs].")
def audit_command(algorithm, quick, seed, no_mutants, jobs):
    """Black-box privacy audit: try to show that an algorithm leaks more than its claimed ε.

    First the production samplers: χ² against the exact discrete Laplace and discrete Gaussian pmfs must pass
    (p > 1e-9, unseeded) and must reject 0.9x and 1.1x the scale (σ). Then for every case (algorithm, tiny table,
    neighbouring table with one record more or less), runs the algorithm many times on both, picks the most
    revealing event of its noisy outputs on one sample and bounds the privacy loss of that event from below on
    fresh samples (Clopper–Pearson, Bonferroni over cases, total false-alarm rate 1e-6). Real algorithms must
    pass; deliberately broken mutants must be caught. Prints a line per case as it finishes. Exits 0 only if
    both hold.
    """
    from ..algorithms import REGISTRY
    from dphist_audit import FULL, QUICK, audit, default_cases, quick_cases
    from dphist_audit.sampler import check_gaussian_sampler, check_sampler
    from ..privacy import SystemBits

    names = None if algorithm == "all" else [algorithm]
    if names and names[0] not in REGISTRY and names[0] not in ("marginals", "units", "discovery"):
        raise UsageError(f"unknown algorithm {quoted(algorithm)} (available: {', '.join(sorted(REGISTRY))}, "
                         "marginals, units, discovery, all)")
    draws = 300_000 if quick else 2_000_000
    click.echo(f"{'sampler (OS CSPRNG)':<30} {'draws':>10} {'p exact':>9} {'p x0.9':>9} {'p x1.1':>9}  verdict")
    sampler_ok = True
    for scale in ("1", "10", "100/3"):
        s = check_sampler(scale, draws, SystemBits(), threshold=1e-9)
        sampler_ok &= s.ok
        click.echo(f"{'discrete Laplace, scale ' + scale:<30} {draws:>10,} {s.p_exact:>9.2g} {s.p_smaller:>9.2g} "
                   f"{s.p_larger:>9.2g}  {'pass' if s.ok else 'FAIL'}")
    for sigma2 in ("1", "100", "12345/7"):
        s = check_gaussian_sampler(sigma2, draws, SystemBits(), threshold=1e-9)
        sampler_ok &= s.ok
        click.echo(f"{'discrete Gaussian, sigma2 ' + sigma2:<30} {draws:>10,} {s.p_exact:>9.2g} {s.p_smaller:>9.2g} "
                   f"{s.p_larger:>9.2g}  {'pass' if s.ok else 'FAIL'}")

    size = QUICK if quick else FULL
    recipe = functools.partial(quick_cases if quick else default_cases, names, mutants=not no_mutants)
    count = len(recipe())
    width = len(str(count))
    click.echo(f"{'':<{2 * width + 3}}{'case':<52} {'claimed ε':>9} {'ε lower bound':>13} {'at δ':>9} "
               f"{'runs':>9} {'s':>6}  verdict")

    def progress(i, m, r):
        at = f"{r.delta:>9.3g}" if r.rho is not None else f"{'0':>9}"
        click.echo(f"[{i + 1:>{width}}/{m}] {r.case:<52} {float(r.epsilon):>9.3g} {r.lower_bound:>13.3f} {at} "
                   f"{r.runs:>9,} {r.seconds:>6.1f}  {r.verdict}")

    results = audit(recipe, size=size, seed=seed, progress=progress, jobs=jobs or os.cpu_count() or 1)
    bad = [r for r in results if not r.ok]
    click.echo(f"{len(results)} cases ({size.name} audit: {size.n_test:,} test runs per table, "
               f"{size.runs_note()}), seed {seed}: "
               + ("all real algorithms pass, all mutants caught" if not bad else f"{len(bad)} problem(s)")
               + ("" if sampler_ok else "; the sampler check FAILED"))
    if bad or not sampler_ok:
        sys.exit(1)


@click.command("bench")
@click.argument("files", nargs=-1, required=True, metavar="FILE...")
@click.option("--algorithm", "-a", "algorithms", default=None, metavar="A,B", help="Algorithms [all].")
@click.option("--scale", "scales", multiple=True, type=click.IntRange(1), default=(1_000, 100_000),
              show_default=True, help="Records drawn per sample (repeatable).")
@click.option("--epsilon", "-e", "epsilons", multiple=True, default=("0.1", "1"), show_default=True,
              help="Budgets to try (repeatable).")
@click.option("--samples", default=5, show_default=True, type=click.IntRange(1), help="Data samples per setting.")
@click.option("--runs", default=2, show_default=True, type=click.IntRange(1), help="Noise runs per sample.")
@click.option("--jsonl", metavar="FILE", help="Also write one JSON record per run here.")
def bench_command(files, algorithms, scales, epsilons, samples, runs, jsonl):
    """Benchmark algorithms on your own count histograms (.npy, or CSV of numbers), DPBench style.

    Each FILE is treated as a distribution: samples of --scale records are drawn from it and every algorithm
    is scored on range queries (prefix queries in 1-D, 2000 random boxes in 2-D) by the scaled average L1
    error. Uses the histograms' true counts: the output is NOT private; do not publish it.
    """
    from ..algorithms import REGISTRY
    from ..evaluation.benchmark import load_histogram, run_benchmark, summarize
    from ..publishing.writers import write_text_atomic
    from ..privacy import parse_epsilon

    for e in epsilons:
        parse_epsilon(e)
    names = [a.strip() for a in algorithms.split(",")] if algorithms else sorted(REGISTRY)
    for name in names:
        if name not in REGISTRY:
            raise UsageError(f"unknown algorithm {quoted(name)} (available: {', '.join(sorted(REGISTRY))})")
    data = {}
    for f in files:
        x = load_histogram(f)
        data[os.path.basename(f)] = x
    click.secho("NOT PRIVATE: computed from the histograms' true counts; do not publish.", err=True, fg="yellow")
    records = run_benchmark(data, names, list(scales), list(epsilons), samples, runs)
    if jsonl:
        write_text_atomic(jsonl, "".join(json.dumps(r) + "\n" for r in records))
    click.echo(summarize(records))


@click.command("algorithms")
def algorithms_command():
    """List the available algorithms and their options (set with --option KEY=VALUE or a job spec's options)."""
    from ..algorithms import REGISTRY

    for name in sorted(REGISTRY):
        click.echo(f"{name:<14} {REGISTRY[name].summary}")
        cls = REGISTRY[name]
        for key, (default, _) in cls.options.items():
            # Tree methods leave branching and budget_split to the method's own default.
            shown = {"branching": getattr(cls, "default_branching", None),
                     "budget_split": getattr(cls, "default_split", None)}.get(key) if default is None else default
            note = f": {cls.option_help[key]}" if key in cls.option_help else ""
            click.echo(f"{'':<15}option {key} ({'required' if shown is None else f'default {shown}'}){note}")
        for ceiling in cls.ceilings:  # checked before any row is read
            click.echo(f"{'':<15}ceiling on {', '.join(ceiling.options)}: {ceiling.describe()}")
