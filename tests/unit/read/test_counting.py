"""Counting rows into cells (dphist/read/counting.py), checked against a plain-Python reference implementation;
dates and timestamps of any range, and ISO timestamps with a zone, counted on the calendar; cell counts that do
not wrap int64."""

from __future__ import annotations

import bisect
import datetime as dt
import math

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dphist.read import counting
from dphist.read.counting import Axis, TableShape, count_tables
from dphist.errors import DataError
from dphist.declare.schema import parse_schema

from input_files import DAY_SCHEMA, ZONED


def reference_numeric(value, edges, out_of_domain, nulls):
    """Cell of one value by the definition: bins [e_i, e_{i+1}), clamp or drop outside, null policy."""
    bins = len(edges) - 1
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return bins if nulls == "category" else None
    if value < edges[0] or value >= edges[-1]:
        if out_of_domain == "drop":
            return None
        return 0 if value < edges[0] else bins - 1
    return bisect.bisect_right(edges, value) - 1


def axis_cells(column, values):
    """Each value's cell along ``column`` (None where the row is not counted), as the counting pass maps it."""
    return [int(c) if c < column.n_cells else None for c in Axis(column).codes(values)]


def run_axis(column, values, typ=None):
    return axis_cells(column, pa.array(values, type=typ))


values_strategy = st.lists(
    st.one_of(st.none(), st.floats(-50, 150, allow_nan=False), st.sampled_from([0.0, 0.1, 0.3, 25.0, 100.0, 99.99999])),
    min_size=1, max_size=200)


@settings(max_examples=150, deadline=None)
@given(values=values_strategy, bins=st.integers(1, 40), ood=st.sampled_from(["clamp", "drop"]),
       nulls=st.sampled_from(["drop", "category"]))
def test_equal_width_bins_match_reference(values, bins, ood, nulls):
    schema = parse_schema({"columns": {"x": {"type": "numeric", "lower": 0.1, "upper": 100, "bins": bins,
                                             "out_of_domain": ood, "nulls": nulls}}})
    column = schema["x"]
    expected = [reference_numeric(v, column.edges, ood, nulls) for v in values]
    assert run_axis(column, values, pa.float64()) == expected


@settings(max_examples=100, deadline=None)
@given(values=values_strategy, ood=st.sampled_from(["clamp", "drop"]))
def test_explicit_edges_match_reference(values, ood):
    edges = [0, 0.3, 18, 65, 99.99999, 100]
    column = parse_schema({"columns": {"x": {"type": "numeric", "edges": edges, "out_of_domain": ood}}})["x"]
    assert run_axis(column, values, pa.float64()) == [reference_numeric(v, column.edges, ood, "drop") for v in values]


def test_width_bins_with_short_last_bin_and_infinities():
    column = parse_schema({"columns": {"x": {"type": "numeric", "lower": 0, "upper": 10, "width": 3}}})["x"]
    assert run_axis(column, [0, 2.999, 3, 9, 9.5, 10, -math.inf, math.inf, float("nan")]) == \
        [0, 0, 1, 3, 3, 3, 0, 3, None]


def test_integer_column_with_nulls():
    column = parse_schema({"columns": {"x": {"type": "numeric", "lower": 0, "upper": 4, "bins": 4,
                                             "nulls": "category"}}})["x"]
    assert run_axis(column, [0, 1, None, 3, 7], pa.int64()) == [0, 1, 4, 3, 3]


def test_categorical_mapping_unknown_null_and_unicode():
    column = parse_schema({"columns": {"c": {"type": "categorical", "values": ["a", "Caf\u00e9", "b"],
                                             "nulls": "category"}}})["c"]
    values = ["b", "zzz", None, "Cafe\u0301", "a"]
    assert run_axis(column, values) == [2, None, 3, 1, 0]
    # The same through a dictionary-encoded array whose dictionary is in another order.
    encoded = pa.array(values).dictionary_encode()
    assert axis_cells(column, encoded) == [2, None, 3, 1, 0]


