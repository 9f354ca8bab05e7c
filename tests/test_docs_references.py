"""Citations of the reference pages: every ``docs/<page>.md §N[.M]`` in the code, tests and benchmarks names a page
and a section heading that exist, no citation names a page without its ``docs/`` folder, and the pages' links to
each other land on headings that exist."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCANNED = ("dphist", "dphist_audit", "tests", "bench")
SUFFIXES = (".py", ".md")

_NUMBER = r"\d+(?:\.\d+)*"
#: ``docs/<page>.md`` and the sections cited after it: "§3.1, §3.3", "§4 and §5.2", "§1.1–1.3", "§6.2-6.3".
CITATION = re.compile(r"docs/(?P<page>[\w-]+)\.md(?P<sections>\s*§" + _NUMBER
                      + r"(?:(?:\s*,\s*(?:and\s+)?|\s+and\s+)§" + _NUMBER + r"|[–-]" + _NUMBER + r")*)?")
#: A page of the old notes, or one of the pages, named without the docs/ folder.
BARE = re.compile(r"(?<![\w/.-])(?:algorithms|privacy-engineering|privacy|design|architecture)\.md\b")
HEADING = re.compile(r"^#{1,6}\s+(" + _NUMBER + r")\.?\s", re.MULTILINE)
LINK = re.compile(r"\]\((?P<page>[\w-]+\.md)?(?:#(?P<anchor>[\w-]+))?\)")


def sections(page: Path) -> set[str]:
    """The section numbers of a page's headings ("## 3. Title" -> "3", "### 3.2 Title" -> "3.2")."""
    return set(HEADING.findall(page.read_text(encoding="utf-8")))


def slug(heading: str) -> str:
    """The anchor MkDocs (Python-Markdown's toc) gives a heading: ASCII, lower case, punctuation dropped."""
    text = unicodedata.normalize("NFKD", heading).encode("ascii", "ignore").decode()
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(page: Path) -> set[str]:
    return {slug(m.group(1)) for m in re.finditer(r"^#{1,6}\s+(.+?)\s*$", page.read_text(encoding="utf-8"),
                                                re.MULTILINE)}


def citation_problems(root: Path, folders=SCANNED) -> list[str]:
    """Every citation under ``folders`` of ``root`` that names a missing page or section, or a page without docs/."""
    docs = root / "docs"
    known = {p.stem: sections(p) for p in docs.glob("*.md")}
    problems = []
    for folder in folders:
        for path in sorted((root / folder).rglob("*")):
            if path.suffix not in SUFFIXES or not path.is_file():
                continue
            where = path.relative_to(root).as_posix()
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                for match in CITATION.finditer(line):
                    page = match.group("page")
                    if page not in known:
                        problems.append(f"{where}:{number}: no page docs/{page}.md")
                        continue
                    for cited in re.findall(_NUMBER, match.group("sections") or ""):
                        if cited not in known[page]:
                            problems.append(f"{where}:{number}: docs/{page}.md has no section {cited}")
                for match in BARE.finditer(line):
                    problems.append(f"{where}:{number}: {match.group(0)} cited without docs/")
    return problems


def link_problems(docs: Path) -> list[str]:
    """Links between the pages (``page.md#anchor`` or ``#anchor``) whose page or heading does not exist."""
    pages = {p.name: anchors(p) for p in docs.glob("*.md")}
    problems = []
    for name in sorted(pages):
        for match in LINK.finditer((docs / name).read_text(encoding="utf-8")):
            target = match.group("page") or name
            if target not in pages:
                problems.append(f"docs/{name}: link to missing page {target}")
            elif match.group("anchor") and match.group("anchor") not in pages[target]:
                problems.append(f"docs/{name}: link to missing heading {target}#{match.group('anchor')}")
    return problems


def test_every_citation_names_an_existing_section():
    assert citation_problems(ROOT) == []


def test_links_between_the_pages_land_on_headings():
    assert link_problems(ROOT / "docs") == []


def test_the_pages_number_their_sections():
    for page in ("algorithms", "privacy", "architecture"):
        assert {"1", "2"} <= sections(ROOT / "docs" / f"{page}.md"), page


# Planted citations, written in pieces so that this file itself cites nothing.
PAGE = "docs/" + "algorithms" + ".md"


@pytest.mark.parametrize("text, problem", [
    (f"see {PAGE} §99", "has no section 99"),
    (f"see {PAGE} §3.9", "has no section 3.9"),
    (f"see {PAGE} §3.1, §3.9", "has no section 3.9"),
    (f"see {PAGE} §1.1–1.9", "has no section 1.9"),
    (f"see {PAGE} §4 and §42", "has no section 42"),
    ("see docs/" + "nowhere.md §1", "no page docs" + "/nowhere.md"),
    ("see " + "algorithms" + ".md §9", "cited without docs/"),
    ("see " + "privacy-engineering" + ".md §1.3", "cited without docs/"),
])
def test_a_planted_bad_citation_is_found(tmp_path, text, problem):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / Path(PAGE).name).write_text("# A\n\n## 1. One\n\n### 1.1 Sub\n\n## 3. Three\n\n"
                                                     "### 3.1 Sub\n\n## 4. Four\n", encoding="utf-8")
    (tmp_path / "dphist").mkdir()
    good = tmp_path / "dphist" / "good.py"
    good.write_text(f'"""{PAGE} §1.1, §3.1 and §4; {PAGE} §1"""\n', encoding="utf-8")
    assert citation_problems(tmp_path, ("dphist",)) == []
    (tmp_path / "dphist" / "bad.py").write_text(f"# {text}\n", encoding="utf-8")
    found = citation_problems(tmp_path, ("dphist",))
    assert len(found) == 1 and problem in found[0] and found[0].startswith("dphist/bad.py:1:"), found


def test_a_planted_bad_link_is_found(tmp_path):
    (tmp_path / "a.md").write_text("## 1. The start\n\n[ok](b.md#2-the-end) [bad](b.md#3-gone) [gone](c.md)\n",
                                   encoding="utf-8")
    (tmp_path / "b.md").write_text("## 2. The end\n\n[self](#2-the-end)\n", encoding="utf-8")
    page = "docs" + "/a.md"  # in pieces, so that this file cites no page
    assert link_problems(tmp_path) == [f"{page}: link to missing heading b.md#3-gone",
                                       f"{page}: link to missing page c.md"]
