"""Private domain discovery for columns the schema does not declare (docs/algorithms.md §9), on the privacy kernel.

:func:`discover` reads the discovered columns once and is given the discovery's
:class:`~dphist.privacy.PrivacyBudget` (its ``factor`` is m, the rows one protected unit may add: 1, or K·c with
privacy units and groups).  It splits it equally among the columns, δ only to those that may need partition
selection (text, or CSV columns of unknown type), and hands each column its part:

    kinds.py        a CSV column's type, by one permute-and-flip draw (a quarter of the column's part)
    numeric.py      bounds and bins of numbers and dates: DP bounds from log-scale histograms, a median and
                    quantiles, or a coarse histogram where the values are too few for those steps
    categorical.py  the categories of text: partition selection with a Laplace threshold, (ε, δ)-DP
    plan.py         the columns, their kinds and the budget, checked before any row is read

Every decision reads only noisy counts or permute-and-flip draws; the true values stay inside these modules.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ..declare.schema import Column
from ..privacy import PrivacyBudget, format_fraction
from ..read.contribution import UnitBound, UnitIds, bounded_rows
from .categorical import categorical_domain, present_labels
from .kinds import AUTO, KINDS, TYPE_SHARE, TextAs, choose_kind, kind_of, labels_of, numbers_of, text_of, typed_text
from .numeric import BETA, LOG_BINS, SHARES, TAIL, numeric_domain, rank_scores, tail_threshold
from .plan import (BINNINGS, DEFAULT_BINS, DEFAULT_MAX_CATEGORIES, DEFAULT_SHARE, DiscoveryPlan, may_need_delta,
                   needs_delta)

__all__ = ["KINDS", "AUTO", "needs_delta", "TextAs", "typed_text", "BINNINGS", "DiscoveryPlan", "kind_of", "discover",
           "present_labels", "choose_kind", "numeric_domain", "categorical_domain", "rank_scores", "tail_threshold",
           "DEFAULT_SHARE", "DEFAULT_BINS", "DEFAULT_MAX_CATEGORIES", "TAIL", "TYPE_SHARE", "SHARES", "BETA",
           "LOG_BINS"]


def discover(plan: DiscoveryPlan, batches, budget: PrivacyBudget,
             unit: UnitBound | None = None) -> tuple[dict[str, Column], list[dict]]:
    """Read the discovered columns once and choose each one's domain from noisy counts paid from ``budget``.

    ``batches`` hold the plan's columns (and the unit column with ``unit``).  ``budget`` (made by the caller with
    ``plan.epsilon``, ``plan.delta`` and the protected unit's row factor) is split equally among the columns, δ
    among those that may need partition selection; its ``measurements`` then list every step.  Returns the
    columns (schema declarations built from the noisy results; a column whose noisy counts show no range or no
    category is missing, and its report entry says why) and one report entry per column.
    """
    values: dict[str, list] = {n: [] for n in plan.kinds}
    labels: dict[str, UnitIds] = {n: UnitIds() for n, k in plan.kinds.items() if may_need_delta(k)}
    units, unit_ids = [], UnitIds()
    for batch in batches:
        if unit is not None:
            units.append(unit_ids.encode(batch.column(unit.column)))
        for name, kind in plan.kinds.items():
            column = batch.column(name)
            if kind == AUTO:
                values[name].append(text_of(column))  # kept as text until the type is chosen
            elif kind == "categorical":
                values[name].append(labels[name].encode(labels_of(column)))
            else:
                values[name].append(numbers_of(column, kind, name))
    n = sum(len(v) for v in values[next(iter(plan.kinds))]) if plan.kinds else 0
    # Contribution bounding's row choice is randomness, not noise: it reads the budget's bit source.
    keep = bounded_rows(np.concatenate(units) if units else np.zeros(0, np.int64), unit.max_rows, budget.bits) \
        if unit is not None else np.ones(n, bool)
    parts = budget.split([1] * len(plan.kinds), delta_shares=[int(may_need_delta(k)) for k in plan.kinds.values()])
    columns, reports = {}, []
    for (name, kind), part in zip(plan.kinds.items(), parts):
        domain, typed = part, None
        if kind == AUTO:
            text = pa.chunked_array(values[name], type=pa.string()).combine_chunks().filter(pa.array(keep))
            choosing, domain = part.split([TYPE_SHARE, 1 - TYPE_SHARE], delta_shares=[0, 1])
            kind, typed = choose_kind(name, text, choosing)
            data = labels[name].encode(labels_of(text)) if kind == "categorical" else \
                numbers_of(typed_text(text, kind), kind, name)
        else:
            data = np.concatenate(values[name]) if values[name] else np.zeros(0)
            data = data[keep]
        if kind == "categorical":
            # Candidates only from the rows kept by contribution bounding: a label seen only in dropped rows
            # would be a candidate that one unit added without being counted, breaking the bound δ rests on.
            data, candidates = present_labels(data, labels[name].labels())
            column, report = categorical_domain(name, data, candidates, plan.max_categories, domain)
        else:
            column, report = numeric_domain(name, kind, data, plan, domain)
        if typed is not None:
            report = {**report, "type": typed, "epsilon": format_fraction(part.epsilon)}
        if column is not None:
            columns[name] = column
        reports.append(report)
    return columns, reports