def test_categorical_from_numbers_matches_labels():
    column = parse_schema({"columns": {"c": {"type": "categorical", "values": [1, 2, 3]}}})["c"]
    assert run_axis(column, [3, 1, 9, None], pa.int64()) == [2, 0, None, None]
    assert run_axis(column, [3.0, 2.0, 2.5], pa.float64()) == [2, 1, None]


def test_dates_by_month_from_dates_timestamps_and_text():
    column = parse_schema({"columns": {"d": {"type": "date", "lower": "2023-01-01", "upper": "2023-04-01",
                                             "unit": "month", "out_of_domain": "drop"}}})["d"]
    dates = [dt.date(2023, 1, 31), dt.date(2023, 2, 1), dt.date(2023, 3, 31), dt.date(2023, 4, 1), None]
    expected = [0, 1, 2, None, None]
    assert run_axis(column, dates, pa.date32()) == expected
    stamps = [None if d is None else dt.datetime(d.year, d.month, d.day, 23, 59) for d in dates]
    assert run_axis(column, stamps, pa.timestamp("s")) == expected
    assert run_axis(column, [None if d is None else d.isoformat() for d in dates]) == expected


def test_count_tables_two_tables_one_pass_and_batch_invariance():
    schema = parse_schema({"columns": {
        "a": {"type": "numeric", "lower": 0, "upper": 10, "bins": 5},
        "s": {"type": "categorical", "values": ["F", "M"]},
    }})
    rng = np.random.default_rng(0)
    a = rng.uniform(-2, 12, 1000)
    s = rng.choice(["F", "M", "X"], 1000)
    table = pa.table({"a": a, "s": s})
    shapes = [TableShape("a_s", (schema["a"], schema["s"])), TableShape("s", (schema["s"],))]
    whole = count_tables(table.to_batches(), shapes)
    small = count_tables(table.to_batches(max_chunksize=7), shapes)
    assert all(np.array_equal(x, y) for x, y in zip(whole, small))
    ref = np.zeros((5, 2), dtype=np.int64)
    for ai, si in zip(a, s):
        if si == "X":
            continue
        ref[reference_numeric(ai, schema["a"].edges, "clamp", "drop"), "FM".index(si)] += 1
    assert np.array_equal(whole[0], ref)
    assert whole[0].dtype == np.int64 and whole[1].tolist() == ref.sum(axis=0).tolist()


def test_empty_batches_give_zero_table():
    schema = parse_schema({"columns": {"a": {"type": "numeric", "lower": 0, "upper": 10, "bins": 5}}})
    out = count_tables([], [TableShape("a", (schema["a"],))])
    assert out[0].tolist() == [0] * 5


@pytest.mark.parametrize("dims", [1, 2, 3, 4])
def test_up_to_four_dimensions_c_order(dims):
    decl = {f"c{i}": {"type": "numeric", "lower": 0, "upper": 3 + i, "bins": 3 + i} for i in range(dims)}
    schema = parse_schema({"columns": decl})
    rng = np.random.default_rng(dims)
    data = {f"c{i}": rng.integers(0, 3 + i, 500).astype(float) for i in range(dims)}
    shape = TableShape("t", tuple(schema[f"c{i}"] for i in range(dims)))
    (counts,) = count_tables(pa.table(data).to_batches(), [shape])
    ref = np.zeros(shape.shape, dtype=np.int64)
    np.add.at(ref, tuple(data[f"c{i}"].astype(int) for i in range(dims)), 1)
    assert np.array_equal(counts, ref)


whole_strategy = st.lists(st.one_of(st.none(), st.integers(-30, 130), st.sampled_from([-2**62, 2**62, 0, 99, 100])),
                          min_size=1, max_size=200)


