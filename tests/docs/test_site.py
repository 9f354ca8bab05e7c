"""The documentation site and the README: the site builds with ``mkdocs build --strict`` (every page in the nav,
every link and anchor resolving, the generated CLI and API reference importable) and loads nothing from the
network; the README's relative links name files that exist; and the reference pages that list what the code
defines (exit codes, schema fields, job spec fields, report.json fields) list all of it, so that the code cannot
gain a code, a key or a field the pages do not mention."""

from __future__ import annotations

import ast
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
DOCS = ROOT / "docs"
SAMPLE = ROOT / "sample_data"
PLUGINS = ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python", "mkdocs_click")


# --- the site -------------------------------------------------------------------------------------------------


def _missing_plugins() -> list[str]:
    return [name for name in PLUGINS if importlib.util.find_spec(name.split(".")[0]) is None
            or importlib.util.find_spec(name) is None]


# One worker builds the site once for the tests that read it (make test runs with --dist loadgroup, and these are
# one group); whichever runs first pays for the build, about 5-10 s, in its setup, so each has room for it.
@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site built with --strict into a temporary folder (skipped when the docs extra is not installed)."""
    missing = _missing_plugins()
    if missing:
        pytest.skip(f"the docs extra is not installed (missing {', '.join(missing)}): pip install -e '.[docs]'")
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)], cwd=ROOT,
                          capture_output=True, text=True, env={**_env(), "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stdout + done.stderr
    return out


def _env() -> dict[str, str]:
    import os

    return {**os.environ, "PYTHONPATH": str(ROOT)}


@pytest.mark.xdist_group("site")
@pytest.mark.time_limit(60)
def test_the_site_builds_strictly_and_every_nav_page_is_there(site):
    nav = re.findall(r":\s*([\w/.-]+\.md)\s*$", (ROOT / "mkdocs.yml").read_text(encoding="utf-8"), re.MULTILINE)
    assert len(nav) >= 20
    for page in nav:
        assert (site / page).with_suffix(".html").is_file(), page


@pytest.mark.xdist_group("site")
@pytest.mark.time_limit(60)
def test_the_site_loads_nothing_from_the_network(site):
    """No web fonts, scripts or style sheets from elsewhere: the site works offline, opened from disk."""
    external = re.compile(r"""<(?:script|link|img|iframe)\b[^>]*\b(?:src|href)=["'](?:https?:)?//""", re.IGNORECASE)
    pages = list(site.rglob("*.html"))
    assert pages
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert not external.search(text), (page, external.search(text).group(0))
        assert "fonts.googleapis" not in text and "fonts.gstatic" not in text, page


def _commands(group: click.Group, prefix: str) -> list[str]:
    paths = []
    for name, command in sorted(group.commands.items()):
        path = f"{prefix}-{name}"
        paths.append(path)
        if isinstance(command, click.Group):
            paths += _commands(command, path)
    return paths


@pytest.mark.xdist_group("site")
@pytest.mark.time_limit(60)
def test_the_cli_reference_has_every_command_and_subcommand(site):
    from dphist.cli import main

    page = (site / "reference" / "cli.html").read_text(encoding="utf-8")
    commands = _commands(main, "dphist")
    assert "dphist-budget-show" in commands
    for anchor in commands:
        assert f'id="{anchor}"' in page, anchor
    for option in ("--epsilon", "--run-key", "--require-cap", "--lock-timeout"):
        assert option in page, option


@pytest.mark.xdist_group("site")
@pytest.mark.time_limit(60)
def test_the_api_reference_renders_the_docstrings(site):
    page = (site / "reference" / "api.html").read_text(encoding="utf-8")
    for text in ("Release differentially private tables of", "marginal_strategy", "Write <code>&lt;table&gt;",
                 "BudgetExhausted", "exit code 2"):
        assert text in page, text


# --- the README -------------------------------------------------------------------------------------------------

LINK = re.compile(r"\]\((?P<target>[^)\s]+)\)")


