"""Comparing algorithms on the steward's own table: a tuning aid computed from the TRUE counts.

Nothing here is private.  The errors are measured against the exact counts, so they must never be published,
and an algorithm chosen by looking at them is a choice that depended on the data: for a strict guarantee,
evaluate on a public or synthetic stand-in with the same schema (an older public release, or sample data).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pandas as pd

from . import workloads
from ..algorithms import REGISTRY, applicable_options
from ..api import plan_release
from ..declare.choices import EVALUATE_WORKLOADS as WORKLOADS, RELEASE_WORKLOADS
from ..read.counting import count_tables
from ..errors import UsageError
from ..inference.nonnegative import nonnegative_integer_table
from ..privacy import PrivacyBudget, ZCDPBudget, bit_source, format_fraction
from ..declare.schema import Schema, load_schema, parse_schema
from ..text import quoted

__all__ = ["evaluate", "WORKLOADS", "WARNING"]

WARNING = ("NOT PRIVATE: these errors are computed from the true counts. Use them to choose an algorithm; never "
           "publish them. A choice made from them depends on the data: for a strict guarantee, evaluate on a "
           "public or synthetic stand-in instead.")


def _workload(name: str | None, shape: tuple[int, ...]) -> workloads.Workload:
    # The release's workload names (--workload of dphist release) stand for these query sets.
    if name == "marginals":
        return workloads.marginals(shape, [(k,) for k in range(len(shape))])
    name = {"ranges": None, "cells": "identity"}.get(name, name)
    if name is None:
        name = "all-ranges" if len(shape) == 1 else "random-boxes"
    if name in ("all-ranges", "prefix", "random-ranges") and len(shape) != 1:
        raise UsageError(f"workload {quoted(name)} is for one-column tables; use random-boxes or identity")
    n = shape[0]
    return {
        "all-ranges": lambda: workloads.all_ranges(n),
        "prefix": lambda: workloads.prefix(n),
        "random-ranges": lambda: workloads.random_ranges(n, 2000, seed=0),
        "random-boxes": lambda: workloads.random_boxes(shape, 2000, seed=0),
        "identity": lambda: workloads.identity(shape),
    }[name]()


def _declared_schema(schema: Any, columns: list[str] | str | None) -> Schema:
    """The parsed schema, once every named column is declared in it.

    A release finds an undeclared column's domain privately from the data (discovery); evaluate has nothing to
    imitate that with, and would score the placeholder domain planned before discovery.  So it refuses the
    column, naming it, before reading any row.
    """
    if schema is not None and not isinstance(schema, Schema):
        schema = parse_schema(schema) if isinstance(schema, dict) else load_schema(schema)
    # Names as the planner reads them (a list's items as strings); an empty name is the planner's to refuse.
    names = [c.strip() for c in columns.split(",")] if isinstance(columns, str) else [str(c) for c in columns or ()]
    for name in names:
        if name and (schema is None or name not in schema.columns):
            raise UsageError(f"column {quoted(name)} is not declared in the schema: evaluate needs the public domain "
                             "of every column it compares algorithms on (add it to the schema)")
    if schema is None:
        raise UsageError("evaluate needs a schema that declares the table's columns")
    return schema


def evaluate(source: Any, epsilon: Any, schema: Any, columns: list[str] | str, algorithms: list[str],
             trials: int = 10, workload: str | None = None, seed: int | None = None,
             algorithm_options: dict | None = None, skip_refused: bool = False, *, rho: Any = None,
             noise: str | None = None, delta: Any = None) -> tuple[pd.DataFrame, dict]:
    """Run each algorithm ``trials`` times on the table of ``columns`` and score it on a range workload.

    Returns a DataFrame (one row per algorithm: mean and sd over trials of the scaled average L1 error
    ‖Wx − Wx̂‖₁ / (|W| N) and of the RMSE per query, for the released table, and seconds per run) and a dict
    describing the run.  Not private: see the module documentation.  With ``skip_refused``, algorithms that
    refuse this table or lack a required option are left out and listed in ``info["skipped"]`` with the reason.

    Every column must be declared in ``schema`` (else UsageError, before any row is read).  Each algorithm runs
    as a release runs it: on a privacy budget of the table's part, with the table's column declarations.  The
    budget is given as a release's is: ``epsilon`` (pure ε), ``rho`` (ρ-zCDP), or ``epsilon`` with ``delta`` and
    ``noise="gaussian"`` ((ε, δ)-DP run as ρ-zCDP); under zCDP the algorithms run their Gaussian strategies.
    """
    if workload is not None and workload not in WORKLOADS:
        raise UsageError(f"unknown workload {quoted(workload)} (choose one of {', '.join(WORKLOADS)})")
    if isinstance(trials, bool) or not isinstance(trials, int) or trials < 1:
        raise UsageError("trials must be a positive integer")
    if not algorithms:
        raise UsageError("name at least one algorithm")
    schema = _declared_schema(schema, columns)
    # What does not depend on the algorithm (input, epsilon, schema, columns) is checked once, up front.
    # A release's workload among them is the one auto chooses for, as a release with --workload would.
    release_options = {"rho": rho, "noise": noise, "delta": delta,
                      "workload": workload if workload in RELEASE_WORKLOADS else None}
    plan_release(source, epsilon, schema, columns=columns, algorithm="identity", **release_options)
    for key in algorithm_options or {}:
        if not any(key in applicable_options(a, {key: algorithm_options[key]}) for a in algorithms
                   if a.strip().lower() in REGISTRY):
            raise UsageError(f"option {quoted(key)} does not apply to {', '.join(algorithms)}")
    plans, names, skipped = [], [], {}
    for a in algorithms:
        try:
            plans.append(plan_release(source, epsilon, schema, columns=columns, algorithm=a,
                                      algorithm_options=applicable_options(a, algorithm_options), **release_options))
            names.append(a)
        except UsageError as exc:
            if not skip_refused or a.strip().lower() not in REGISTRY:
                raise
            skipped[a] = str(exc)
    if not plans:
        raise UsageError("no algorithm can release this table: " + "; ".join(skipped.values()))
    algorithms = names
    plan = plans[0]
    shape = plan.shapes[0]
    W = _workload(workload, shape.shape)
    (counts,) = count_tables(plan.source.batches({c.name: c for c in shape.columns}), [shape], plan.source.name)
    bits = bit_source(seed)
    rows = []
    for name, p in zip(algorithms, plans):
        algo, table = p.algorithms[0], p.shapes[0]
        scaled, rmse, seconds = [], [], []
        for _ in range(trials):
            # The call a release makes: the table's budget and its column declarations (auto treats categorical
            # columns as unordered; privelet uses a declared hierarchy).  A fresh budget for each trial.
            budget = (PrivacyBudget(p.budgets[0], bits=bits, factor=p.rows_per_protected_group)
                      if p.definition == "pure" else
                      ZCDPBudget(p.budgets[0], bits=bits, factor=p.rows_per_protected_group))
            start = time.perf_counter()
            est = algo.run(counts, budget, columns=table.columns)
            final = est.integers() if est.integers is not None else nonnegative_integer_table(est.values, est.total)
            seconds.append(time.perf_counter() - start)
            scaled.append(workloads.scaled_average_l1(W, counts, final))
            rmse.append(workloads.rmse(W, counts, final))
        rows.append({"algorithm": name, "scaled_l1_mean": np.mean(scaled), "scaled_l1_sd": np.std(scaled, ddof=1)
                     if trials > 1 else np.nan, "rmse_mean": np.mean(rmse), "seconds_per_run": np.mean(seconds)})
    info = {"table": shape.name, "cells": shape.n_cells, "workload": W.name, "queries": W.size,
            "trials": trials, "definition": plan.definition, "skipped": skipped,
            "epsilon": None if plan.epsilon is None else format_fraction(plan.epsilon),
            "rho": None if plan.rho is None else format_fraction(plan.rho)}
    return pd.DataFrame(rows), info
