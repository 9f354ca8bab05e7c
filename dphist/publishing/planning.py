"""Planning a release: the options, validated once, and every check that needs no row of data.

    ReleaseOptions(...)  ─►  make_plan(source, options)  ─►  ReleasePlan
    (every parameter,         (schema, the input's header,     (tables, shapes, algorithms, the budget's
     checked on its own)       shapes, budget split, engine)     parts: what execution.py will do)

Nothing here reads a row or spends budget: a plan can be refused (UsageError, DataError) at no cost, and
:mod:`dphist.publishing.execution` runs only plans that passed every check.  Every parameter is documented once, in
:func:`dphist.release`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from fractions import Fraction
from typing import Any

import numpy as np

from ..algorithms import Algorithm, applicable_options, get_algorithm
from ..algorithms.auto.choice import WORKLOADS, default_workload
from ..declare.choices import DEFAULT_ALGORITHM, DEFAULT_MAX_CELLS
from ..read.contribution import UnitBound
from ..read.counting import TableShape
from ..discovery.domains import (AUTO, BINNINGS, DEFAULT_BINS, DEFAULT_MAX_CATEGORIES, DEFAULT_SHARE, DiscoveryPlan,
                                 kind_of, needs_delta)
from ..read.engines import ENGINES, check_engine, preflight
from ..errors import DataError, UsageError
from ..read.sources import Source, input_text, is_dataframe, is_path, open_source, remote_source, type_name
from ..declare.job import TableRequest, check_option_names, check_table_names, parse_tables, table_name_for
from .ledger import ROW_UNIT
from .unit_cap import UNIT_CAP_SHARE, check_dropped_measurement
from ..algorithms.marginal_sets import STRATEGIES, MarginalPlan, parse_marginals, plan_marginals, union_of
from ..privacy import (MAX_RHO, MIN_EPSILON, MIN_RHO, PrivacyBudget, SeededBits, ZCDPBudget, exact_fraction,
                       format_fraction, parse_delta, parse_epsilon, parse_rho, per_row_amount, protected_rows, set_aside,
                       split_shares)
from ..privacy.conversions import rho_for
from ..declare.schema import MAX_CELLS, MAX_DIMENSIONS, Schema, load_schema, parse_schema
from ..text import quoted, quoted_list

__all__ = ["ReleaseOptions", "ReleasePlan", "make_plan", "schema_of", "usable_delta", "unit_bound",
           "parse_discovery_delta", "column_kinds",
           "parse_rho", "budget_definition", "DEFAULT_ALGORITHM", "DEFAULT_MAX_CELLS", "MARGINALS_ALGORITHM",
           "VALUE_COLUMNS", "DEFINITIONS", "NOISES", "MIN_RHO", "MAX_RHO"]

# Marginal sets default to identity: the strategies' expected errors and the exact least-squares combination
# of "separate" are worked out for it (marginals.py).
MARGINALS_ALGORITHM = "identity"
#: The columns every released table has after its labels (assemble.py fills them, the interval columns by
#: intervals.py); a label may not take their names.
VALUE_COLUMNS = ("count", "noisy_count", "ci_lower", "ci_upper", "ci_covers", "bucket")
#: The largest δ a release accepts: δ bounds the chance that discovering categories fails to be private.
MAX_DELTA = Fraction(1, 1000)
MAX_DISCOVERY_BINS = 4096
MAX_CATEGORIES = 100_000
#: The three ways a release can be budgeted (the plan's ``definition``):
#:   pure         --epsilon E [--noise laplace]        ε-DP (δ only for partition selection); amounts are ε
#:   zcdp         --rho R [--noise gaussian]           ρ-zCDP; amounts are ρ
#:   approximate  --epsilon E --delta D --noise gaussian   (ε, δ)-DP, run as ρ-zCDP with ρ = rho_for(ε, δ), the
#:                largest ρ whose (ε, δ) guarantee holds by the tight CKS20 conversion; amounts are ρ
DEFINITIONS = ("pure", "zcdp", "approximate")
NOISES = ("laplace", "gaussian")


@dataclass(frozen=True)
class ReleaseOptions:
    """Every parameter of a release with its default (documented in :func:`dphist.release`), checked once when
    made: a bad value raises UsageError naming it.  Values are kept normalised: ``epsilon``, ``rho``, ``delta`` and
    ``discovery_share`` as exact fractions, ``columns`` and ``marginals`` as tuples of names, ``tables`` as
    :class:`~dphist.declare.job.TableRequest` values, and ``unit`` is the contribution bound of ``privacy_unit``.

    The budget is given as exactly one of ``epsilon`` and ``rho``, with ``noise``; ``definition`` (one of
    :data:`DEFINITIONS`) follows from them, and ``noise`` is set to the noise linear queries get ("laplace" or
    "gaussian").  Under "approximate", ``rho`` is set to rho_for(epsilon, delta); under "zcdp", ``epsilon`` stays
    None and ``delta`` is 0."""

    epsilon: Any = None
    schema: Any = None
    columns: Any = None
    tables: Any = None
    algorithm: str | None = None
    algorithm_options: Any = None
    seed: int | None = None
    raw: bool = False
    marginals: Any = None
    marginal_strategy: str = "auto"
    privacy_unit: str | None = None
    max_rows_per_unit: int | None = None
    group_size: int = 1
    delta: Any = 0
    discovery_share: Any = DEFAULT_SHARE
    discovery_bins: int = DEFAULT_BINS
    max_categories: int = DEFAULT_MAX_CATEGORIES
    discovery_binning: str = "equal-width"
    engine: str = "local"
    master: str | None = None
    max_cells: int = DEFAULT_MAX_CELLS
    rho: Any = None
    noise: str | None = None
    workload: str | None = None
    unit: UnitBound | None = field(init=False, default=None)
    definition: str = field(init=False, default="pure")

    @classmethod
    def from_keywords(cls, **values: Any) -> ReleaseOptions:
        """The options named by keyword; an unknown name is a UsageError naming it.  ``None`` stands for the
        default of an option that has one (what an unset command-line flag passes)."""
        known = [f.name for f in fields(cls) if f.init]
        for name in values:
            if name not in known:
                raise UsageError(f"unknown release option {quoted(name)} (known: {', '.join(known)})")
        defaults = {"marginal_strategy", "group_size", "delta", "discovery_share", "discovery_bins",
                    "max_categories", "discovery_binning", "engine", "max_cells"}
        return cls(**{k: v for k, v in values.items() if not (v is None and k in defaults)})

    def __post_init__(self) -> None:
        def set_(name: str, value: Any) -> None:  # frozen: the checked, normalised values are set once, here
            object.__setattr__(self, name, value)

        definition, epsilon, rho, delta = budget_definition(self.epsilon, self.rho, self.noise, self.delta)
        set_("definition", definition)
        set_("epsilon", epsilon)
        set_("rho", rho)
        set_("delta", delta)
        set_("noise", "laplace" if definition == "pure" else "gaussian")
        set_("max_cells", _whole(self.max_cells, 1, MAX_CELLS, f"the cell limit must be a whole number from 1 to "
                                                                f"{MAX_CELLS:,}"))
        set_("unit", unit_bound(self.privacy_unit, self.max_rows_per_unit))
        set_("group_size", _whole(self.group_size, 1, None, "group size must be a whole number of units, at least 1"))
        if self.marginals is not None:
            if self.columns is not None or self.tables is not None:
                raise UsageError("give marginals, columns or tables, not more than one")
            set_("marginals", tuple(parse_marginals(self.marginals)))
            if self.raw:
                raise UsageError("marginals are post-processed to agree with each other: --raw does not apply")
        check_workload(self.workload)
        if self.marginal_strategy not in STRATEGIES:
            raise UsageError(f"unknown marginal strategy {quoted(self.marginal_strategy)} (choose one of "
                             f"{', '.join(STRATEGIES)})")
        if self.columns is not None and self.tables is not None:
            raise UsageError("give either columns or tables, not both")
        if self.columns is not None:
            set_("columns", _column_names(self.columns))
        if self.tables is not None:
            set_("tables", tuple(_table_list(self.tables)))
        share = exact_fraction(self.discovery_share, "the discovery share")
        if not 0 < share < 1:
            raise UsageError("the discovery share must be between 0 and 1, e.g. 0.1")
        set_("discovery_share", share)
        set_("discovery_bins", _whole(self.discovery_bins, 1, MAX_DISCOVERY_BINS,
                                      f"discovery bins must be a whole number from 1 to {MAX_DISCOVERY_BINS}"))
        set_("max_categories", _whole(self.max_categories, 1, MAX_CATEGORIES,
                                      f"the most categories must be a whole number from 1 to {MAX_CATEGORIES:,}"))
        if self.discovery_binning not in BINNINGS:
            raise UsageError(f"binning must be one of {', '.join(BINNINGS)}, not {quoted(self.discovery_binning)}")
        if self.engine not in ENGINES:
            raise UsageError(f"unknown engine {quoted(self.engine)} (choose one of {', '.join(ENGINES)})")
        if self.seed is not None:
            set_("seed", _whole(self.seed, 0, None, "seed must be a non-negative integer"))
        if self.algorithm_options is not None and not isinstance(self.algorithm_options, dict):
            raise UsageError("algorithm options must be a mapping such as {'branching': 16}")
        check_option_names(self.algorithm_options or {}, "algorithm options")
        set_("algorithm_options", dict(self.algorithm_options or {}))
        if self.raw is not None and not isinstance(self.raw, (bool, np.bool_)):
            raise UsageError(f"raw must be True or False, not {quoted(type(self.raw).__name__, '')}")
        set_("raw", bool(self.raw))
        for name in ("algorithm", "master"):  # the other texts are checked against their choices above
            if getattr(self, name) is not None and not isinstance(getattr(self, name), str):
                raise UsageError(f"{name} must be a text, not {quoted(type(getattr(self, name)).__name__, '')}")


@dataclass
class ReleasePlan:
    """Everything a release will do, validated before any row is read: the budget split, the tables' public
    shapes, their algorithms and the noise source.

    The budget: ``definition`` (one of :data:`DEFINITIONS`), ``epsilon`` (None under "zcdp"), ``delta`` (under
    "pure" the δ of partition selection, under "approximate" the release's δ, 0 under "zcdp") and ``rho`` (None
    under "pure").  ``budgets`` holds each table's part in the plan's unit (:attr:`amount_name`: ε under "pure",
    ρ otherwise); with the discovery's part and ``unit_cap`` they add up to :attr:`amount` exactly."""

    source: Source
    epsilon: Fraction | None
    requests: list[TableRequest]
    shapes: list[TableShape]
    algorithms: list[Algorithm]
    budgets: list[Fraction]
    seed: int | None
    raw: bool
    #: Columns without a declared domain, found privately before counting (their shapes in ``shapes`` are
    #: placeholders of the largest size until then); and the run's δ.
    discovery: DiscoveryPlan | None = None
    delta: Fraction = Fraction(0)
    #: Contribution bounding: at most ``unit.max_rows`` rows per privacy unit; groups of ``group_size`` units.
    unit: UnitBound | None = None
    group_size: int = 1
    #: With marginals: the strategy; under "full" the one table is the full table over their columns, released
    #: as sums of it; under "separate" the tables are the marginals, made consistent after measurement; under
    #: "residual" the tables are the marginals too, counted as planned, but measured jointly (the residual bases)
    #: on the sum of their parts.
    marginal_plan: MarginalPlan | None = None
    #: Where the counting pass runs (:mod:`dphist.read.engines`) and the cell limit tables were checked against.
    engine: str = "local"
    master: str | None = None
    max_cells: int = DEFAULT_MAX_CELLS
    definition: str = "pure"
    rho: Fraction | None = None
    #: The δ the options asked for; under "pure" ``delta`` is the part of it a step can use (0 when no
    #: undeclared column may be text), which is what the ledger is charged.
    delta_requested: Fraction | None = None
    #: Under a unit cap: the part (in the plan's unit) that measures how many rows the cap dropped
    #: (:mod:`dphist.publishing.unit_cap`); None without one, when the tables share everything but discovery's part.
    unit_cap: Fraction | None = None

    @property
    def amount(self) -> Fraction:
        """The whole budget in the plan's unit: ε under "pure", ρ under "zcdp" and "approximate"."""
        return self.epsilon if self.definition == "pure" else self.rho

    @property
    def amount_name(self) -> str:
        """The plan's unit, as the report names it: "epsilon" or "rho"."""
        return "epsilon" if self.definition == "pure" else "rho"

    @property
    def noise(self) -> str:
        """The noise linear queries get: "laplace" under "pure", "gaussian" otherwise."""
        return "laplace" if self.definition == "pure" else "gaussian"

    @property
    def rows_per_protected_group(self) -> int:
        """How many rows the protected group (one unit, or group_size units) can change: the privacy budget
        scales every sensitivity by this (group privacy)."""
        return (self.unit.max_rows if self.unit else 1) * self.group_size

    @property
    def ledger_unit(self) -> str:
        return ROW_UNIT if self.unit is None else f"unit:{self.unit.column}"

    @property
    def marginals(self) -> list[tuple[str, ...]] | None:
        return None if self.marginal_plan is None else self.marginal_plan.marginals


