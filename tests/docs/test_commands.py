"""Every command shown in the tutorial and the how-to guides is run, and its output compared with the page.

The format, for whoever writes a page (tests/support/console_blocks.py has the details):

    ```console
    $ dphist check sample_data/census.csv --schema schema.yaml --columns age,sex
    NOT differentially private: ...          <- "..." in a line matches any text
    ...                                      <- a line of only "..." matches any number of lines
    [exit 6]                                 <- the command must exit 6 (without this line: 0)
    ```

* Expected output is stdout and stderr merged, as a terminal shows them; lines are compared exactly once
  trailing spaces are stripped.  Noise differs on every run: put ``...`` where a noisy number is printed.
* ``<!-- norun: REASON -->`` right before a fence skips the block (say why on the page too);
  ``<!-- file: NAME -->`` right before a fence writes the block's text to NAME before the commands after it run.
* Each page runs in a fresh temporary folder holding a copy of ``sample_data/``; the pages' commands are written
  as a user types them at the root of a fresh clone.  ``dphist`` on PATH runs this checkout's code; ``python3``
  is the running interpreter's.  HOME, the XDG folders and ``DPHIST_CACHE_DIR`` point into the temporary folder,
  so the default ledger (``~/.local/share/dphist/ledger.sqlite``) is the page's own, never the user's.
* Files carry over from block to block of a page, in order; shell state (``cd``, variables) does not: each
  command is its own bash process.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import sys
from pathlib import Path

import pytest
from console_blocks import PageError, parse_blocks, output_matches, run_page
from test_docs_references import anchors

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"

#: The pages whose commands are run, each with how long it may take (wall time of a two-core machine running two
#: test workers: about 1 s of CPU per dphist command, most of it Python's imports, and 2-3 s per release).  Every
#: page runs in `make test`, which CI runs, so that no page shows output its commands no longer print; a page too
#: slow gets a longer limit, never a cut.
PAGES = [
    pytest.param("tutorial.md", marks=pytest.mark.time_limit(40)),
    pytest.param("how-to/schema.md", marks=pytest.mark.time_limit(30)),
    pytest.param("how-to/cron.md", marks=pytest.mark.time_limit(90)),
    pytest.param("how-to/privacy-units.md", marks=pytest.mark.time_limit(30)),
    pytest.param("how-to/zcdp.md", marks=pytest.mark.time_limit(90)),
    pytest.param("how-to/marginal-sets.md", marks=pytest.mark.time_limit(30)),
    pytest.param("how-to/spark.md", marks=pytest.mark.time_limit(40)),
]
#: Optional packages a page's commands need; without them the page is skipped, saying why.  (Its Spark block is
#: norun: a JVM's start takes a minute on a busy machine.)
REQUIRES = {"how-to/spark.md": ("dask", "distributed")}
PAGE_NAMES = [param.values[0] for param in PAGES]

#: Environment variables of dphist's that would change what a page's commands do, and the caller's Python path.
CLEARED = ("DPHIST_LEDGER", "DPHIST_REQUIRE_CAP", "DPHIST_DEBUG", "DPHIST_CACHE_DIR", "PYTHONPATH", "PYTHONHOME",
           "PYTHONWARNINGS", "PYTHONSTARTUP")


def page_environment(work: Path) -> dict[str, str]:
    """The environment of a page's commands: a ``dphist`` that runs this checkout, every per-user folder inside
    ``work``, unbuffered Python output (so stdout and stderr interleave as on a terminal), UTF-8, UTC."""
    bin_dir = work / ".bin"
    bin_dir.mkdir()
    # The console script pip writes, pointed at this interpreter: the command is named `dphist` in usage lines,
    # and with PYTHONPATH below it imports this checkout, whatever the environment has installed.
    script = bin_dir / "dphist"
    script.write_text(f"#!{sys.executable}\nimport sys\nfrom dphist.cli import main\nsys.exit(main())\n",
                      encoding="utf-8")
    script.chmod(0o755)
    home = work / ".home"
    env = {key: value for key, value in os.environ.items() if key not in CLEARED and not key.startswith("XDG_")}
    env.update({
        "PATH": os.pathsep.join([str(bin_dir), str(Path(sys.executable).parent), "/usr/local/bin", "/usr/bin",
                                 "/bin"]),
        "PYTHONPATH": str(ROOT),
        "PYTHONUNBUFFERED": "1",
        "PYTHONIOENCODING": "utf-8",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TZ": "UTC",
        "COLUMNS": "100",
        "HOME": str(home),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        "DPHIST_CACHE_DIR": str(home / ".cache" / "dphist" / "strategies"),
    })
    return env


def prepare(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    work = tmp_path / "clone"
    work.mkdir()
    shutil.copytree(ROOT / "sample_data", work / "sample_data")
    return work, page_environment(tmp_path)


@pytest.mark.parametrize("page", PAGES)
def test_every_command_of_the_page_prints_what_the_page_shows(page, tmp_path):
    missing = [name for name in REQUIRES.get(page, ()) if importlib.util.find_spec(name) is None]
    if missing:
        pytest.skip(f"docs/{page} runs commands that need {', '.join(missing)} (pip install 'dphist[dask]')")
    work, env = prepare(tmp_path)
    ran, failures = run_page((DOCS / page).read_text(encoding="utf-8"), work, env, page=f"docs/{page}")
    assert not failures, "\n".join(failures)
    assert ran > 0, f"docs/{page} runs no command"


@pytest.mark.parametrize("page", PAGE_NAMES)
def test_the_page_shows_commands_only_in_blocks_the_runner_reads(page):
    """A command in a ``sh`` or ``bash`` block would escape the test: commands are in console blocks, run or
    marked norun with a reason, and a shell block is only the text of a script the page writes and runs."""
    blocks = parse_blocks((DOCS / page).read_text(encoding="utf-8"))
    shell = [block.line for block in blocks
             if block.info in ("sh", "bash", "shell", "shell-session", "zsh") and block.file is None]
    assert shell == [], f"docs/{page}: shell blocks at lines {shell}: write them as console blocks (a script the " \
                        "page's commands run is a file block)"
    for block in blocks:
        if block.is_console and block.norun is None:
            block.commands()  # raises PageError on a malformed block


#: A Markdown link to a page of the site, with or without a heading: ``[text](../privacy.md#4-the-budget-ledger)``.
LINK = re.compile(r"\]\((?P<target>[^)\s:#]+\.md)?(?:#(?P<anchor>[\w-]+))?\)")


@pytest.mark.parametrize("page", PAGE_NAMES)
def test_the_page_links_land_on_pages_and_headings(page):
    """The guides live in docs/ and docs/how-to/, so their links are relative; each must reach a page that exists
    and, where it names one, a heading of it (as MkDocs makes anchors)."""
    source = DOCS / page
    broken = []
    for match in LINK.finditer(source.read_text(encoding="utf-8")):
        target = (source.parent / match.group("target")).resolve() if match.group("target") else source
        if not target.is_file():
            broken.append(f"{match.group(0)}: no page {target.relative_to(ROOT) if ROOT in target.parents else target}")
        elif match.group("anchor") and match.group("anchor") not in anchors(target):
            broken.append(f"{match.group(0)}: no such heading in {target.relative_to(ROOT)}")
    assert broken == [], f"docs/{page}: " + "; ".join(broken)


# ---- the runner itself --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("expected, actual, fits", [
    (["a", "b"], ["a", "b"], True),
    (["a", "b"], ["a", "c"], False),  # a wrong line
    (["a"], ["a", "b"], False),  # output the page does not show
    (["a", "b"], ["a"], False),  # output the page shows and the command did not print
    (["a  "], ["a", "", ""], True),  # trailing spaces and blank lines
    (["x = ...!"], ["x = 42!"], True),
    (["x = ...!"], ["x = 42?"], False),
    (["...", "z"], ["x", "y", "z"], True),
    (["a", "...", "z"], ["a", "z"], True),  # "..." may stand for no line
    (["a", "...", "z"], ["a", "b", "c"], False),
    (["a (b) [c] ..."], ["a (b) [c] d"], True),  # regex characters are literal
    (["a.c"], ["abc"], False),
])
def test_the_matcher(expected, actual, fits):
    assert output_matches(expected, actual) is fits


PLANTED = """# A page

