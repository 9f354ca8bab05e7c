"""Auto: choose the algorithm for a table from public facts and a noisy total, then run it.

    measure:  N̂ = Σx + DLap(1/ε₀), ε₀ = share·ε                    (Δ = 1: one record changes the total by 1)
    choose:   from the table's dimensions, its number of cells, the column kinds and the signal s = max(N̂, 1)·ε₁,
              ε₁ = ε − ε₀, look up the rule table learned on the DPBench grid (``auto_rules.RULES``, written by
              bench/auto_rules.py): the algorithm with the lowest mean regret at that dimension, the nearest
              learned domain size and the signal decade round(log₁₀ s)
    run:      the chosen algorithm at ε₁ (DPCube and the k-d tree take their block size from N̂ instead of
              measuring a total of their own)

The choice reads the data only through N̂, so it is post-processing of an ε₀-DP measurement, and the whole is
ε-DP by sequential composition (ε₀ + ε₁ = ε).  The report names the choice, the rule entry and N̂.

Outside the grid: range queries run along ordered columns only, so a categorical column (without a hierarchy)
splits the table into slices and the rule is looked up for one slice (the ordered columns, N̂/slices records);
a table of categorical columns only gets identity, the unbiased estimate of each cell.  Tables of three or more
ordered columns use the two-column rules; a choice that cannot take the table's shape falls back to hb.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ..errors import UsageError
from ..noise import BitSource, Replicated
from . import options as option
from .auto_rules import RULES
from .base import Algorithm, Estimate, measure

__all__ = ["Auto", "nearest_rule"]

FALLBACK = "hb"


def nearest_rule(rules: dict, dims: int, cells: int, signal: float) -> tuple[str, float, int, tuple, int]:
    """The rule table's entry for a table: ``(algorithm, mean regret, data sets, (dims, cells) key, decade)``.

    ``dims`` above the largest learned dimension use the largest; ``cells`` picks the learned domain size
    nearest on a log scale (ties to the larger); the decade round(log₁₀ signal) is clipped to the learned ones.
    """
    learned = sorted({d for d, _ in rules})
    d = min(max(dims, learned[0]), learned[-1])
    sizes = sorted(c for dd, c in rules if dd == d)
    size = min(sizes, key=lambda c: (abs(math.log(c) - math.log(max(cells, 1))), -c))
    decades = rules[(d, size)]
    dec = min(max(int(round(math.log10(max(signal, 1.0)))), min(decades)), max(decades))
    algorithm, regret, datasets = decades[dec]
    return algorithm, regret, datasets, (d, size), dec


def _unordered(column) -> bool:
    """A categorical column without a declared hierarchy: its cells have no order."""
    return getattr(column, "kind", None) == "categorical" and not getattr(column, "hierarchy", None)


class Auto(Algorithm):
    name = "auto"
    summary = "chooses an algorithm per table from its shape, ε and a noisy total (rules learned on DPBench)"
    options = {"total_share": (Fraction(1, 20), option.fraction_between_0_and_1)}
    option_help = {"total_share": "share of the table's ε spent on the noisy total that the choice reads"}
    data_adaptive = True
    #: Audits of tables at a rule boundary set this: every run reports only the total and the choice.
    audit_choice_only = False

    def choose(self, shape: tuple[int, ...], epsilon: Fraction, noisy_total: float, columns=None) -> dict:
        """The choice for a table of ``shape`` to be released at ``epsilon`` (after the total's share), as a
        report entry: ``chosen`` and ``reason``.  Reads only public facts and the noisy total."""
        from . import get_algorithm

        # Range queries run along ordered columns only: a categorical column splits the table into slices, each
        # an ordered table with its share of the records, so the rule is looked up for one slice.
        unordered = [k for k, c in enumerate(columns or ()) if _unordered(c)]
        ordered = [n for k, n in enumerate(shape) if k not in unordered]
        if not ordered:
            return {"chosen": "identity", "reason": "every column is categorical: cells have no order, so range "
                    "queries do not apply and identity is the unbiased estimate of each cell"}
        slices = int(np.prod([shape[k] for k in unordered], dtype=np.int64))
        signal = max(float(noisy_total), 1.0) * float(epsilon) / slices
        name, regret, datasets, (d, size), dec = nearest_rule(RULES, len(ordered), int(np.prod(ordered)), signal)
        per_slice = f" per slice of the {slices} categories" if slices > 1 else ""
        reason = (f"rule for {d}-D tables of {size} cells at noisy total x epsilon ~ 1e{dec} (here {signal:.3g}"
                  f"{per_slice}): lowest mean regret on the DPBench grid ({regret} over {datasets} data sets)")
        try:
            get_algorithm(name).check_shape(shape)
        except UsageError:
            reason += f"; {name} cannot take a table of shape {tuple(shape)}, so {FALLBACK}"
            name = FALLBACK
        return {"chosen": name, "reason": reason}

    def total_for_choice(self, noisy_total: float, counts: np.ndarray) -> float:
        """The total the choice reads: the noisy one, never ``counts`` (the audit's mutant overrides this)."""
        return noisy_total

    def instance(self, name: str, shape: tuple[int, ...], epsilon: Fraction, noisy_total: float) -> Algorithm:
        """The chosen algorithm, set up to reuse N̂ where it would otherwise measure a total of its own."""
        from . import REGISTRY, get_algorithm
        from .partitioning import DPCube

        if issubclass(REGISTRY[name], DPCube):
            # The block DPCube would choose itself from this total (the longest axis's value: shorter axes are
            # cut to their length in either mode).
            block = max(DPCube().auto_block(noisy_total, tuple(shape), epsilon))
            return get_algorithm(name, block=block)
        return get_algorithm(name)

    def run(self, counts: np.ndarray, epsilon: Fraction, bits: BitSource, columns=None) -> Estimate:
        from ..accountant import format_fraction  # the accountant imports the algorithms

        epsilon = Fraction(epsilon)
        eps0 = epsilon * self.params["total_share"]
        eps1 = epsilon - eps0
        reps = bits.reps if isinstance(bits, Replicated) else None
        total = np.asarray(counts.sum(), dtype=np.int64)
        noisy, record = measure(total, 1, eps0, bits, "the table's total (read by the choice of algorithm)",
                                composition="one query")
        totals = np.atleast_1d(noisy)
        choices = [self.choose(counts.shape, eps1, self.total_for_choice(float(t), counts), columns) for t in totals]
        names = {c["chosen"] for c in choices}
        if reps and (len(names) > 1 or self.audit_choice_only):
            # Audits: runs that chose differently measure different queries, which cannot be lined up; the
            # audit then sees the total and the choice (each chosen algorithm is audited on its own).
            return Estimate(values=np.zeros((reps,) + counts.shape), measurements=[record],
                            noisy=[totals.reshape(reps, 1)], choices={"structure": [c["chosen"] for c in choices]})
        name = choices[0]["chosen"]
        # Under an audit every run chose the same, so one block size (from the first run's total) serves all.
        inner = self.instance(name, counts.shape, eps1, float(totals[0]))
        estimate = inner.run(counts, eps1, bits, columns=columns)
        estimate.measurements = [record] + estimate.measurements
        if reps:
            estimate.noisy = [totals.reshape(reps, 1)] + list(estimate.noisy)
            keys = estimate.choices.get("structure") or [None] * reps
            estimate.choices = {"structure": [(name, k) for k in keys]}
            return estimate
        estimate.noisy = [noisy] + list(estimate.noisy)
        estimate.choices = {"algorithm_choice": {**choices[0], "noisy_total": int(noisy),
                                                 "epsilon_for_total": format_fraction(eps0)}, **estimate.choices}
        estimate.structure = {"algorithm": name, **estimate.structure}
        return estimate