def make_plan(source: Any, options: ReleaseOptions) -> ReleasePlan:
    """The plan of a release of ``source`` with ``options``: checks the schema, the input's header, the tables'
    shapes and algorithms, and that every table's part of the budget (ε, or ρ under zCDP) is usable.  Reads no
    rows, spends nothing.  Under "zcdp" and "approximate" every column must be declared in the schema (finding a
    domain privately runs under pure ε only), refused here with one line."""
    o = options
    schema = schema_of(o.schema)
    remote = o.engine == "spark" and not is_dataframe(source) and "://" in input_text(source)
    src = remote_source(input_text(source)) if remote else open_source(source)
    marginals = None if o.marginals is None else list(o.marginals)
    wanted = ([c for m in marginals for c in m] if marginals is not None else
              _requested_columns(o.columns, o.tables, schema, src, o.unit))

    # Columns the schema does not declare get their domains privately, with a share of ε (and δ for text).
    discovery = None
    undeclared = list(dict.fromkeys(c for c in wanted if schema is None or c not in schema.columns))
    if undeclared and o.definition != "pure":
        raise UsageError(_UNDECLARED_UNDER_ZCDP.format(column=quoted(undeclared[0]), budget=_budget_flags(o.definition)))
    if undeclared:
        if marginals is not None:
            raise UsageError(f"column {quoted(undeclared[0])} has no declared domain: marginal sets need a schema")
        kinds = column_kinds(src, undeclared)
        discovery = DiscoveryPlan(kinds, set_aside(o.epsilon, o.discovery_share)[0], usable_delta(o.delta, kinds),
                                  o.discovery_bins, o.max_categories, o.discovery_binning)
        schema = Schema({**(schema.columns if schema else {}), **discovery.placeholders()})
    # Under pure ε, δ is what partition selection may use: a δ no step can use is charged as 0 (the report says
    # so), never refused, so that one recipe or job spec with a δ works on any input.
    delta = o.delta if o.definition != "pure" else (discovery.delta if discovery else Fraction(0))
    amount = o.epsilon if o.definition == "pure" else o.rho
    table_amount = set_aside(amount, o.discovery_share)[1] if discovery else amount
    factor = protected_rows(o.unit.max_rows if o.unit else None, o.group_size)
    # A unit cap drops rows the counts then leave out: a small share of what the tables would get measures how
    # many (docs/privacy.md §6), so the release can say how far its counts fall short.
    unit_cap = None
    if o.unit is not None:
        unit_cap, table_amount = set_aside(table_amount, UNIT_CAP_SHARE)

    # A marginal set becomes either one full table (summed afterwards) or one identity table per marginal
    # (under "residual", counted per marginal but measured jointly: execution.py).
    columns, tables, algorithm, marginal_plan = o.columns, o.tables, o.algorithm, None
    if marginals is not None:
        algorithm = algorithm or MARGINALS_ALGORITHM
        # The amount one row's worth of noise is set by: ε/K under pure ε, ρ/K² under zCDP (σ² grows with K²).
        per_row = per_row_amount(o.definition, table_amount, factor)
        marginal_plan = _plan_marginal_set(marginals, schema, per_row, algorithm, o.marginal_strategy, o.max_cells,
                                           o.noise)
        if marginal_plan.strategy == "full":
            columns = union_of(marginals)
        else:
            tables = tuple(TableRequest(table_name_for(m), m, "identity") for m in marginals)

    requests = _table_requests(wanted, columns, tables)
    names = [t.algorithm or algorithm or DEFAULT_ALGORITHM for t in requests]
    shapes = [_table_shape(schema, t, o.max_cells) for t in requests]
    # The questions each table will answer, one setting: the table's workload, else the run's, else what its
    # columns suggest.  auto chooses for it; every report states it with the expected errors.
    requests = [replace(t, workload=t.workload or o.workload or default_workload(shape.columns))
                for t, shape in zip(requests, shapes)]
    # Options given for the whole run apply to the tables whose algorithm has them; a table's own win.
    algorithms = [_algorithm(n, {**applicable_options(n, o.algorithm_options), **t.options}, t.workload)
                  for n, t in zip(names, requests)]
    for key in o.algorithm_options:
        if not any(key in applicable_options(n, {key: None}) for n in names):
            raise UsageError(f"option {quoted(key)} does not apply to {', '.join(sorted(set(names)))}")
    for algo, shape in zip(algorithms, shapes):
        algo.check(shape.shape)  # its shape, and the work its options ask for (ceilings)
    budgets = split_shares(table_amount, [Fraction(t.share) for t in requests])

    check_engine(o.engine, o.master, src, o.unit, discovery is not None)
    if not remote:  # a URL's header is checked by Spark when it reads it
        src.check_columns({c.name: c for shape in shapes for c in shape.columns
                           if discovery is None or c.name not in discovery.kinds})
    if o.unit is not None and o.unit.column not in src.column_names():
        raise DataError(f"{quoted(src.name, '')}: privacy-unit column {quoted(o.unit.column)} not found in the input")
    _check_budgets(requests, budgets, discovery, factor, o.definition)
    if unit_cap is not None:
        check_dropped_measurement(table_budget(unit_cap, o.definition, factor), o.unit)
    for request, algo, shape, budget in zip(requests, algorithms, shapes, budgets):
        try:  # every noisy step it may take, tried on this table's budget: refused now, not after reading
            algo.check_budget(shape.shape, table_budget(budget, o.definition, factor), shape.columns)
        except UsageError as exc:
            raise UsageError(f"table '{request.name}': {exc}") from None
    preflight(o.engine, o.master)  # last: it may connect to a scheduler or start Spark's JVM
    return ReleasePlan(src, o.epsilon, requests, shapes, algorithms, budgets, o.seed, o.raw, discovery, delta,
                       o.unit, o.group_size, marginal_plan, o.engine, o.master, o.max_cells, o.definition, o.rho,
                       delta_requested=o.delta, unit_cap=unit_cap)