@settings(max_examples=100, deadline=None)
@given(values=whole_strategy, ood=st.sampled_from(["clamp", "drop"]), nulls=st.sampled_from(["drop", "category"]),
       typ=st.sampled_from([pa.int64(), pa.int32()]))
def test_whole_numbers_through_the_lookup_match_reference(values, ood, nulls, typ):
    if typ == pa.int32():
        values = [None if v is None else max(min(v, 2**31 - 1), -2**31) for v in values]
    column = parse_schema({"columns": {"x": {"type": "numeric", "edges": [0.5, 3, 17.25, 18, 65, 100],
                                             "out_of_domain": ood, "nulls": nulls}}})["x"]
    assert run_axis(column, values, typ) == [reference_numeric(v, column.edges, ood, nulls) for v in values]


def test_whole_numbers_over_a_range_too_wide_for_a_lookup():
    # 2**22 units wide: counted by arithmetic on floats, with the same answers.
    column = parse_schema({"columns": {"x": {"type": "numeric", "lower": -2**21, "upper": 2**21, "bins": 7,
                                             "out_of_domain": "drop"}}})["x"]
    values = [-2**21, -2**21 - 1, 2**21, 2**21 - 1, 0, None, *range(-2**21, 2**21, 99_991)]
    assert run_axis(column, values, pa.int64()) == [reference_numeric(v, column.edges, "drop", "drop") for v in values]
    unsigned = [v for v in values if v is None or v >= 0]
    assert run_axis(column, unsigned, pa.uint64()) == \
        [reference_numeric(v, column.edges, "drop", "drop") for v in unsigned]


def test_values_on_float_edges_land_in_the_published_bin():
    # Edges like 0.1 + 0.3 * i are not exact in binary; arithmetic alone would misplace values equal to them.
    column = parse_schema({"columns": {"x": {"type": "numeric", "lower": 0.1, "upper": 30.1, "bins": 100}}})["x"]
    values = list(column.edges) + [np.nextafter(e, -np.inf) for e in column.edges]
    assert run_axis(column, values, pa.float64()) == [reference_numeric(v, column.edges, "clamp", "drop")
                                                      for v in values]


domains = st.sampled_from([(0, 250_000), (0.1, 30.1), (-7.5, 12.25), (-1e-300, 1e-300), (1e9, 1e9 + 3),
                           (-2**40, 2**40), (0, 1), (-3, 0), (5e-324, 1.0), (1e17, 1e17 + 2**14)])


def edge_neighbours(edges):
    """Each edge, the floats just below and above it, and values that stress binary arithmetic."""
    out = [-math.inf, math.inf, 0.0, -0.0, 5e-324, -5e-324, 1e-310, -1e-310, 1e308, -1e308, float("nan")]
    for e in edges:
        out += [e, float(np.nextafter(e, -np.inf)), float(np.nextafter(e, np.inf))]
    return out


@settings(max_examples=150, deadline=None)
@given(domain=domains, bins=st.integers(1, 60), ood=st.sampled_from(["clamp", "drop"]),
       nulls=st.sampled_from(["drop", "category"]), path=st.sampled_from(["grid", "arithmetic", "search"]),
       extra=st.lists(st.floats(allow_nan=False), max_size=30))
def test_real_values_at_and_beside_every_edge_match_reference(domain, bins, ood, nulls, path, extra):
    # Every way of coding real numbers (the exact grid lookup, arithmetic checked against the edges, a
    # search among the edges) puts each value, including the floats either side of each edge, where the
    # published edges say.
    from dphist.read.counting import Axis

    lower, upper = domain
    column = parse_schema({"columns": {"x": {"type": "numeric", "lower": lower, "upper": upper, "bins": bins,
                                             "out_of_domain": ood, "nulls": nulls}}})["x"]
    values = edge_neighbours(column.edges) + extra
    axis = Axis(column)
    if path != "grid":
        axis._grid = None
        axis.equal_width = axis.equal_width and path == "arithmetic"  # arithmetic only where it is safe
    codes = axis.codes(pa.array(values, type=pa.float64()))
    got = [int(c) if c < column.n_cells else None for c in codes]
    assert got == [reference_numeric(v, column.edges, ood, nulls) for v in values]


