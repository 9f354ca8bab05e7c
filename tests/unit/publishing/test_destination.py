"""A release folder against the release a run committed (dphist/publishing/destination.py: release_mismatch), and the
sweep of dead runs' staging folders, which leaves a marked one for its run's recovery."""

from __future__ import annotations

import os
import subprocess
import sys

from dphist.publishing.destination import MARKER, Destination, Mismatch, release_mismatch, sweep_orphans, write_marker

RUN = "a" * 32


def staged(folder, files=None, run_id=RUN):
    """A folder with ``files`` (name -> text) and the marker of ``run_id``; returns the committed hashes."""
    folder.mkdir()
    for name, text in (files or {"t.csv": "a,b\n", "report.json": "{}\n"}).items():
        (folder / name).write_text(text)
    return write_marker(folder, run_id, "k", False)


def test_a_folder_with_exactly_the_committed_files_matches(tmp_path):
    files = staged(tmp_path / "s")
    assert release_mismatch(tmp_path / "s", RUN, files, alone=True) is None


def test_a_stray_file_is_named_in_a_staging_folder_but_allowed_beside_a_published_release(tmp_path):
    files = staged(tmp_path / "s")
    (tmp_path / "s" / "notes.txt").write_text("mine")
    found = release_mismatch(tmp_path / "s", RUN, files, alone=True)
    assert found == Mismatch(extra=("notes.txt",)) and found.only_extra
    assert str(found) == "holds 'notes.txt', which is not part of the release"
    assert release_mismatch(tmp_path / "s", RUN, files, alone=False) is None


def test_a_changed_missing_or_replaced_file_is_named(tmp_path):
    files = staged(tmp_path / "s", {"a.csv": "1\n", "b.csv": "2\n", "c.csv": "3\n", "report.json": "{}\n"})
    (tmp_path / "s" / "a.csv").write_text("1\n2\n")
    (tmp_path / "s" / "b.csv").unlink()
    (tmp_path / "s" / "c.csv").unlink()
    (tmp_path / "s" / "c.csv").symlink_to(tmp_path / "elsewhere")  # a link is not the committed file
    found = release_mismatch(tmp_path / "s", RUN, files, alone=True)
    assert found == Mismatch(missing=("b.csv",), changed=("a.csv", "c.csv")) and not found.only_extra
    assert str(found) == "is missing 'b.csv' and has 'a.csv' and 'c.csv' changed since the release was committed"


def test_the_marker_must_be_this_runs_and_list_the_committed_files(tmp_path):
    files = staged(tmp_path / "s")
    assert release_mismatch(tmp_path / "s", "b" * 32, files, alone=True).marker == "holds the marker of another run"
    assert "does not list" in release_mismatch(tmp_path / "s", RUN, {**files, "x.csv": "0" * 64}, alone=True).marker
    (tmp_path / "s" / MARKER).unlink()
    assert release_mismatch(tmp_path / "s", RUN, files, alone=True) == Mismatch(marker="holds no release marker")
    assert str(release_mismatch(tmp_path / "nowhere", RUN, files, alone=False)) == "does not exist"


def test_names_are_clipped_and_counted(tmp_path):
    files = staged(tmp_path / "s")
    for i in range(5):
        (tmp_path / "s" / (f"{i}" + "x" * 200)).write_text("")
    text = str(release_mismatch(tmp_path / "s", RUN, files, alone=True))
    assert text.endswith("and 2 more, which are not part of the release") and len(text) < 300


def dead_owner_staging(out, run_id):
    """The staging folder of ``out`` as a process that has ended would have named it."""
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    tag = Destination(out).staging_path(run_id).name.split(".")
    tag[-3:-1] = [child.stdout.strip(), "0"]  # that pid, gone now, with an unknown start time
    return out.parent / ".".join(tag)


def test_the_sweep_leaves_a_dead_runs_marked_staging_folder_even_when_it_was_changed(tmp_path):
    out = tmp_path / "out"
    marked = dead_owner_staging(out, RUN)
    staged(marked)
    (marked / "t.csv").write_text("changed")  # no longer complete, but a ledger run may have paid for it
    (marked / "notes.txt").write_text("not dphist's")
    partial = dead_owner_staging(out, "c" * 32)
    partial.mkdir()
    (partial / "t.csv").write_text("half")
    assert sweep_orphans(out) == [partial]
    assert marked.is_dir() and (marked / "notes.txt").exists() and not partial.exists()
    assert sorted(os.listdir(marked)) == sorted([MARKER, "t.csv", "report.json", "notes.txt"])


def test_a_stray_name_with_a_line_break_is_escaped_to_one_line(tmp_path):
    files = staged(tmp_path / "s")
    (tmp_path / "s" / "evil\nError: all good").write_text("")
    text = str(release_mismatch(tmp_path / "s", RUN, files, alone=True))
    assert "\n" not in text and "evil\\nError" in text
