"""Reading the YAML (or JSON) files a steward writes: schemas and job specs.

Stricter than ``yaml.safe_load`` in the ways that matter for files that decide what gets published: a key
written twice is an error (YAML would silently keep the last one), and every failure, including an impossible
unquoted date such as 2020-13-01, becomes one UsageError naming the file and line.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import yaml

from .errors import UsageError
from .text import quoted

__all__ = ["load_document"]


# libyaml's parser (C) where PyYAML was built with it: about 10x faster than the pure-Python one on big schemas
# (a 50 MB category list).  Values are still built by PyYAML's safe constructor, the same either way.
_BASE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _StrictLoader(_BASE_LOADER):
    pass


def _mapping_without_duplicates(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(None, None, f"the key {quoted(key)} appears twice",
                                                    key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping_without_duplicates)


#: The largest document read, by its size on disk (checked from a stat, before reading).  YAML is parsed at
#: about 2 MB a second (a 100,000-label category list is 2-3 MB: about a second), so a bigger YAML file would
#: take minutes; JSON is parsed about 20 times faster, so a very long category list can be given as JSON.
MAX_YAML_BYTES = 8 << 20
MAX_JSON_BYTES = 64 << 20


def _check_regular(path: Path, what: str) -> None:
    """Refuse (UsageError) a path that exists but is no regular file, from a stat alone, before opening it:
    reading a named pipe would block until a writer came; a device could be endless."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return  # missing or unreadable: reading it says which, below
    if stat.S_ISDIR(mode):
        raise UsageError(f"{what} {quoted(path, '')} is a directory, not a file")
    if not stat.S_ISREG(mode):
        kind = "a named pipe (FIFO)" if stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode) or \
            stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode) else "not a regular file"
        raise UsageError(f"{what} {quoted(path, '')} is {kind}, not a regular file")
    json_file = path.suffix.lower() == ".json"
    limit = MAX_JSON_BYTES if json_file else MAX_YAML_BYTES
    size = os.stat(path).st_size
    if size > limit:
        hint = "" if json_file else f"; write a longer category list as JSON (.json, up to {MAX_JSON_BYTES >> 20} MB)"
        raise UsageError(f"{what} {quoted(path, '')} is {size / (1 << 20):.0f} MB, more than the {limit >> 20} MB a "
                         f"{'JSON' if json_file else 'YAML'} {what} may have{hint}")


def load_document(path: str | Path, what: str) -> Any:
    """Parse ``path`` as JSON (``.json``) or YAML.  ``what`` names the file's role in messages ("schema file")."""
    path = Path(path)
    _check_regular(path, what)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise UsageError(f"{what} not found: {quoted(path, '')}") from None
    except IsADirectoryError:
        raise UsageError(f"{what} {quoted(path, '')} is a directory, not a file") from None
    except UnicodeDecodeError:
        raise UsageError(f"{what} {quoted(path, '')} is not UTF-8 text") from None
    except OSError as exc:
        raise UsageError(f"cannot read {what} {quoted(path, '')}: {exc.strerror}") from None
    if path.suffix.lower() == ".json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise UsageError(f"{quoted(path, '')}: not valid JSON at line {exc.lineno}") from None
    try:
        return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = exc.problem if isinstance(exc, yaml.constructor.ConstructorError) else None
        raise UsageError(f"{quoted(path, '')}: not valid YAML{where}"
                         + (f": {quoted(problem, '')}" if problem else "")) from None
    except yaml.YAMLError:
        raise UsageError(f"{quoted(path, '')}: not valid YAML") from None
    except ValueError:
        # PyYAML builds dates itself; an impossible one (2020-13-01) surfaces as a bare ValueError.
        raise UsageError(f"{quoted(path, '')}: not valid YAML: a value looks like a date but is not a real "
                         "date") from None