def test_the_grid_serves_common_domains_and_cuts_few_cells():
    from dphist.read.counting import _FineGrid

    for spec, aligned in (({"lower": 0, "upper": 250_000, "bins": 50}, True),
                          ({"lower": 0.1, "upper": 30.1, "bins": 100}, False),
                          ({"edges": [0, 0.3, 18, 65, 99.99999, 100]}, False)):
        column = parse_schema({"columns": {"x": {"type": "numeric", **spec}}})["x"]
        axis = Axis(column)
        grid = _FineGrid.build(axis.edges, axis.position_code, axis.drop)
        assert grid is not None
        cut = int(np.sum(grid.lookup == grid.marked))
        assert (cut == 0) if aligned else (0 < cut < len(column.edges))


def big_table_data(rows=30_000, seed=5):
    schema = parse_schema({"columns": {
        "x": {"type": "numeric", "lower": 0, "upper": 1, "bins": 300, "nulls": "category"},
        "y": {"type": "numeric", "lower": 0, "upper": 1, "bins": 200, "out_of_domain": "drop"},
        "s": {"type": "categorical", "values": ["a", "b", "c"], "nulls": "category"},
    }})
    rng = np.random.default_rng(seed)
    x = rng.uniform(-0.1, 1.1, rows)
    x[rng.random(rows) < 0.05] = np.nan
    y = rng.uniform(-0.1, 1.1, rows)
    s = pa.array(rng.choice(["a", "b", "c", "d"], rows)).dictionary_encode()
    return schema, pa.table({"x": x, "y": y, "s": s})


def reference_counts(schema, table, names):
    cols = [schema[n] for n in names]
    ref = np.zeros(tuple(c.n_cells for c in cols), dtype=np.int64)
    data = {n: table.column(n).to_pylist() for n in names}
    for i in range(table.num_rows):
        cell = []
        for n, c in zip(names, cols):
            v = data[n][i]
            if c.kind == "categorical":
                k = c.values.index(v) if v in c.values else (len(c.values) if v is None and c.null_cell else None)
            else:
                k = reference_numeric(v, c.edges, c.out_of_domain, c.nulls)
            if k is None:
                break
            cell.append(k)
        else:
            ref[tuple(cell)] += 1
    return ref


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_threads_and_big_tables_count_exactly(workers):
    """Tables far bigger than a batch are buffered before one bincount; every worker count gives the same."""
    schema, table = big_table_data()
    names = [["x", "y"], ["x", "y", "s"], ["s"]]
    shapes = [TableShape("_".join(n), tuple(schema[c] for c in n)) for n in names]
    counts = count_tables(table.to_batches(max_chunksize=1000), shapes, workers=workers)
    for n, got in zip(names, counts):
        assert got.shape == tuple(schema[c].n_cells for c in n)
        assert np.array_equal(got, reference_counts(schema, table, n))


def test_an_error_in_a_worker_stops_the_pass_with_the_source_named():
    schema = parse_schema({"columns": {"d": {"type": "date", "lower": "2023-01-01", "upper": "2024-01-01"}}})
    good = pa.record_batch({"d": pa.array(["2023-05-01"] * 10)})
    bad = pa.record_batch({"d": pa.array(["not a date"] * 10)})
    read = []

    def batches():
        for i in range(200):
            read.append(i)
            yield bad if i == 3 else good

    with pytest.raises(DataError, match=r"^data\.csv: column 'd': a value is not a date"):
        count_tables(batches(), [TableShape("d", (schema["d"],))], "data.csv", workers=2)
    assert len(read) < 200  # the reader stopped early


# ---- the counting pass against a plain reference, over random data and batch splits ---------------------------