# --------------------------------------------------------------------------------------------------------------
# The budget's definition


_UNDECLARED_UNDER_ZCDP = (
    "column {column} has no declared domain: under {budget} every column must be declared in a schema "
    "(declare the categories of a text column and the bounds of a numeric or date one); finding domains privately "
    "(partition selection needs a delta of its own) runs under pure epsilon only, e.g. 'dphist schema --private' "
    "before the release")


def _budget_flags(definition: str) -> str:
    return "--rho" if definition == "zcdp" else "--noise gaussian"


def budget_definition(epsilon: Any, rho: Any, noise: str | None,
                      delta: Any) -> tuple[str, Fraction | None, Fraction | None, Fraction]:
    """(definition, ε, ρ, δ) of a release given ``epsilon`` or ``rho`` (exactly one), ``noise`` (None, "laplace"
    or "gaussian") and ``delta``:

    * epsilon [noise laplace]: "pure"; δ is partition selection's (0 to 1e-3), ρ None;
    * epsilon, delta > 0, noise gaussian: "approximate"; ρ = rho_for(ε, δ) (exact, rounded down), δ the release's;
    * rho [noise gaussian]: "zcdp"; ε None, δ 0.  Laplace noise under --rho is refused (give --epsilon instead),
      and so is a δ (zCDP has none).
    UsageError with one line for anything else."""
    if noise is not None and noise not in NOISES:
        raise UsageError(f"unknown noise {quoted(noise)} (choose laplace or gaussian)")
    if epsilon is not None and rho is not None:
        raise UsageError("give --epsilon or --rho, not both: --epsilon E is pure epsilon-DP (or (epsilon, delta)-DP "
                         "with --delta D --noise gaussian), --rho R is rho-zCDP")
    if epsilon is None and rho is None:
        raise UsageError("missing the privacy budget: give --epsilon E (e.g. --epsilon 0.5) or --rho R (rho-zCDP, "
                         "e.g. --rho 0.05)")
    if rho is not None:
        rho = parse_rho(rho)
        if noise == "laplace":
            raise UsageError("--rho measures with discrete Gaussian noise; for Laplace noise give --epsilon E instead "
                             "(pure epsilon-DP)")
        if parse_delta(delta, "delta") != 0:
            raise UsageError("--delta does not apply to --rho: zCDP has no delta (for an (epsilon, delta) guarantee "
                             "give --epsilon E --delta D --noise gaussian)")
        return "zcdp", None, rho, Fraction(0)
    epsilon = parse_epsilon(epsilon)
    if noise == "gaussian":
        delta = parse_delta(delta, "delta")
        if delta == 0:
            raise UsageError("--noise gaussian with --epsilon needs --delta D > 0: the delta of the release's "
                             "(epsilon, delta) guarantee, e.g. --delta 1e-6")
        if delta > MAX_DELTA:
            raise UsageError(f"delta must be between 0 and 1e-3 (it bounds the chance of a failure of privacy), "
                             f"got '{format_fraction(delta)}'")
        return "approximate", epsilon, rho_for(epsilon, delta), delta
    return "pure", epsilon, None, parse_discovery_delta(delta)


