"""Recovery checks the disk against the hashes before it publishes or records anything (dphist/publishing/transaction.py).

Each run is a real process (test_transaction's ``run``), killed at a checkpoint; then the staging folder, or the
release moved into place, is changed the way a person or another program might change it: a file put in, changed
or taken out, or the whole folder deleted.  Recovery must then publish nothing that the commit's hashes do not
cover, delete nothing, record nothing that claims success, and say in one line what to do; the budget stays spent.
"""

from __future__ import annotations

import json
import shutil
from fractions import Fraction
from pathlib import Path

import pytest

from dphist.publishing.destination import MARKER, read_marker
from dphist.publishing.ledger import Ledger

from test_checkpoints import first_run_id, kinds, leftovers, release_args, run, spent


def staging_of(tmp_path: Path) -> Path:
    (found,) = [p for p in tmp_path.iterdir() if ".dphist-staging." in p.name]
    return found


def recover(ledger: Path):
    return run(["budget", "recover"], ledger)


def one_error_line(outcome) -> str:
    lines = outcome.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and "Traceback" not in outcome.stderr, outcome.stderr
    return lines[0]


def holds_exactly_the_release(out: Path) -> bool:
    marker = read_marker(out)
    return marker is not None and sorted(p.name for p in out.iterdir()) == sorted([MARKER, *marker["files"]])


@pytest.mark.parametrize("point, after_kill", [("staged", ["RESERVE", "READ"]),
                                               ("committed", ["RESERVE", "READ", "COMMIT"])])
def test_a_file_put_into_staging_is_never_published_and_the_run_waits_for_the_steward(tmp_path, point, after_kill):
    ledger, out = tmp_path / "l.sqlite", tmp_path / "out"
    assert run(release_args(out, "--run-key", "k"), ledger, fault=point).exit_code == -9
    staging = staging_of(tmp_path)
    (staging / "notes.txt").write_text("not part of the release")

    done = recover(ledger)
    assert done.exit_code == 1 and "left as they are" in one_error_line(done), done.stdout + done.stderr
    assert "'notes.txt', which is not part of the release" in done.stdout and "stays spent" in done.stdout
    assert "move what is not part of the release out of that folder" in done.stdout
    assert (staging / "notes.txt").exists() and not out.exists()  # nothing published, nothing deleted
    assert kinds(ledger) == after_kill and spent(ledger) == Fraction(1, 2)  # nothing recorded; still spent

    retry = run(release_args(out, "--run-key", "k"), ledger)
    assert retry.exit_code == 3 and "'notes.txt'" in one_error_line(retry)
    assert "read and spent nothing" in retry.stderr and "new --run-key" in retry.stderr
    assert kinds(ledger) == after_kill and not out.exists()  # no new reservation, no noise drawn

    shutil.move(staging / "notes.txt", tmp_path / "notes.txt")  # what the line says to do
    again = recover(ledger)
    assert again.exit_code == 0 and "1 interrupted run(s) recovered" in again.stdout, again.stdout + again.stderr
    assert holds_exactly_the_release(out) and read_marker(out)["run_id"] == first_run_id(ledger)
    assert kinds(ledger)[-1] == "PUBLISH" and leftovers(tmp_path) == [] and spent(ledger) == Fraction(1, 2)
    assert run(release_args(out, "--run-key", "k"), ledger).exit_code == 0  # now it is there
    assert Ledger(ledger).verify() == []