def digitize_reference(column, values):
    """Each value's code along a numeric ``column`` (n_cells where the row is not counted), from the published
    edges alone: ``searchsorted`` for the bin, then the out-of-domain and null policies, written out."""
    edges = np.asarray(column.edges, dtype=np.float64)
    v = np.array([np.nan if x is None else float(x) for x in values], dtype=np.float64)
    bins, drop = len(edges) - 1, column.n_cells
    with np.errstate(invalid="ignore"):
        codes = np.searchsorted(edges, v, side="right") - 1
        below, above = v < edges[0], v >= edges[-1]
    if column.out_of_domain == "drop":
        codes[below | above] = drop
    else:
        codes[below], codes[above] = 0, bins - 1
    codes[np.isnan(v)] = bins if column.null_cell else drop
    return codes


def category_reference(column, labels):
    null = len(column.values) if column.null_cell else column.n_cells
    return np.array([null if x is None else column.values.index(x) if x in column.values else column.n_cells
                     for x in labels], dtype=np.intp)


def reference_table_counts(columns, codes):
    """Counts of the rows kept on every axis, by ``numpy.add.at`` over the rows' codes."""
    shape = tuple(c.n_cells for c in columns)
    keep = np.all([codes[c.name] < c.n_cells for c in columns], axis=0)
    counts = np.zeros(shape, dtype=np.int64)
    np.add.at(counts, tuple(codes[c.name][keep] for c in columns), 1)
    return counts


# Domains that take each way of coding: the exact grid with no cut cell (edges at 0 with a grid coarser than
# 1, integral edges), a grid with cut cells, arithmetic, a search, and whole numbers through a lookup.
NUMERIC_DECLS = [
    {"lower": 0, "upper": 250_000, "bins": 50},
    {"lower": 0, "upper": 1_000_000, "bins": 7},
    {"lower": 15, "upper": 95, "width": 5},
    {"lower": 0.1, "upper": 30.1, "bins": 100},
    {"edges": [0, 0.3, 18, 65, 99.99999, 100]},
    {"lower": -7.5, "upper": 12.25, "bins": 13},
    {"lower": -2**40, "upper": 2**40, "bins": 9},
    {"lower": 1e17, "upper": 1e17 + 2**14, "bins": 3},
    {"lower": -1e-300, "upper": 1e-300, "bins": 4},
]


def numeric_values(column, rng, n, whole):
    """``n`` values mixing the edges, the floats either side of them, tiny numbers around 0, infinities, NaN,
    nulls, and uniform draws over and past the domain (whole numbers where ``whole``)."""
    edges = np.asarray(column.edges, dtype=np.float64)
    lo, hi = float(edges[0]), float(edges[-1])
    span = hi - lo
    special = list(edges) + list(np.nextafter(edges, -np.inf)) + list(np.nextafter(edges, np.inf))
    special += [0.0, -0.0, 5e-324, -5e-324, 1e-310, -1e-310, np.inf, -np.inf, np.nan, None]
    drawn = list(rng.uniform(lo - 0.2 * span, hi + 0.2 * span, n))
    pool = special + drawn
    picks = [pool[i] for i in rng.integers(0, len(pool), n)]
    if not whole:
        return picks, pa.float64()
    out = []
    for x in picks:
        if x is None or not np.isfinite(x) or abs(x) >= 2**53:
            out.append(None if x is None or np.isnan(x) else int(np.sign(x)) * 2**53)
        else:
            out.append(int(np.floor(x)))
    return out, pa.int64()


@settings(max_examples=60, deadline=None)
@given(x_decl=st.sampled_from(NUMERIC_DECLS), y_decl=st.sampled_from(NUMERIC_DECLS),
       ood=st.sampled_from(["clamp", "drop"]), nulls=st.sampled_from(["drop", "category"]),
       x_whole=st.booleans(), y_whole=st.booleans(), dictionary=st.booleans(),
       rows=st.integers(1, 5000), splits=st.integers(1, 6), workers=st.sampled_from([1, 2]),
       seed=st.integers(0, 2**31))
