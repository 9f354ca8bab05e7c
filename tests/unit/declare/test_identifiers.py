"""Data set ids and run keys (dphist/declare/identifiers.py): what is refused and why, NFC normalisation, and default ids
that are the same however the same files are named.  (Where the checks are applied, from the command line, a
spec, the API and the budget commands: the bad-input corpus and cli/test_budget_commands.py.)"""

from __future__ import annotations

import os
import unicodedata
from pathlib import Path

import pytest

from dphist.declare import identifiers
from dphist.errors import UsageError

# ---- the rules ------------------------------------------------------------------------------------------------

REFUSED = [
    ("", "is empty"),
    ("   ", "only whitespace"),
    ("\u00a0", "only whitespace"),  # a no-break space alone
    (" census", "begins or ends with whitespace"),
    ("census ", "begins or ends with whitespace"),
    ("a\nb", "U+000A, a line break"),
    ("a\rb", "U+000D, a carriage return"),
    ("a\tb", "U+0009, a tab"),
    ("\n", "U+000A"),
    ("cen\u200bsus", "U+200B, zero width space"),  # invisible: would look like "census"
    ("cen\u202esus", "U+202E"),  # a direction override
    ("a\u2028b", "U+2028"),  # a line separator
    ("a\ud800b", "an undecodable byte"),  # what a file name's undecodable byte becomes
    ("a\ue000b", "a private-use character"),
    ("x" * 201, "201 characters long"),
]


@pytest.mark.parametrize("value, message", REFUSED, ids=[repr(v[:12]) for v, _ in REFUSED])
@pytest.mark.parametrize("check", [identifiers.dataset_id, identifiers.run_key])
def test_a_name_that_is_not_one_line_of_visible_text_is_refused(check, value, message):
    with pytest.raises(UsageError, match="^--(dataset-id|run-key)") as caught:
        check(value)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value) and len(str(caught.value)) < 400


def test_names_are_nfc_so_one_name_is_one_account():
    composed, decomposed = "caf\u00e9", "cafe\u0301"
    assert identifiers.dataset_id(decomposed) == identifiers.dataset_id(composed) == composed
    assert identifiers.run_key(decomposed) == composed
    # The limit counts the normalised name.
    assert identifiers.dataset_id("e\u0301" * 200) == "\u00e9" * 200


def test_ordinary_names_pass_unchanged():
    for name in ["census", "census 2026", "Zählung/Bezirk-3", "nightly-2026-11-21", "x" * 200, "python:DataFrame"]:
        assert identifiers.dataset_id(name) == name and identifiers.run_key(name) == name


def test_the_message_names_where_the_value_came_from():
    with pytest.raises(UsageError, match="^dataset_id is empty"):
        identifiers.dataset_id("", "dataset_id")
    with pytest.raises(UsageError, match="must be text, not int"):
        identifiers.dataset_id(5, "dataset_id")
    with pytest.raises(UsageError, match="release without one"):
        identifiers.run_key("")


def test_an_account_may_be_as_long_as_a_path_but_no_longer():
    path = "/" + "d" * 4000
    assert identifiers.account(path) == path
    with pytest.raises(UsageError, match="at most 4096"):
        identifiers.account("x" * 4097)
    with pytest.raises(UsageError, match="at most 200"):
        identifiers.dataset_id(path)
    with pytest.raises(UsageError, match="U\\+000A"):
        identifiers.account("a\nb")


def test_shown_escapes_what_old_ledgers_may_hold():
    assert identifiers.shown("a\nb\u200b") == "a\\u000ab\\u200b"
    assert identifiers.shown("Zählung 2026") == "Zählung 2026"


# ---- default ids ----------------------------------------------------------------------------------------------


@pytest.fixture
def files(tmp_path, monkeypatch) -> Path:
    """data/a.csv and data/b.csv, a link to data/a.csv, a link to data/, and the working directory at tmp_path."""
    data = tmp_path / "data"
    (data / "2026").mkdir(parents=True)
    for name in ("a.csv", "b.csv", "2026/c.csv"):
        (data / name).write_text("x\n1\n")
    (tmp_path / "link.csv").symlink_to(data / "a.csv")
    (tmp_path / "linked").symlink_to(data, target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_same_files_get_the_same_id_however_they_are_named(files):
    real = Path(os.path.realpath(files))
    one_file = {
        "a path": str(files / "data" / "a.csv"),
        "a relative path": "data/a.csv",
        "a path with ..": "data/2026/../a.csv",
        "a symbolic link to the file": "link.csv",
        "the file through a linked directory": "linked/a.csv",
    }
    several = {
        "a directory": "data",
        "a directory with a slash": "data/",
        "a glob": "data/*.csv",
        "a ** glob": "data/**/*.csv",
        "an absolute glob": str(files / "data" / "*.csv"),
        "a symbolic link to the directory": "linked",
        "a glob through the linked directory": "linked/*.csv",
    }
    for how, named in one_file.items():
        assert identifiers.default_dataset_id(named) == str(real / "data" / "a.csv"), how
    for how, named in several.items():
        assert identifiers.default_dataset_id(named) == str(real / "data"), how


def test_a_directory_or_glob_keeps_its_id_when_files_are_added(files):
    """The id is the directory that holds every file the input can name, not today's files' deepest folder: a
    nightly folder's first file does not give it an account of its own."""
    (files / "only").mkdir()
    (files / "only" / "day1").mkdir()
    (files / "only" / "day1" / "x.csv").write_text("x\n1\n")
    before = [identifiers.default_dataset_id(n) for n in ("only", "only/**/*.csv", "only/*/x.csv")]
    (files / "only" / "day2").mkdir()
    (files / "only" / "day2" / "x.csv").write_text("x\n1\n")
    after = [identifiers.default_dataset_id(n) for n in ("only", "only/**/*.csv", "only/*/x.csv")]
    assert before == after == [os.path.realpath(files / "only")] * 3


def test_a_glob_with_a_pattern_first_is_the_working_directory(files):
    assert identifiers.default_dataset_id("*.csv") == os.path.realpath(files)
    assert identifiers.default_dataset_id("**/b.csv") == os.path.realpath(files)


def test_a_path_that_exists_is_taken_as_written_even_with_glob_characters(files):
    (files / "data[1].csv").write_text("x\n1\n")
    assert identifiers.default_dataset_id("data[1].csv") == os.path.realpath(files / "data[1].csv")


def test_a_url_is_its_own_id():
    assert identifiers.default_dataset_id("s3a://bucket/census/*.parquet") == "s3a://bucket/census/*.parquet"


def test_a_real_path_that_cannot_be_a_name_asks_for_an_id(files):
    (files / "new\nline.csv").write_text("x\n1\n")
    with pytest.raises(UsageError, match="real path holds an unprintable character .*--dataset-id"):
        identifiers.default_dataset_id("new\nline.csv")


def test_a_default_id_is_nfc(files):
    name = unicodedata.normalize("NFD", "café.csv")
    (files / name).write_text("x\n1\n")
    assert identifiers.default_dataset_id(name).endswith("caf\u00e9.csv")