# --------------------------------------------------------------------------------------------------------------
# Checks shared with `schema --private` (dphist/discovery/private_schema.py)


def unit_bound(column: str | None, max_rows: Any) -> UnitBound | None:
    """The contribution bound of ``--privacy-unit COLUMN --max-rows-per-unit K`` (None without a unit)."""
    if column is None:
        if max_rows is not None:
            raise UsageError("--max-rows-per-unit needs --privacy-unit COLUMN")
        return None
    if not isinstance(column, str) or not column.strip():
        raise UsageError("the privacy unit must be a column name")
    if max_rows is None:
        raise UsageError(f"--privacy-unit {quoted(column, '')} needs --max-rows-per-unit K: the most rows one unit may "
                         "add to the counts (its other rows are left out at random)")
    return UnitBound(column.strip(), _whole(max_rows, 1, None, "--max-rows-per-unit must be a whole number, at "
                                                                 "least 1"))


def parse_discovery_delta(value: Any) -> Fraction:
    """The δ of a run that discovers categories: exact, from 0 to 1e-3."""
    delta = parse_delta(value, "delta")
    if delta > MAX_DELTA:
        raise UsageError(f"delta must be between 0 and 1e-3 (it bounds the chance of a failure of privacy), "
                         f"got {quoted(value)}")
    return delta


