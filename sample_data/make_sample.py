"""Generate the synthetic census-like sample table used by dphist's examples and tests.

What this is
------------
A table of 60,000 *fictional* people with eight columns (age, sex, education,
marital status, state, annual income, usual hours worked per week and the date
of the interview).  It mimics the shape of a household-survey extract: an
adult age pyramid, state populations weighted roughly like the US, income that
depends on education, age, sex and hours, a heavy right income tail, some
missing values, and so on.

It is entirely synthetic.  Every row is drawn from hand-picked probability
tables and formulas below, using a fixed random seed.  No real person, survey
microdata or other real record was used or is represented; the only outside
inputs are rough, widely published aggregates (e.g. approximate state
populations), used as sampling weights.

Outputs (written next to this script)
-------------------------------------
* ``census.csv``          UTF-8, header row, comma separated, ISO dates
                          (YYYY-MM-DD), an empty field for a missing value.
* ``census.parquet``      The same data (int64 / string / float64 / date32
                          columns), zstd compressed.
* ``census.schema.yaml``  The public schema (domains, bins) for dphist.  It
                          is written verbatim from ``SCHEMA_YAML`` below and
                          was chosen from general knowledge, *not* by looking
                          at the data, as differential privacy requires.

How to regenerate
-----------------
From the repository root::

    .venv/bin/python sample_data/make_sample.py

The seed is fixed, so running it again reproduces byte-identical files (for
the same numpy / pandas / pyarrow versions).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import yaml

SEED = 20261121
N_ROWS = 60_000
OUT_DIR = Path(__file__).resolve().parent

EDUCATION_LEVELS = [
    "Less than HS",
    "HS-grad",
    "Some-college",
    "Associate",
    "Bachelors",
    "Masters",
    "Professional",
    "Doctorate",
]
MARITAL_LEVELS = ["Never-married", "Married", "Divorced", "Separated", "Widowed"]

# Approximate resident population in thousands (rounded 2020-census-style
# figures); used only as relative sampling weights.
STATE_POPULATION = {
    "AK": 733, "AL": 5024, "AR": 3011, "AZ": 7152, "CA": 39538, "CO": 5774,
    "CT": 3606, "DC": 690, "DE": 990, "FL": 21538, "GA": 10712, "HI": 1455,
    "IA": 3190, "ID": 1839, "IL": 12812, "IN": 6786, "KS": 2938, "KY": 4506,
    "LA": 4658, "MA": 7030, "MD": 6177, "ME": 1362, "MI": 10077, "MN": 5706,
    "MO": 6154, "MS": 2961, "MT": 1084, "NC": 10439, "ND": 779, "NE": 1962,
    "NH": 1378, "NJ": 9289, "NM": 2117, "NV": 3105, "NY": 20201, "OH": 11799,
    "OK": 3959, "OR": 4237, "PA": 13003, "RI": 1097, "SC": 5119, "SD": 887,
    "TN": 6911, "TX": 29146, "UT": 3272, "VA": 8631, "VT": 643, "WA": 7705,
    "WI": 5894, "WV": 1794, "WY": 577,
}
STATE_CODES = sorted(STATE_POPULATION)

DATE_FIRST = np.datetime64("2023-01-01", "D")
DATE_LAST = np.datetime64("2025-12-31", "D")

# The public schema.  Every bound, bin and category list here is public
# information decided up front from general knowledge; none of it was derived
# from the generated data.
SCHEMA_YAML = """\
# Public schema for sample_data/census.csv / census.parquet.
#
# Everything in this file is PUBLIC information: the domains, category lists
# and bin layouts were fixed in advance from general knowledge of what a
# census-style table looks like.  None of it was read off the data, so
# publishing it (or using it to build histograms) leaks nothing about any
# individual row.  Deriving bounds or categories from private data would
# break the differential-privacy guarantee.
#
# Column types:
#   numeric      lower/upper bound plus exactly one of bins (equal-width count),
#                width (bin width) or edges (explicit bin edges).
#   categorical  the full list of allowed values, in display order.
#   date         lower/upper bound (YAML dates; upper is exclusive) and a
#                bucketing unit.
# Options:
#   out_of_domain  clamp | drop  -- what to do with values outside the domain.
#   nulls          drop | category -- drop missing values, or count them as
#                  an extra "missing" category.
columns:
  # Age in years.  15..95 covers survey-eligible ages (17+, 90 = "90 or older")
  # with margin.  Five-year bins.
  age:            {type: numeric, lower: 15, upper: 95, width: 5}
  # Sex as recorded on the form.
  sex:            {type: categorical, values: [F, M]}
  # Highest level completed, lowest first.  A missing answer is its own category.
  education:      {type: categorical, values: ["Less than HS", "HS-grad", "Some-college", "Associate", "Bachelors", "Masters", "Professional", "Doctorate"], nulls: category}
  # Current legal marital status.
  marital_status: {type: categorical, values: ["Never-married", "Married", "Divorced", "Separated", "Widowed"]}
  # 50 states + DC, USPS codes, alphabetical.  Quoted so YAML 1.1 readers never
  # turn a code into a boolean or number.
  state:          {type: categorical, values: ["AK", "AL", "AR", "AZ", "CA", "CO", "CT", "DC", "DE", "FL", "GA", "HI", "IA", "ID", "IL", "IN", "KS", "KY", "LA", "MA", "MD", "ME", "MI", "MN", "MO", "MS", "MT", "NC", "ND", "NE", "NH", "NJ", "NM", "NV", "NY", "OH", "OK", "OR", "PA", "RI", "SC", "SD", "TN", "TX", "UT", "VA", "VT", "WA", "WI", "WV", "WY"]}
  # Annual income in dollars.  0..250k in 25 bins of 10k; higher incomes are
  # clamped into the top bin; missing incomes are dropped.
  income:         {type: numeric, lower: 0, upper: 250000, bins: 25, out_of_domain: clamp, nulls: drop}
  # Usual hours worked per week, with conventional part-time / full-time /
  # overtime cut points (40 exactly gets its own bin).
  hours_per_week: {type: numeric, edges: [0, 20, 35, 40, 41, 50, 60, 100]}
  # Interview dates of the 2023-2025 collection period, counted per month.
  interview_date: {type: date, lower: 2023-01-01, upper: 2026-01-01, unit: month}