@pytest.mark.parametrize("change", ["changed", "missing"])
def test_a_changed_or_missing_file_in_staging_is_left_until_the_folder_is_put_right_or_deleted(tmp_path, change):
    ledger, out = tmp_path / "l.sqlite", tmp_path / "out"
    assert run(release_args(out, "--run-key", "k"), ledger, fault="committed").exit_code == -9
    staging = staging_of(tmp_path)
    if change == "changed":
        (staging / "sex.csv").write_text("sex,count\nF,1000000\n")
    else:
        (staging / "sex.csv").unlink()
    before = sorted(p.name for p in staging.iterdir())

    done = recover(ledger)
    said = {"changed": "has 'sex.csv' changed since the release was committed", "missing": "is missing 'sex.csv'"}
    assert done.exit_code == 1 and said[change] in done.stdout, done.stdout
    assert "delete that folder to give the release up" in done.stdout
    assert kinds(ledger) == ["RESERVE", "READ", "COMMIT"] and not out.exists()

    # A later release to the same --out sweeps dead runs' leftovers: it must leave this folder too.
    assert run(release_args(out), ledger).exit_code == 0
    assert staging.is_dir() and sorted(p.name for p in staging.iterdir()) == before

    shutil.rmtree(staging)  # the steward gives the release up
    gone = recover(ledger)
    assert gone.exit_code == 0 and "its files are gone" in gone.stdout, gone.stdout + gone.stderr
    assert kinds(ledger)[-1] == "PUBLISH" and spent(ledger) == 1  # both releases' epsilon
    assert not [e for e in Ledger(ledger).history("census") if e["detail"].get("published") is True
                and e["run_id"] == first_run_id(ledger)]


def test_a_run_key_whose_staging_folder_was_deleted_is_not_reported_as_released(tmp_path):
    """Killed after the commit, its staging folder deleted, then recovery: the retry must not claim the release
    is at --out, and must not draw new noise under the key."""
    ledger, out = tmp_path / "l.sqlite", tmp_path / "r5"
    assert run(release_args(out, "--run-key", "K"), ledger, fault="committed").exit_code == -9
    shutil.rmtree(staging_of(tmp_path))
    assert recover(ledger).exit_code == 0
    retry = run(release_args(out, "--run-key", "K", "--log-format", "json"), ledger)
    record = json.loads(retry.stderr)
    assert retry.exit_code == 3 and record["exit_code"] == 3, retry.stderr
    assert f"committed to {out}" in record["message"] and "does not exist" in record["message"]
    assert "already committed" not in retry.stderr and not out.exists()
    assert kinds(ledger) == ["RESERVE", "READ", "COMMIT", "PUBLISH"] and spent(ledger) == Fraction(1, 2)


def test_a_release_moved_into_place_before_the_kill_is_recorded_only_if_its_files_match(tmp_path):
    ledger, out = tmp_path / "l.sqlite", tmp_path / "out"
    assert run(release_args(out, "--run-key", "k"), ledger, fault="moved").exit_code == -9
    original = (out / "sex.csv").read_bytes()
    (out / "sex.csv").write_bytes(original + b"F,5\n")
    done = recover(ledger)
    assert done.exit_code == 1 and "its release at" in done.stdout and "'sex.csv' changed" in done.stdout
    assert kinds(ledger) == ["RESERVE", "READ", "COMMIT"]
    retry = run(release_args(out, "--run-key", "k"), ledger)
    assert retry.exit_code == 3 and "'sex.csv' changed" in one_error_line(retry)

    (out / "sex.csv").write_bytes(original)
    (out / "README.txt").write_text("a note the steward put beside the published release")
    again = recover(ledger)
    assert again.exit_code == 0 and "already in place" in again.stdout, again.stdout + again.stderr
    assert kinds(ledger)[-1] == "PUBLISH" and Ledger(ledger).history("census")[-1]["detail"]["published"] is True


@pytest.mark.parametrize("damage", ["deleted", "file removed", "file changed", "replaced"])
def test_a_retry_checks_the_published_release_against_the_commits_hashes(tmp_path, damage):
    ledger, out = tmp_path / "l.sqlite", tmp_path / "out"
    assert run(release_args(out, "--run-key", "k", "-q"), ledger).exit_code == 0
    if damage == "deleted":
        shutil.rmtree(out)
    elif damage == "file removed":
        (out / "report.json").unlink()
    elif damage == "file changed":
        (out / "sex.csv").write_text("sex,count\n")
    else:  # a later release under another key, over the same folder
        assert run(release_args(out, "--run-key", "other", "--overwrite", "-q"), ledger).exit_code == 0
    before = kinds(ledger)
    retry = run(release_args(out, "--run-key", "k"), ledger)
    words = {"deleted": "does not exist", "file removed": "is missing 'report.json'",
             "file changed": "'sex.csv' changed", "replaced": "marker of another run"}[damage]
    line = one_error_line(retry)
    assert retry.exit_code == 3 and words in line and "already committed" not in line, line
    assert kinds(ledger) == before  # nothing reserved, nothing drawn