def usable_delta(delta: Fraction, kinds: dict[str, str]) -> Fraction:
    """The part of a pure run's ``delta`` that discovering columns of ``kinds`` can use: all of it when some
    column may be text (partition selection), else 0.  Both a release and ``schema --private`` charge this."""
    return delta if needs_delta(kinds) else Fraction(0)


def column_kinds(src: Source, names: list[str]) -> dict[str, str]:
    """Each undeclared column's kind from the stored schema; a CSV stores none, so its types are chosen
    privately during discovery (AUTO).  DataError for a column the input lacks or one that cannot be counted."""
    if src.format == "csv":
        header = src.column_names()
        for name in names:
            if name not in header:
                raise DataError(f"{quoted(src.name, '')}: column {quoted(name)} not found in the input (it has: "
                                f"{quoted_list(header)})")
        return {name: AUTO for name in names}
    types = src.arrow_types()
    kinds = {}
    for name in names:
        if name not in types:
            raise DataError(f"{quoted(src.name, '')}: column {quoted(name)} not found in the input (it has: "
                            f"{quoted_list(types)})")
        kind = kind_of(types[name])
        if kind is None:
            raise DataError(f"{quoted(src.name, '')}: column {quoted(name)} holds {type_name(types[name])}, "
                            "which cannot be counted into a table")
        kinds[name] = kind
    return kinds