def readme_link_problems(readme: Path) -> list[str]:
    """Relative links of ``readme`` (``[text](path)`` or ``[text](path#anchor)``) whose file does not exist."""
    problems = []
    for target in LINK.findall(readme.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        path = target.split("#", 1)[0]
        if not (readme.parent / path).exists():
            problems.append(target)
    return problems


def test_every_relative_link_of_the_readme_resolves():
    assert readme_link_problems(ROOT / "README.md") == []
    assert len(LINK.findall((ROOT / "README.md").read_text(encoding="utf-8"))) >= 10


def test_a_broken_readme_link_is_found(tmp_path):
    folder = "guide"  # not docs/: this file must cite no page of the real docs (tests/test_docs_references.py)
    (tmp_path / folder).mkdir()
    (tmp_path / folder / "a.md").write_text("# A\n", encoding="utf-8")
    readme = tmp_path / "README.md"
    readme.write_text(f"[ok]({folder}/a.md#a) [web](https://example.org) [gone]({folder}/b.md) [self](#x)\n",
                      encoding="utf-8")
    assert readme_link_problems(readme) == [f"{folder}/b.md"]


def test_the_readme_stays_short_and_its_example_paths_exist():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 150
    for path in set(re.findall(r"\bsample_data/[\w./-]+\w", text)):
        assert (ROOT / path).exists(), path


# --- exit codes -------------------------------------------------------------------------------------------------


def exit_codes_in_code(root: Path = ROOT, packages=("dphist", "dphist_audit")) -> set[int]:
    """Every exit code the code can give, read from its source: ``exit_code = N`` in a class, ``INTERNAL_ERROR =
    N``, ``sys.exit(N)`` and the CLI contract's ``_interrupted(log, N, ...)``; plus 0, success."""
    codes = {0}
    for package in packages:
        for path in (root / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) \
                        and isinstance(node.value.value, int) and not isinstance(node.value.value, bool):
                    names = {t.id for t in node.targets if isinstance(t, ast.Name)}
                    if names & {"exit_code", "INTERNAL_ERROR"}:
                        codes.add(node.value.value)
                elif isinstance(node, ast.Call):
                    function = ast.unparse(node.func)
                    arguments = {"sys.exit": 0, "_interrupted": 1}
                    at = arguments.get(function)
                    if at is not None and len(node.args) > at and isinstance(node.args[at], ast.Constant):
                        codes.add(node.args[at].value)
    return codes


def codes_on_page(page: Path) -> set[int]:
    """The codes in the first column of the page's exit code table (rows ``| N | ...``)."""
    return {int(code) for code in re.findall(r"^\|\s*(\d+)\s*\|", page.read_text(encoding="utf-8"), re.MULTILINE)}


def test_the_exit_code_page_lists_exactly_the_codes_the_code_gives():
    found = exit_codes_in_code()
    assert {0, 1, 2, 3, 4, 5, 6, 130, 143} <= found
    assert codes_on_page(DOCS / "reference" / "exit-codes.md") == found


def test_a_new_exit_code_in_the_code_is_found(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "errors.py").write_text(
        "import sys\nclass A(Exception):\n    exit_code = 7\nINTERNAL_ERROR = 5\n"
        "def f(log):\n    _interrupted(log, 130, 'x')\n    sys.exit(9)\n", encoding="utf-8")
    assert exit_codes_in_code(tmp_path, ("pkg",)) == {0, 5, 7, 9, 130}


def test_every_error_class_is_named_on_the_exit_code_page():
    page = (DOCS / "reference" / "exit-codes.md").read_text(encoding="utf-8")
    classes = set()
    for path in (ROOT / "dphist").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                bases = {ast.unparse(b).rsplit(".", 1)[-1] for b in node.bases}
                if bases & {"DphistError", "UsageError", "DataError", "BudgetExhausted", "LedgerLocked",
                            "LedgerError"}:
                    classes.add(node.name)
    assert {"UsageError", "LedgerMissing", "RunKeyBusy"} <= classes
    for name in classes:
        assert f"`{name}`" in page, name


def test_the_release_page_names_every_option_of_dphist_release():
    from dphist.cli.release import release_command

    page = (DOCS / "reference" / "release.md").read_text(encoding="utf-8")
    options = [next(o for o in p.opts if o.startswith("--")) for p in release_command.params
               if any(o.startswith("--") for o in p.opts)]
    assert "--epsilon" in options
    assert [o for o in options if not re.search(re.escape(o) + r"(?![\w-])", page)] == []


# --- schema and job spec keys ------------------------------------------------------------------------------------


def keys_in_tables(page: Path) -> set[str]:
    """The backticked names in the first column of the page's tables (``| `lower`, `upper` | ...``)."""
    keys = set()
    for cell in re.findall(r"^\|([^|\n]*)\|", page.read_text(encoding="utf-8"), re.MULTILINE):
        keys.update(re.findall(r"`([\w.\[\]<>*]+)`", cell))
    return keys


def test_the_schema_page_lists_every_field_of_every_column_type():
    from dphist.declare.schema import COLUMN_FIELDS

    text = (DOCS / "reference" / "schema.md").read_text(encoding="utf-8")
    listed = keys_in_tables(DOCS / "reference" / "schema.md")
    for kind, fields in COLUMN_FIELDS.items():
        assert f"`{kind}`" in text, kind
        assert fields <= listed, (kind, sorted(fields - listed))


def test_the_job_spec_page_lists_every_field():
    from dphist.declare.job import JOB_FIELDS, TABLE_FIELDS

    listed = keys_in_tables(DOCS / "reference" / "job-spec.md")
    assert JOB_FIELDS <= listed, sorted(JOB_FIELDS - listed)
    assert {f"tables[].{field}" for field in TABLE_FIELDS} <= listed, sorted(
        {f"tables[].{field}" for field in TABLE_FIELDS} - listed)


# --- report.json -------------------------------------------------------------------------------------------------

#: Parts of a report with the layout of another part: a discovered column's domain is a table's, the full table of
#: a marginal set is a table entry, and every list of steps has the steps' fields.
SAME_AS = [("marginals.full_table.", "tables[]."), ("discovery.steps[].", "tables[].steps[]."),
           ("marginals.steps[].", "tables[].steps[]."), ("unit_cap.step.", "tables[].steps[].")]


def field_paths(report, prefix: str = "") -> set[str]:
    """Every field of a report as a path: ``tables[].steps[].mechanism``; column and table names (the keys of
    ``domain`` and ``rmse_per_cell``) become ``<column>`` and ``<table>``."""
    paths = set()
    if isinstance(report, dict):
        for key, value in report.items():
            if prefix.endswith("domain"):
                key = "<column>"
            elif prefix.endswith("rmse_per_cell"):
                key = "<table>"
            path = f"{prefix}.{key}" if prefix else key
            paths.add(path)
            paths |= field_paths(value, path)
    elif isinstance(report, list):
        for value in report:
            paths |= field_paths(value, prefix + "[]")
    return paths


def undocumented(paths: set[str], listed: set[str]) -> list[str]:
    """The paths neither listed nor covered by a listed ``path.*``, after :data:`SAME_AS`."""
    missing = []
    for path in sorted(paths):
        for part, same in SAME_AS:
            if path.startswith(part):
                path = same + path[len(part):]
        parents = [path[:i] for i in range(len(path)) if path[i] == "."]
        if path not in listed and not any(f"{parent}.*" in listed for parent in parents):
            missing.append(path)
    return sorted(missing)


def test_a_field_the_report_page_does_not_list_is_found():
    listed = {"a", "a.b", "t", "t[].c", "t[].c.*", "tables[].steps[].what"}
    report = {"a": {"b": 1, "new": 2}, "t": [{"c": {"anything": {"deeper": 1}}}],
              "unit_cap": {"step": {"what": "x", "how": 1}}}
    assert undocumented(field_paths(report), listed) == ["a.new", "tables[].steps[].how", "unit_cap",
                                                          "unit_cap.step"]


@pytest.mark.time_limit(60)
def test_the_report_page_lists_every_field_real_releases_write(tmp_path):
    """Real releases of many kinds (pure, zCDP and (ε, δ); auto and data-adaptive algorithms; the three marginal
    strategies; discovery; a unit cap and a group; one charged to a ledger): every field they write is listed on
    docs/reference/report.md."""
    import pandas as pd

    import dphist

    frame = pd.read_csv(SAMPLE / "census.csv", nrows=3000)
    schema = str(SAMPLE / "census.schema.yaml")
    runs = [dict(epsilon="1", columns="age,sex"),
            dict(epsilon="1", columns="age", algorithm="hb"),
            dict(epsilon="1", columns="age,income", algorithm="dpcube"),
            dict(epsilon="1", columns="age", algorithm="ahp", raw=True),
            dict(rho="0.1", columns="age,sex"),
            dict(epsilon="1", delta="1e-6", noise="gaussian", columns="age,sex"),
            dict(epsilon="1", marginals="age,sex;sex,education", marginal_strategy="separate"),
            dict(epsilon="1", marginals="age,sex;sex,education", marginal_strategy="full"),
            dict(rho="0.1", marginals="age,sex;sex,education"),
            dict(epsilon="1", columns="age,sex", privacy_unit="sex", max_rows_per_unit=5, group_size=2)]
    paths = set()
    for options in runs:
        paths |= field_paths(dphist.release(frame, schema=schema, seed=1, **options).report)
    paths |= field_paths(dphist.release(frame, epsilon="1", delta="1e-6", columns="age,sex", seed=1).report)
    charged = dphist.release(frame, epsilon="1", schema=schema, columns="sex", ledger=tmp_path / "ledger.sqlite",
                             dataset_id="census sample")
    paths |= field_paths(charged.report)
    assert {"ledger.reservation_entry", "discovery.columns[].keeps", "marginals.rounded_agreement",
            "unit_cap.dropped_share", "tables[].steps[].sigma2"} <= paths
    assert undocumented(paths, keys_in_tables(DOCS / "reference" / "report.md")) == []