"""


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------

def _normalised(p) -> np.ndarray:
    p = np.asarray(p, dtype=float)
    return p / p.sum()


def _choice_by_group(rng, group: np.ndarray, tables: list, n_levels: int) -> np.ndarray:
    """Draw a category index per row from the probability table of its group."""
    cdfs = np.cumsum(np.array([_normalised(t) for t in tables]), axis=1)
    cdfs[:, -1] = 1.0
    u = rng.random(group.size)
    idx = (u[:, None] > cdfs[group]).sum(axis=1)
    return np.minimum(idx, n_levels - 1)


# ---------------------------------------------------------------------------
# column generators (called in a fixed order, so the stream of draws is fixed)
# ---------------------------------------------------------------------------

def gen_age(rng, n):
    ages = np.arange(17, 91)
    w = np.empty(ages.size)
    for i, a in enumerate(ages):
        if a < 20:
            w[i] = 1.25
        elif a < 35:
            w[i] = 1.40
        elif a < 60:
            w[i] = 1.30
        elif a < 65:
            w[i] = 1.25
        elif a < 75:
            w[i] = 1.10 - 0.04 * (a - 65)          # 1.10 -> 0.74
        elif a < 85:
            w[i] = 0.70 - 0.04 * (a - 75)          # 0.70 -> 0.34
        else:
            w[i] = 0.30 - 0.04 * (a - 85)          # 0.30 -> 0.10
    w[-1] += 0.25  # 90 is a top-code ("90 or older")
    return rng.choice(ages, size=n, p=_normalised(w))


def gen_sex(rng, age):
    # Roughly balanced below 40; women increasingly outnumber men at old ages.
    p_female = 0.49 + np.clip(age - 40, 0, None) * (0.14 / 50)
    return np.where(rng.random(age.size) < p_female, "F", "M")


def gen_education(rng, age):
    # Columns follow EDUCATION_LEVELS.
    bands = [(17, 18), (19, 21), (22, 24), (25, 34), (35, 54), (55, 74), (75, 90)]
    tables = [
        [80, 20, 0, 0, 0, 0, 0, 0],
        [12, 38, 45, 5, 0, 0, 0, 0],
        [10, 30, 30, 8, 20, 2, 0, 0],
        [8, 25, 16, 10, 27, 10, 2, 2],
        [9, 26, 15, 11, 24, 11, 2, 2],
        [10, 30, 16, 10, 20, 10, 2, 2],
        [18, 34, 15, 7, 14, 8, 2, 2],
    ]
    group = np.zeros(age.size, dtype=int)
    for g, (lo, hi) in enumerate(bands):
        group[(age >= lo) & (age <= hi)] = g
    idx = _choice_by_group(rng, group, tables, len(EDUCATION_LEVELS))
    missing = rng.random(age.size) < 0.01
    idx = np.where(missing, -1, idx)
    return idx  # -1 = missing


def gen_marital(rng, age, sex):
    # Columns follow MARITAL_LEVELS.
    bands = [(17, 19), (20, 24), (25, 29), (30, 34), (35, 44), (45, 54),
             (55, 64), (65, 74), (75, 84), (85, 90)]
    tables = [
        [97.0, 2.5, 0.2, 0.3, 0.0],
        [83.0, 14.0, 1.0, 1.5, 0.5],
        [58.0, 36.0, 3.0, 2.5, 0.5],
        [38.0, 52.0, 6.0, 3.0, 1.0],
        [24.0, 60.0, 11.0, 3.5, 1.5],
        [15.0, 61.0, 17.0, 3.0, 4.0],
        [11.0, 59.0, 19.0, 2.5, 8.5],
        [7.0, 58.0, 17.0, 1.5, 16.5],
        [5.0, 50.0, 12.0, 1.0, 32.0],
        [4.0, 32.0, 7.0, 1.0, 56.0],
    ]
    group = np.zeros(age.size, dtype=int)
    for g, (lo, hi) in enumerate(bands):
        group[(age >= lo) & (age <= hi)] = g
    idx = _choice_by_group(rng, group, tables, len(MARITAL_LEVELS))
    # Women outlive their husbands more often than the reverse.
    u = rng.random(age.size)
    old = age >= 65
    married, widowed = 1, 4
    idx = np.where(old & (sex == "F") & (idx == married) & (u < 0.25), widowed, idx)
    idx = np.where(old & (sex == "M") & (idx == widowed) & (u < 0.50), married, idx)
    return idx


def gen_state(rng, n):
    w = _normalised([STATE_POPULATION[c] for c in STATE_CODES])
    return np.asarray(STATE_CODES)[rng.choice(len(STATE_CODES), size=n, p=w)]


def gen_hours(rng, age, sex):
    n = age.size
    female = sex == "F"
    # Probability of part-time (1..34) and of long hours (41..99); the rest is
    # "full time" (mostly exactly 40, some 35..39).
    p_part = np.select(
        [age <= 21, age <= 24, age <= 54, age <= 64],
        [0.55, 0.30, np.where(female, 0.22, 0.12), np.where(female, 0.28, 0.18)],
        default=np.where(female, 0.55, 0.45),
    )
    p_long = np.select(
        [age <= 21, age <= 24, age <= 54, age <= 64],
        [0.06, 0.12, np.where(female, 0.17, 0.30), np.where(female, 0.12, 0.22)],
        default=np.where(female, 0.06, 0.10),
    )
    u = rng.random(n)
    kind = np.where(u < p_part, 0, np.where(u < p_part + p_long, 2, 1))

    # part-time: heaping at round numbers plus a smooth spread
    pt_spikes = np.array([20, 30, 25, 10, 15, 32])
    pt_spike_p = np.array([0.25, 0.14, 0.10, 0.05, 0.06, 0.04])
    v = rng.random(n)
    spike_idx = np.searchsorted(np.cumsum(pt_spike_p), v, side="right")
    smooth = np.clip(np.rint(rng.normal(22, 8, n)), 1, 34)
    part = np.where(spike_idx < pt_spikes.size,
                    pt_spikes[np.minimum(spike_idx, pt_spikes.size - 1)], smooth)

    # full time: mostly exactly 40
    full = np.where(rng.random(n) < 0.88, 40, rng.choice([35, 36, 37, 38, 39], n,
                                                         p=[0.5, 0.15, 0.15, 0.1, 0.1]))

    # long hours: heaping at 45/50/55/60, exponential tail up to the 99 top-code
    lh_spikes = np.array([45, 50, 55, 60, 70, 80])
    lh_spike_p = np.array([0.24, 0.30, 0.06, 0.14, 0.03, 0.01])
    v = rng.random(n)
    spike_idx = np.searchsorted(np.cumsum(lh_spike_p), v, side="right")
    smooth = np.clip(41 + np.floor(rng.exponential(9.0, n)), 41, 99)
    long_ = np.where(spike_idx < lh_spikes.size,
                     lh_spikes[np.minimum(spike_idx, lh_spikes.size - 1)], smooth)

    hours = np.select([kind == 0, kind == 1], [part, full], default=long_)
    return hours.astype(np.int64)


def gen_income(rng, age, sex, edu_idx, hours):
    n = age.size
    # Median annual income of a 50-year-old man working 40 h, by education
    # (index -1, i.e. missing education, uses the last entry).
    base = np.array([34_000, 46_000, 53_000, 58_000, 84_000, 100_000, 150_000,
                     130_000, 48_000], dtype=float)
    log_mu = np.log(base[edu_idx])
    a = age.astype(float)
    # experience curve: rises steeply to a peak around 50, then declines
    # (part-time work, retirement income)
    log_mu += -0.9 * ((np.minimum(a, 50) - 50) / 33) ** 2
    log_mu += -0.025 * np.clip(a - 55, 0, None)
    log_mu += np.where(sex == "F", -0.15, 0.0)
    # hours matter less once people draw pensions
    hours_elasticity = np.where(a >= 65, 0.3, 0.75)
    log_mu += hours_elasticity * np.log(hours / 40.0)

    log_inc = log_mu + rng.normal(0.0, 0.62, n)
    # a small group with a much fatter tail (business owners, executives, ...)
    fat = rng.random(n) < 0.02
    log_inc += np.where(fat, np.minimum(rng.exponential(0.8, n), 4.0), 0.0)
    income = np.exp(log_inc)

    # reported incomes heap at round numbers
    r = rng.random(n)
    income = np.where(r < 0.30, np.round(income, -3),
                      np.where(r < 0.50, np.round(income, -2), np.round(income, 2)))
    income = np.maximum(income, 1.0)

    # exactly-zero incomes: students, people out of the labour force, ...
    p_zero = np.select([a <= 19, a <= 24, a <= 64], [0.26, 0.11, 0.065], default=0.06)
    p_zero = p_zero + np.where(hours < 20, 0.06, 0.0)
    income = np.where(rng.random(n) < p_zero, 0.0, income)

    # item non-response: ~2%, more common when education is also missing
    p_miss = np.where(edu_idx < 0, 0.15, 0.02)
    income = np.where(rng.random(n) < p_miss, np.nan, income)
    return np.round(income, 2)


def gen_dates(rng, n):
    days = np.arange(DATE_FIRST, DATE_LAST + np.timedelta64(1, "D"))
    # 1970-01-01 was a Thursday; weekday 0 = Monday
    weekday = (days.astype(np.int64) + 3) % 7
    w = np.select([weekday == 5, weekday == 6], [0.4, 0.15], default=1.0)
    return rng.choice(days, size=n, p=_normalised(w))


# ---------------------------------------------------------------------------

def generate() -> pd.DataFrame:
    rng = np.random.default_rng(SEED)
    age = gen_age(rng, N_ROWS).astype(np.int64)
    sex = gen_sex(rng, age)
    edu_idx = gen_education(rng, age)
    marital_idx = gen_marital(rng, age, sex)
    state = gen_state(rng, N_ROWS)
    hours = gen_hours(rng, age, sex)
    income = gen_income(rng, age, sex, edu_idx, hours)
    dates = gen_dates(rng, N_ROWS)

    education = np.asarray(EDUCATION_LEVELS + [None], dtype=object)[edu_idx]
    marital = np.asarray(MARITAL_LEVELS, dtype=object)[marital_idx]
    return pd.DataFrame({
        "age": age,
        "sex": sex.astype(object),
        "education": education,
        "marital_status": marital,
        "state": state.astype(object),
        "income": income,
        "hours_per_week": hours,
        "interview_date": dates,
    })


def write_csv(df: pd.DataFrame, path: Path) -> None:
    out = df.copy()
    out["interview_date"] = out["interview_date"].dt.strftime("%Y-%m-%d")
    out.to_csv(path, index=False, encoding="utf-8", lineterminator="\n",
               float_format="%.2f", na_rep="")


def write_parquet(df: pd.DataFrame, path: Path) -> None:
    schema = pa.schema([
        ("age", pa.int64()),
        ("sex", pa.string()),
        ("education", pa.string()),
        ("marital_status", pa.string()),
        ("state", pa.string()),
        ("income", pa.float64()),
        ("hours_per_week", pa.int64()),
        ("interview_date", pa.date32()),
    ])
    arrays = [
        pa.array(df["age"].to_numpy(), type=pa.int64()),
        pa.array(df["sex"], type=pa.string(), from_pandas=True),
        pa.array(df["education"], type=pa.string(), from_pandas=True),
        pa.array(df["marital_status"], type=pa.string(), from_pandas=True),
        pa.array(df["state"], type=pa.string(), from_pandas=True),
        pa.array(df["income"].to_numpy(), type=pa.float64(), from_pandas=True),
        pa.array(df["hours_per_week"].to_numpy(), type=pa.int64()),
        pa.array(df["interview_date"].to_numpy().astype("datetime64[D]"), type=pa.date32()),
    ]
    table = pa.Table.from_arrays(arrays, schema=schema)
    pq.write_table(table, path, compression="zstd")


def check(df: pd.DataFrame, schema_text: str) -> None:
    """Sanity checks: the data fits the contract and the schema parses correctly."""
    assert len(df) == N_ROWS
    spec = yaml.safe_load(schema_text)["columns"]
    assert list(spec) == list(df.columns), "schema column order must match the data"
    states = spec["state"]["values"]
    assert all(isinstance(s, str) for s in states), "state codes must load as strings"
    assert states == STATE_CODES and len(states) == 51
    assert spec["education"]["values"] == EDUCATION_LEVELS
    assert spec["marital_status"]["values"] == MARITAL_LEVELS
    assert spec["sex"]["values"] == ["F", "M"]
    for col in ("sex", "education", "marital_status", "state"):
        assert set(df[col].dropna()) <= set(spec[col]["values"]), col
    assert df["age"].between(17, 90).all()
    assert df["hours_per_week"].between(1, 99).all()
    assert int(df["hours_per_week"].mode().iloc[0]) == 40
    assert (df["income"].dropna() >= 0).all()
    assert df["interview_date"].min() >= pd.Timestamp(str(DATE_FIRST))
    assert df["interview_date"].max() <= pd.Timestamp(str(DATE_LAST))


def main() -> int:
    df = generate()
    check(df, SCHEMA_YAML)
    write_csv(df, OUT_DIR / "census.csv")
    write_parquet(df, OUT_DIR / "census.parquet")
    (OUT_DIR / "census.schema.yaml").write_text(SCHEMA_YAML, encoding="utf-8", newline="\n")
    print(f"wrote {len(df)} rows to {OUT_DIR}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