# --------------------------------------------------------------------------------------------------------------


def _whole(value: Any, lowest: int, highest: int | None, message: str) -> int:
    if (isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < lowest
            or (highest is not None and value > highest)):
        raise UsageError(message)
    return int(value)


def schema_of(value: Any) -> Schema | None:
    """The schema a ``schema`` argument gives: None, a :class:`~dphist.declare.schema.Schema`, a mapping laid out like the
    file (validated), or a path to a YAML or JSON file (read and validated); UsageError for anything else."""
    if value is None or isinstance(value, Schema):
        return value
    if isinstance(value, Mapping):
        return parse_schema(dict(value))
    if is_path(value):
        return load_schema(value)
    raise UsageError(f"the schema must be a path to a YAML or JSON file, a mapping laid out like one, or a Schema, "
                     f"not {quoted(type(value).__name__, '')}")


def _column_names(columns: Any) -> tuple[str, ...]:
    """Column names from text ("age,sex") or from any collection of texts but a mapping (a list, a tuple, a
    DataFrame's ``columns``)."""
    if isinstance(columns, str):
        names = [c.strip() for c in columns.split(",")]
    elif isinstance(columns, Iterable) and not isinstance(columns, (Mapping, bytes)):
        names = list(columns)
        if not all(isinstance(c, str) for c in names):
            raise UsageError("columns must be column names, which are texts (a list of texts or one comma-separated "
                             "text)")
    else:
        raise UsageError("columns must be a list of column names or one comma-separated text, not "
                         f"{quoted(type(columns).__name__, '')}")
    if not names or not all(names):
        raise UsageError("columns must be a non-empty, comma-separated list of column names")
    return tuple(names)


