"""Running the ``console`` blocks of the documentation pages as tests (tests/docs/test_commands.py).

What a page may hold, and what each part means to the runner:

* A fenced block whose info string is ``console`` is a session.  A line starting with ``$ `` is a command; a
  command line ending with `` \\`` goes on to the next line (bash joins them).  The lines after a command, up to
  the next ``$ `` line or the end of the block, are its expected output: what a user sees in a terminal, stdout
  and stderr merged.
* The expected output is matched line by line, exactly once trailing spaces are stripped, except that ``...``
  within a line matches any text (as doctest's ELLIPSIS), and a line that is only ``...`` matches any number of
  lines, none included.  Blank lines at the end of the output are ignored on both sides.
* Exit codes: a command is expected to exit 0.  One expected to fail ends its expected output with a line
  ``[exit N]``; that line is not output, it states the code.  A command whose code differs fails the page,
  whether it printed what was expected or not.
* ``<!-- norun: REASON -->`` on the line right before a fence skips that block (a reason is required: the page
  should say it to the reader too).  ``<!-- file: NAME -->`` right before a fence writes the block's text to
  NAME in the page's working folder, so that a schema or job spec shown on the page is the one its commands use.
* Any other block (yaml, text, cron, ...) is prose to the runner.

Commands run with bash, one process per command, in one working folder per page: files carry over from block to
block, shell variables and ``cd`` do not.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`\s]*)[^`]*$")
NORUN = re.compile(r"^\s*<!--\s*norun:\s*(?P<reason>\S.*?)\s*-->\s*$")
NORUN_BARE = re.compile(r"^\s*<!--\s*norun\b")
FILE = re.compile(r"^\s*<!--\s*file:\s*(?P<name>[\w./-]+)\s*-->\s*$")
EXIT = re.compile(r"^\[exit (?P<code>\d+)\]$")
PROMPT = "$ "
ELLIPSIS = "..."


class PageError(ValueError):
    """A page the runner cannot read: an unclosed fence, a norun without its reason, output before a command."""


@dataclass
class Command:
    """One ``$`` command of a block, what it should print and the code it should exit with."""

    text: str
    line: int  # 1-based line of the page where the command starts
    expected: list[str] = field(default_factory=list)
    exit_code: int = 0


@dataclass
class Block:
    """A fenced block of a page: its info string, its lines, where it starts, and the comment right before it."""

    info: str
    lines: list[str]
    line: int  # 1-based line of the opening fence
    norun: str | None = None  # the reason, when the block is skipped
    file: str | None = None  # the name the block's text is written to

    @property
    def is_console(self) -> bool:
        return self.info == "console"

    def commands(self) -> list[Command]:
        """The block's commands, each with its expected output and exit code (a console block only)."""
        commands: list[Command] = []
        continuing = False
        for offset, raw in enumerate(self.lines, start=1):
            line = raw.rstrip()
            if continuing:
                commands[-1].text += "\n" + line
            elif line.startswith(PROMPT) or line == PROMPT.strip():
                commands.append(Command(text=line[len(PROMPT):], line=self.line + offset))
            elif commands:
                commands[-1].expected.append(line)
            elif line:
                raise PageError(f"line {self.line + offset}: output before any '$ ' command in a console block")
            continuing = bool(commands) and line.endswith(" \\") and not commands[-1].expected
        for command in commands:
            while command.expected and not command.expected[-1]:
                command.expected.pop()
            if command.expected and (match := EXIT.match(command.expected[-1])):
                command.exit_code = int(match.group("code"))
                command.expected.pop()
            if not command.text.strip():
                raise PageError(f"line {command.line}: an empty command")
        return commands


def parse_blocks(text: str) -> list[Block]:
    """Every fenced block of a Markdown page, in order, with the norun or file comment on the line before it."""
    lines = text.splitlines()
    blocks: list[Block] = []
    index = 0
    while index < len(lines):
        match = FENCE.match(lines[index])
        if not match:
            index += 1
            continue
        indent, fence = match.group("indent"), match.group("fence")
        start = index
        body: list[str] = []
        index += 1
        while index < len(lines):
            closing = lines[index].strip()
            if closing.startswith(fence[0] * len(fence)) and not closing.strip(fence[0]):
                break
            # A block inside a list item is indented like its fence; the indentation is not part of the text.
            body.append(lines[index][len(indent):] if lines[index].startswith(indent) else lines[index].lstrip())
            index += 1
        else:
            raise PageError(f"line {start + 1}: a fence that is never closed")
        before = lines[start - 1] if start else ""
        block = Block(info=match.group("info"), lines=body, line=start + 1)
        if (norun := NORUN.match(before)) is not None:
            block.norun = norun.group("reason")
        elif NORUN_BARE.match(before):
            raise PageError(f"line {start}: '<!-- norun -->' needs a reason: '<!-- norun: why -->'")
        elif (named := FILE.match(before)) is not None:
            block.file = named.group("name")
        blocks.append(block)
        index += 1
    return blocks


