"""The names the budget ledger keys its accounts by: data set ids and run keys, checked and normalised once.

A data set id names an account: every release charged under it adds up against its cap.  A name that a cron line
built from an unset variable (``--dataset-id "$DATASET"`` gives ``""``), that holds a line break, or that differs
only by invisible characters or Unicode composition would open a second, uncapped account for the same people.
So every id and run key, from the command line, a job spec, the Python API or the ``budget`` commands, passes
through :func:`dataset_id` / :func:`run_key` (and the ledger checks again with :func:`account`, so no caller can
skip them), and is

    normalised   to Unicode NFC (an "é" typed as one code point or as "e" and an accent is one name)
    refused      (UsageError, exit 2, before anything is read or charged) when it is empty, only whitespace, has
                 whitespace at either end, holds a control, format, separator, surrogate, private-use or
                 unassigned character, or is longer than MAX_LENGTH characters.

A data set given no id is named by what it is read from (:func:`default_dataset_id`): the same files get the same
id however the input names them.  Such an id is a real path, which may be as long as the system allows a path to
be (PATH_LENGTH); the ``budget`` commands accept that length too, so every account can be named.
"""

from __future__ import annotations

import os
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from ..errors import UsageError

__all__ = ["MAX_LENGTH", "PATH_LENGTH", "dataset_id", "run_key", "account", "default_dataset_id", "shown"]

#: The longest data set id or run key a person or a spec may give.
MAX_LENGTH = 200
#: The longest account name: a default id is a real path, and Linux allows paths of 4096 bytes.
PATH_LENGTH = 4096
# Unicode categories that are never part of a name: control (Cc), format (Cf: zero-width and direction marks),
# surrogates (Cs: undecodable bytes of a file name), private use (Co), unassigned (Cn), line and paragraph
# separators (Zl, Zp).
_UNPRINTABLE = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}
_GLOB = frozenset("*?[")
_CATEGORY_NAMES = {"Cc": "a control character", "Cf": "a format character", "Cs": "an undecodable byte",
                   "Co": "a private-use character", "Cn": "an unassigned code point", "Zl": "a line separator",
                   "Zp": "a paragraph separator"}


@dataclass(frozen=True)
class _Kind:
    """What a name is for: its noun, its longest length, what to do instead of an empty one, and what to do
    about any other refusal (nothing but change it, unless it was not given by a person)."""

    noun: str
    limit: int
    if_empty: str
    fix: str = ""


_DATASET = _Kind("data set id", MAX_LENGTH, "name the data set, or leave the option out to name it by the input's "
                                            "path")
_ACCOUNT = _Kind("data set id", PATH_LENGTH, "name the data set as 'dphist budget show' lists it")
_RUN_KEY = _Kind("run key", MAX_LENGTH, "give a key, or leave the option out to release without one")
_NAME_IT = "name the data set with --dataset-id (dataset_id in a job spec or the Python API)"
_PATH = _Kind("data set id", PATH_LENGTH, _NAME_IT, f"; {_NAME_IT}")


def dataset_id(value: object, what: str = "--dataset-id") -> str:
    """``value`` as a data set id (NFC), or UsageError naming ``what`` (the option or field it came from)."""
    return _checked(value, what, _DATASET)


def run_key(value: object, what: str = "--run-key") -> str:
    """``value`` as a run key (NFC), or UsageError naming ``what``."""
    return _checked(value, what, _RUN_KEY)


def account(value: object, what: str = "data set id") -> str:
    """``value`` as the name of any ledger account (NFC): a data set id, or a default id as long as a path."""
    return _checked(value, what, _ACCOUNT)


def default_dataset_id(named: str) -> str:
    """The id of a data set read from the path or glob ``named`` (as given to ``open_source``), so that the same
    files get the same id however they are named:

        a file          its real path (absolute, every symbolic link resolved)
        a directory     its real path
        a glob          the real path of its leading directory (the part before the first ``*``, ``?`` or ``[``)

    A directory or a glob names a set of files that may grow: its id is the deepest directory that holds every
    file it can name, not only today's files, so the account stays the same when files are added.  A URL (an
    input another engine reads) is its own id.  UsageError if the real path cannot be a name (a control
    character, or an undecodable byte in it): the data set must then be named with --dataset-id."""
    if "://" in named:
        return _checked(named, "the input's URL", _PATH)
    path = Path(named)
    if not path.exists() and _GLOB & set(named):
        parts = path.parts
        fixed = next((i for i, part in enumerate(parts) if _GLOB & set(part)), len(parts))
        path = Path(*parts[:fixed]) if fixed else Path(".")
    return _checked(os.path.realpath(path), "the input's real path", _PATH)


def shown(name: str) -> str:
    """``name`` for a line of text: unprintable characters as ``\\uXXXX`` escapes (ids written before they were
    checked may hold them)."""
    return "".join(f"\\u{ord(c):04x}" if _unprintable(c) else c for c in name)


def _checked(value: object, what: str, kind: _Kind) -> str:
    if not isinstance(value, str):
        raise UsageError(f"{what}: a {kind.noun} must be text, not {type(value).__name__}")
    if value == "":
        raise UsageError(f"{what} is empty (an unset variable?); {kind.if_empty}")
    name = unicodedata.normalize("NFC", value)
    if len(name) > kind.limit:
        raise UsageError(f"{what} is {len(name):,} characters long; a {kind.noun} has at most {kind.limit}"
                         f"{kind.fix}")
    bad = next((i for i, c in enumerate(name) if _unprintable(c)), None)
    if bad is not None:
        raise UsageError(f"{what} holds an unprintable character ({_described(name[bad])}) at position {bad + 1}; "
                         f"a {kind.noun} is one line of visible text{kind.fix}")
    if not name.strip():
        raise UsageError(f"{what} is only whitespace (an unset variable?); {kind.if_empty}")
    if name != name.strip():
        raise UsageError(f"{what} {name[:MAX_LENGTH]!r} begins or ends with whitespace; a {kind.noun} must not "
                         f"(two names that differ only there would be two accounts){kind.fix}")
    return name


def _described(c: str) -> str:
    """"U+000A, a line break": the code point, and what it is where that has a name."""
    what = {"\n": "a line break", "\r": "a carriage return", "\t": "a tab"}.get(c) or \
        unicodedata.name(c, "").lower() or _CATEGORY_NAMES[unicodedata.category(c)]
    return f"U+{ord(c):04X}, {what}"


def _unprintable(c: str) -> bool:
    return unicodedata.category(c) in _UNPRINTABLE