def _table_list(tables: Any) -> list[TableRequest]:
    if not isinstance(tables, (list, tuple)):
        raise UsageError("tables must be a list of tables, each a mapping such as {'columns': ['age', 'sex']}, not "
                         f"{quoted(type(tables).__name__, '')}")
    if tables and all(isinstance(t, TableRequest) for t in tables):
        check_table_names(list(tables))
        for t in tables:
            check_option_names(t.options, f"table '{t.name}': options")
        return list(tables)
    return parse_tables(list(tables), "tables")


def _requested_columns(columns: tuple[str, ...] | None, tables: tuple[TableRequest, ...] | None,
                       schema: Schema | None, src: Source, unit: UnitBound | None) -> list[str]:
    """The columns the tables will use: those named, else every declared column, else every input column
    (but the privacy unit's)."""
    if columns is not None:
        return list(columns)
    if tables is not None:
        return [c for t in tables for c in t.columns]
    if schema is not None:
        return list(schema.columns)
    return [c for c in src.column_names() if unit is None or c != unit.column]


def _algorithm(name: str, options: dict, workload: str) -> Algorithm:
    """The named algorithm with ``options``; auto is told the table's ``workload``, the one it chooses for."""
    if str(name).strip().lower() == "auto":
        return get_algorithm(name, workload=workload, **options)
    return get_algorithm(name, **options)


def check_workload(workload: str | None, where: str = "") -> None:
    """UsageError unless ``workload`` is None or one of :data:`WORKLOADS`."""
    if workload is not None and workload not in WORKLOADS:
        raise UsageError(f"{where}unknown workload {quoted(workload)} (choose one of {', '.join(WORKLOADS)})")


def _table_requests(default: list[str], columns: tuple[str, ...] | None,
                    tables: tuple[TableRequest, ...] | None) -> list[TableRequest]:
    """One table over ``columns``, the ``tables`` named, or else one 1-D table per column of ``default``."""
    if tables is not None:
        return list(tables)
    if columns is not None:
        requests = [TableRequest(table_name_for(columns), tuple(columns))]
    else:
        requests = [TableRequest(name, (name,)) for name in default]
    check_table_names(requests)
    return requests