def test_count_tables_matches_the_digitize_reference(x_decl, y_decl, ood, nulls, x_whole, y_whole, dictionary,
                                                     rows, splits, workers, seed):
    # Every row lands where the published edges and policies put it, in 1-D, 2-D and 3-D tables (one of them
    # sharing its columns with another), whatever the batches and the worker threads.
    policy = {"out_of_domain": ood, "nulls": nulls}
    schema = parse_schema({"columns": {
        "x": {"type": "numeric", **x_decl, **policy}, "y": {"type": "numeric", **y_decl, **policy},
        "s": {"type": "categorical", "values": ["a", "b", "c"], "nulls": nulls}}})
    rng = np.random.default_rng(seed)
    x, x_type = numeric_values(schema["x"], rng, rows, x_whole)
    y, y_type = numeric_values(schema["y"], rng, rows, y_whole)
    s = [None if r < 0.1 else "abcd"[int(r * 4) % 4] for r in rng.random(rows)]
    s_array = pa.array(s, pa.string())
    table = pa.table({"x": pa.array(x, x_type), "y": pa.array(y, y_type),
                      "s": s_array.dictionary_encode() if dictionary else s_array})
    cuts = np.sort(rng.integers(0, rows + 1, splits - 1))
    whole = table.combine_chunks().to_batches()[0]
    batches = [whole.slice(a, b - a) for a, b in zip([0, *cuts], [*cuts, rows])]  # some may be empty
    names = [["x"], ["y"], ["s"], ["x", "y"], ["y", "s", "x"]]
    shapes = [TableShape("_".join(n), tuple(schema[c] for c in n)) for n in names]
    counts = count_tables(iter(batches), shapes, workers=workers)
    codes = {"x": digitize_reference(schema["x"], x), "y": digitize_reference(schema["y"], y),
             "s": category_reference(schema["s"], s)}
    for n, got in zip(names, counts):
        assert np.array_equal(got, reference_table_counts([schema[c] for c in n], codes)), n


@pytest.mark.parametrize("whole", [False, True])
def test_batches_far_bigger_than_the_lookup_count_cells_exactly(whole):
    # Batches of 100,000 rows count a 1-D table in lookup cells (31,254 of them for 0..250,000 in 50 bins, an
    # edge at 0 with a grid coarser than 1), beside the same rows in small batches, which count codes.
    schema = parse_schema({"columns": {"x": {"type": "numeric", "lower": 0, "upper": 250_000, "bins": 50,
                                             "nulls": "category", "out_of_domain": "drop"}}})
    column = schema["x"]
    rng = np.random.default_rng(7)
    x, typ = numeric_values(column, rng, 300_000, whole)
    table = pa.table({"x": pa.array(x, typ)})
    expected = reference_table_counts([column], {"x": digitize_reference(column, x)})
    for size in (100_000, 999):
        (got,) = count_tables(table.to_batches(max_chunksize=size), [TableShape("x", (column,))])
        assert np.array_equal(got, expected)


def test_a_grid_coarser_than_one_keeps_tiny_negatives_below_an_edge_at_zero():
    # 0..250,000 in 50 bins takes a grid of 8-wide cells; -5e-324 times 1/8 would round to -0.0 and land in
    # bin 0, so that grid floors the value itself.
    from dphist.read.counting import _FineGrid

    column = parse_schema({"columns": {"x": {"type": "numeric", "lower": 0, "upper": 250_000, "bins": 50,
                                             "out_of_domain": "drop"}}})["x"]
    axis = Axis(column)
    grid = _FineGrid.build(axis.edges, axis.position_code, axis.drop)
    assert grid is not None and grid.shift > 0 and len(grid.lookup) <= 2 * _FineGrid.TARGET
    values = [-5e-324, -1e-310, -0.0, 0.0, 5e-324, 4999.999999999999, 5000.0]
    assert run_axis(column, values, pa.float64()) == [None, None, 0, 0, 0, 0, 1]


