"""``dphist review`` through the command line: where the page goes by default, and the refusals (one line, exit 2
or 1, no file left) for an existing page, a page inside a release folder, a folder that is not a release and a
damaged report.  The bad-input corpus (tests/support/corpus_cases.py) runs more damaged releases through it."""

from __future__ import annotations

import pytest

from cli_harness import invoke
from conftest import write

SCHEMA = "columns:\n  sex: {type: categorical, values: [F, M]}\n"


@pytest.fixture
def rel(tmp_path):
    write(tmp_path, "schema.yaml", SCHEMA)
    write(tmp_path, "data.csv", "sex\n" + "F\nM\n" * 50)
    result = invoke(["release", str(tmp_path / "data.csv"), "-s", str(tmp_path / "schema.yaml"), "-e", "1",
                     "--seed", "1", "-q", "-o", str(tmp_path / "rel")])
    assert result.exit_code == 0, result.output
    return tmp_path / "rel"


@pytest.mark.time_limit(15)  # the first page drawn in a process imports matplotlib (seconds on a loaded machine)
def test_default_page_is_review_html_in_the_working_directory(rel, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    result = invoke(["review", str(rel)], cwd=work)
    assert result.exit_code == 0, result.output + result.crash
    assert result.stderr.strip() == "wrote review.html"
    page = (work / "review.html").read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "TEST MODE" in page
    again = invoke(["review", str(rel)], cwd=work)
    assert again.exit_code == 2 and again.stderr.count("\n") == 1 and "--overwrite" in again.stderr
    assert (work / "review.html").read_text(encoding="utf-8") == page
    assert invoke(["review", str(rel), "--overwrite"], cwd=work).exit_code == 0


def test_a_page_inside_a_release_folder_is_refused(rel):
    result = invoke(["review", str(rel), "-o", str(rel / "review.html")])
    assert result.exit_code == 2 and "inside a release folder" in result.stderr and "--review" in result.stderr
    assert not (rel / "review.html").exists()


@pytest.mark.parametrize("damage, code, words", [
    (lambda rel: (rel / "report.json").unlink(), 2, "not a dphist release"),
    (lambda rel: (rel / "report.json").write_text("{broken"), 1, "not valid JSON"),
    (lambda rel: (rel / "sex.csv").unlink(), 1, "file is missing"),
])
def test_bad_releases_are_one_line_and_leave_no_page(rel, tmp_path, damage, code, words):
    damage(rel)
    out = tmp_path / "page.html"
    result = invoke(["review", str(rel), "-o", str(out)])
    assert result.exit_code == code and words in result.stderr, result.output
    assert result.stderr.count("\n") == 1 and not result.crash and not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".page.html")]


def test_wrong_suffix_and_missing_folder(rel, tmp_path):
    assert invoke(["review", str(rel), "-o", str(tmp_path / "page.pdf")]).exit_code == 2
    result = invoke(["review", str(rel), "-o", str(tmp_path / "nowhere" / "page.html")])
    assert result.exit_code == 2 and "does not exist" in result.stderr