def _plan_marginal_set(marginals: list[tuple[str, ...]], schema: Schema, amount_per_row: Fraction, algorithm: str,
                       strategy: str, max_cells: int, noise: str = "laplace") -> MarginalPlan:
    """The strategy of a marginal set, chosen from public sizes, the noise and the amount per row that sets it
    (ε/K for "laplace", ρ/K² for "gaussian")."""
    for m in marginals:
        for c in m:
            schema[c]  # unknown columns fail here, before any choice is made
        check_table_names([TableRequest(table_name_for(m), m)])
    sizes = {c: schema[c].n_cells for m in marginals for c in m}
    union = union_of(marginals)
    full_cells = math.prod(sizes[c] for c in union)  # a Python int: exact, never wraps
    full_limit = (f"would have {len(union)} columns, more than {MAX_DIMENSIONS}" if len(union) > MAX_DIMENSIONS
                  else f"would have {full_cells:,} cells, more than {max_cells:,}" if full_cells > max_cells else None)
    return plan_marginals(marginals, sizes, amount_per_row, algorithm, strategy, full_limit, noise=noise)


def _table_shape(schema: Schema, request: TableRequest, max_cells: int) -> TableShape:
    if len(request.columns) > MAX_DIMENSIONS:
        raise UsageError(f"table {quoted(request.name)}: at most {MAX_DIMENSIONS} columns per table in this version")
    shape = TableShape(request.name, tuple(schema[c] for c in request.columns))
    labels = [label for column in shape.columns for label in column.label_names] + list(VALUE_COLUMNS)
    for label in labels:
        if labels.count(label) > 1:
            raise UsageError(f"table {quoted(request.name)}: its output would have two columns named {quoted(label)}; "
                             "rename a column in the data and the schema")
    if shape.n_cells > max_cells:
        raise UsageError(f"table {quoted(request.name)}: {shape.n_cells:,} cells is more than the limit of "
                         f"{max_cells:,} (--max-cells); use coarser bins or fewer columns")
    return shape


def table_budget(amount: Fraction, definition: str, factor: int) -> PrivacyBudget:
    """A budget like the one a table of ``amount`` (in the plan's unit) gets in a run, on seeded bits: for
    trying its algorithm's steps before any row is read (it never meets data)."""
    if definition == "pure":
        return PrivacyBudget(amount, bits=SeededBits(0), factor=factor)
    return ZCDPBudget(amount, bits=SeededBits(0), factor=factor)


def _check_budgets(requests: list[TableRequest], budgets: list[Fraction], discovery: DiscoveryPlan | None,
                   factor: int, definition: str = "pure") -> None:
    """Every table's ε, and each discovered column's, is at least the smallest the samplers take, per row of the
    protected group; under zCDP every table's ρ is at least MIN_RHO, per row (ρ/K², as σ² grows with K²)."""
    if definition != "pure":
        for request, budget in zip(requests, budgets):
            if per_row_amount(definition, budget, factor) < MIN_RHO:
                per_row = "" if factor == 1 else \
                    f" ({format_fraction(per_row_amount(definition, budget, factor))} per row of {factor})"
                raise UsageError(f"table {quoted(request.name)} would get rho {format_fraction(budget)}{per_row}, "
                                 "below the "
                                 f"minimum {format_fraction(MIN_RHO)}: raise the budget or the table's share, or "
                                 "release fewer tables")
        return
    for request, budget in zip(requests, budgets):
        if budget < MIN_EPSILON:
            raise UsageError(f"table {quoted(request.name)} would get epsilon {format_fraction(budget)}, below the "
                             "minimum "
                             f"{format_fraction(MIN_EPSILON)}: raise epsilon or its share, or release fewer tables")
        if per_row_amount("pure", budget, factor) < MIN_EPSILON:
            raise UsageError(f"table {quoted(request.name)}: epsilon {format_fraction(budget)} spread over {factor} "
                             f"rows per protected group is below the minimum {format_fraction(MIN_EPSILON)} per row")
    if discovery is not None and per_row_amount("pure", discovery.column_epsilon, factor) < MIN_EPSILON:
        raise UsageError(f"discovering {len(discovery.kinds)} columns would leave each epsilon "
                         f"{format_fraction(per_row_amount('pure', discovery.column_epsilon, factor))} per row, "
                         "below the minimum "
                         f"{format_fraction(MIN_EPSILON)}: raise epsilon or the discovery share, or declare columns")