# ---- dates and timestamps of any range ------------------------------------------------------------------------------


EPOCH = dt.date(1970, 1, 1)


@pytest.mark.parametrize("unit", ["s", "ms", "us", "ns"])
def test_days_since_epoch_is_exact_for_any_timestamp(unit):
    per_day = {"s": 86_400, "ms": 86_400_000, "us": 86_400_000_000, "ns": 86_400_000_000_000}[unit]
    ticks = [-(2**62), -per_day - 1, -1, 0, 1, per_day, 2**62, None]
    days = counting.days_since_epoch(pa.array(ticks, pa.timestamp(unit))).to_pylist()
    assert days == [None if t is None else t // per_day for t in ticks]  # floor, never a wrapped cast


def test_days_since_epoch_of_calendar_extremes_and_zones():
    stamps = [dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31, 23, 59)]
    assert counting.days_since_epoch(pa.array(stamps, pa.timestamp("s"))).to_pylist() == [
        (dt.date(1, 1, 1) - EPOCH).days, (dt.date(9999, 12, 31) - EPOCH).days]
    # A zoned timestamp counts on its own wall clock: 2024-03-01 23:30 in New York is 04:30 UTC the next day.
    zoned = pa.array([dt.datetime(2024, 3, 2, 4, 30)], pa.timestamp("us", "UTC")).cast(
        pa.timestamp("us", "America/New_York"))
    assert counting.days_since_epoch(zoned).to_pylist() == [(dt.date(2024, 3, 1) - EPOCH).days]
    dates = pa.array([dt.date(1, 1, 1), dt.date(9999, 12, 31)], pa.date32())
    assert counting.days_since_epoch(dates).cast(pa.int32()).to_pylist() == [(d - EPOCH).days for d in dates.to_pylist()]


@pytest.mark.parametrize("policy", ["clamp", "drop"])
def test_declared_date_column_counts_far_timestamps_as_declared(policy):
    schema = parse_schema({"columns": {"t": {"type": "date", "lower": "2020-01-01", "upper": "2021-01-01",
                                             "unit": "quarter", "out_of_domain": policy}}})
    ticks = [-(2**62), -(2**40), 1_590_000_000, 2**40, 2**62, None]  # 1_590_000_000 s: 2020-05-20
    batch = pa.record_batch({"t": pa.array(ticks, pa.timestamp("s"))})
    (counts,) = count_tables([batch], [TableShape("t", (schema["t"],))])
    expected = [2, 1, 0, 2] if policy == "clamp" else [0, 1, 0, 0]
    assert counts.tolist() == expected


def test_zoned_timestamps_count_as_the_date_written():
    """Text dates (a Parquet or DataFrame text column) count on the date as written, whatever the zone."""
    schema = parse_schema(DAY_SCHEMA)
    for values in (pa.array([v or None for v in ZONED]), pa.array([v or None for v in ZONED]).dictionary_encode()):
        (counts,) = count_tables([pa.record_batch({"d": values})], [TableShape("d", (schema["d"],))])
        assert counts.tolist() == [0, 0, 4, 3, 1]  # 02-28, 02-29, 03-01, 03-02, 03-03


# ---- cell counts are Python integers --------------------------------------------------------------------------------


def test_table_shape_cell_count_does_not_wrap():
    schema = parse_schema({"columns": {c: {"type": "numeric", "lower": 0, "upper": 65536, "bins": 65536}
                                       for c in "abcd"}})
    shape = TableShape("t", tuple(schema[c] for c in "abcd"))
    assert shape.n_cells == 2**64  # int64 arithmetic gives 0
    assert int(np.prod(shape.shape, dtype=np.int64)) == 0  # (what the old code compared with the limit)