def _line_pattern(expected: str) -> re.Pattern[str]:
    return re.compile(".*".join(re.escape(part) for part in expected.split(ELLIPSIS)), re.DOTALL)


def output_matches(expected: list[str], actual: list[str]) -> bool:
    """Whether ``actual`` lines fit ``expected``: exact after stripping trailing spaces, ``...`` within a line
    matching any text, a line of only ``...`` matching zero or more lines; trailing blank lines do not count."""
    want = _trimmed(expected)
    got = _trimmed(actual)
    # fits[i][j]: want[i:] matches got[j:]; filled from the end, so the wildcard lines cost no backtracking.
    fits = [[False] * (len(got) + 1) for _ in range(len(want) + 1)]
    fits[len(want)][len(got)] = True
    for i in range(len(want) - 1, -1, -1):
        if want[i].strip() == ELLIPSIS:
            for j in range(len(got), -1, -1):
                fits[i][j] = fits[i + 1][j] or (j < len(got) and fits[i][j + 1])
            continue
        pattern = _line_pattern(want[i])
        for j in range(len(got) - 1, -1, -1):
            fits[i][j] = fits[i + 1][j + 1] and pattern.fullmatch(got[j]) is not None
    return fits[0][0]


def _trimmed(lines: list[str]) -> list[str]:
    stripped = [line.rstrip() for line in lines]
    while stripped and not stripped[-1]:
        stripped.pop()
    return stripped


@dataclass
class Outcome:
    """What running one command gave, and whether it is what the page says."""

    command: Command
    output: list[str]
    exit_code: int

    @property
    def ok(self) -> bool:
        return self.exit_code == self.command.exit_code and output_matches(self.command.expected, self.output)

    def describe(self, page: str) -> str:
        """The command, what the page expects, what it printed, and the first line where the two part (the
        first expected line that neither matches the output line beside it nor is a ``...`` line)."""
        expected = "\n".join(["    " + line for line in self.command.expected]) or "    (nothing)"
        got = _trimmed(self.output)
        actual = "\n".join(["    " + line for line in got]) or "    (nothing)"
        text = (f"{page}:{self.command.line}: $ {self.command.text}\n"
                f"  expected (exit {self.command.exit_code}):\n{expected}\n"
                f"  actual (exit {self.exit_code}):\n{actual}")
        want = _trimmed(self.command.expected)
        for index in range(max(len(want), len(got))):
            if index < len(want) and want[index].strip() == ELLIPSIS:
                break  # past a line wildcard the lines no longer pair up by position
            if index >= len(want) or index >= len(got) or not _line_pattern(want[index]).fullmatch(got[index]):
                shown_want = want[index] if index < len(want) else "(no more lines)"
                shown_got = got[index] if index < len(got) else "(no more lines)"
                text += f"\n  first difference, output line {index + 1}:\n    - {shown_want}\n    + {shown_got}"
                break
        return text


def run_command(command: Command, cwd: Path, env: dict[str, str], timeout: float = 300) -> Outcome:
    """Run one command with bash in ``cwd``; stdout and stderr go to one pipe, in the order they were written."""
    done = subprocess.run(["bash", "-c", command.text], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
    text = done.stdout.decode("utf-8", errors="replace")
    return Outcome(command=command, output=text.splitlines(), exit_code=done.returncode)


def run_page(text: str, cwd: Path, env: dict[str, str], page: str = "page") -> tuple[int, list[str]]:
    """Run every console block of a page in order (writing its file blocks as they come) and return how many
    commands ran and a description of each that did not do what the page says; stops at the first failure, since
    later commands build on earlier ones."""
    ran = 0
    for block in parse_blocks(text):
        if block.norun is not None:
            continue
        if block.file is not None:
            target = cwd / block.file
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text("\n".join(block.lines) + "\n", encoding="utf-8")
            continue
        if not block.is_console:
            continue
        for command in block.commands():
            outcome = run_command(command, cwd, env)
            ran += 1
            if not outcome.ok:
                return ran, [outcome.describe(page)]
    return ran, []