<!-- file: greeting.txt -->
```text
hello
```

```console
$ cat greeting.txt
hello
$ echo "one \\
two"
one two
$ ls missing-file
ls: cannot access 'missing-file': No such file or directory
[exit 2]
```

<!-- norun: it would fail -->
```console
$ false
```
"""


def test_a_page_that_tells_the_truth_passes(tmp_path):
    ran, failures = run_page(PLANTED, tmp_path, page_environment(tmp_path))
    assert (ran, failures) == (3, [])


@pytest.mark.parametrize("old, new, complaint", [
    ("\nhello\n$ echo", "\nhallo\n$ echo", "hallo"),  # a wrong expected line
    ("[exit 2]", "[exit 1]", "actual (exit 2)"),  # the wrong exit code
    ("\n[exit 2]\n", "\n", "expected (exit 0)"),  # a failure the page does not announce
    ("one two\n", "one two\nthree\n", "three"),  # a line the command does not print
])
def test_a_page_that_lies_fails(tmp_path, old, new, complaint):
    assert PLANTED.count(old) == 1
    ran, failures = run_page(PLANTED.replace(old, new), tmp_path, page_environment(tmp_path), page="planted.md")
    assert len(failures) == 1 and complaint in failures[0] and failures[0].startswith("planted.md:"), failures


def test_the_failure_points_at_the_first_line_that_differs(tmp_path):
    page = "```console\n$ printf 'a\\nb\\nc\\n'\na\nB\nc\n```\n"
    ran, failures = run_page(page, tmp_path, page_environment(tmp_path))
    assert len(failures) == 1 and failures[0].endswith("first difference, output line 2:\n    - B\n    + b"), failures


def test_the_runner_stops_at_the_first_failure(tmp_path):
    page = "```console\n$ echo a\nb\n$ touch ran-on\n```\n"
    ran, failures = run_page(page, tmp_path, page_environment(tmp_path))
    assert ran == 1 and len(failures) == 1 and not (tmp_path / "ran-on").exists()


@pytest.mark.parametrize("page, problem", [
    ("<!-- norun -->\n```console\n$ true\n```\n", "needs a reason"),
    ("```console\nstray output\n$ true\n```\n", "output before any"),
    ("```console\n$ true\n", "never closed"),
])
def test_a_malformed_page_is_refused(tmp_path, page, problem):
    with pytest.raises(PageError, match=problem):
        run_page(page, tmp_path, page_environment(tmp_path))
