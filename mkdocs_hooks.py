"""MkDocs hooks of the documentation site (mkdocs.yml, ``hooks:``).

The pages are also read on GitHub, whose tables need a pipe inside a code span escaped (`` `a\\|b` ``), while
Python-Markdown's tables already keep code spans whole and would print the backslash.  So in table rows the
escape is dropped inside code spans before the page is rendered."""

from __future__ import annotations

import re

_CODE = re.compile(r"`[^`\n]*`")


def on_page_markdown(markdown: str, **_) -> str:
    """``markdown`` with ``\\|`` turned into ``|`` inside the code spans of table rows (lines starting with ``|``)."""
    lines = []
    for line in markdown.split("\n"):
        if line.lstrip().startswith("|") and "\\|" in line:
            line = _CODE.sub(lambda m: m.group(0).replace("\\|", "|"), line)
        lines.append(line)
    return "\n".join(lines)
