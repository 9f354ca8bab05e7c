"""Reading the YAML (or JSON) files a steward writes: schemas and job specs.  Every such file is read here,
by :func:`load_document`, and nowhere else.

Stricter than ``yaml.safe_load`` in the ways that matter for files that decide what gets published, and for
files read unattended:

* every mapping key is text: a plain scalar key is taken as written (``2020:`` is the key "2020", ``no:`` the
  key "no"), and a list or mapping as a key (``? [a, b]``) or a merge key (``<<``) is refused;
* a key written twice is an error (YAML and JSON would silently keep the last one);
* the document is bounded before any Python value is built: at most :data:`MAX_NODES` values once aliases are
  expanded (a "billion laughs" of nested aliases is refused in milliseconds instead of growing to gigabytes),
  nested at most :data:`MAX_DEPTH` deep, and no alias inside its own anchor (an endless value);
* every failure, including an impossible unquoted date such as 2020-13-01 or a whole number of thousands of
  digits, becomes one UsageError naming the file (and the line, where the parser knows it).
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import yaml

from ..errors import UsageError
from ..text import quoted

__all__ = ["load_document", "MAX_NODES", "MAX_DEPTH"]


# libyaml's parser (C) where PyYAML was built with it: about 10x faster than the pure-Python one on big schemas
# (a 50 MB category list).  Values are still built by PyYAML's safe constructor, the same either way.
_BASE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

#: The largest document read, by its size on disk (checked from a stat, before reading).  YAML is parsed at
#: about 2 MB a second (a 100,000-label category list is 2-3 MB: about a second), so a bigger YAML file would
#: take minutes; JSON is parsed about 20 times faster, so a very long category list can be given as JSON.
MAX_YAML_BYTES = 8 << 20
MAX_JSON_BYTES = 64 << 20
#: The most values (scalars, lists and mappings) a YAML document may hold with its aliases expanded: what a
#: file of MAX_YAML_BYTES could spell out without aliases (a value takes at least two bytes, as in "1,").
#: Aliases may shorten a file; they never make its document bigger than a file could be.
MAX_NODES = MAX_YAML_BYTES // 2
#: The deepest nesting of lists and mappings (a schema's category hierarchy is the deepest use: a few levels).
#: Code that walks a document recursively can rely on it.
MAX_DEPTH = 100

_MERGE_TAG = "tag:yaml.org,2002:merge"


class _Refused(yaml.MarkedYAMLError):
    """A document the rules above refuse, with the mark of the node at fault."""

    def __init__(self, problem: str, mark: Any):
        super().__init__(problem=problem, problem_mark=mark)


def _check_graph(root: yaml.Node) -> None:
    """Raise _Refused unless the composed document, aliases expanded, has at most MAX_NODES values nested at
    most MAX_DEPTH deep, every mapping key is a scalar other than a merge key, and no node contains itself.

    Aliases are shared nodes of the composed graph, so each distinct list or mapping is visited once: its
    expanded size and height are summed from its children's (memoised by identity), in time linear in the file
    and before any of it is expanded."""
    size: dict[int, int] = {}
    height: dict[int, int] = {}
    started: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if isinstance(node, yaml.ScalarNode):
            continue
        key = id(node)
        if children_done:
            total, deepest = 1, 0
            for child in _children(node):
                if isinstance(child, yaml.ScalarNode):
                    total += 1
                else:
                    total += size[id(child)]
                    deepest = max(deepest, height[id(child)])
            if total > MAX_NODES:
                raise _Refused(f"the value here has more than {MAX_NODES:,} parts once its aliases are expanded",
                               node.start_mark)
            if deepest + 1 > MAX_DEPTH:
                raise _Refused(f"lists and mappings nest more than {MAX_DEPTH} deep here", node.start_mark)
            size[key], height[key] = total, deepest + 1
            continue
        if key in size:
            continue  # an alias of a list or mapping already counted
        if key in started:  # started, not finished: this node is inside itself
            raise _Refused("an alias refers to a value that contains it (an endless value)", node.start_mark)
        started.add(key)
        if isinstance(node, yaml.MappingNode):
            for key_node, _ in node.value:
                _check_key(key_node)
        stack.append((node, True))
        stack.extend((c, False) for c in _children(node) if not isinstance(c, yaml.ScalarNode) and id(c) not in size)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return node.value
    return [n for pair in node.value for n in pair]


def _check_key(key_node: yaml.Node) -> None:
    if isinstance(key_node, yaml.ScalarNode) and key_node.tag != _MERGE_TAG:
        return
    what = ("a merge key ('<<'), which is not supported" if isinstance(key_node, yaml.ScalarNode) else
            f"a {'list' if isinstance(key_node, yaml.SequenceNode) else 'mapping'} used as a key; keys must be "
            "text")
    raise _Refused(what, key_node.start_mark)


class _StrictLoader(_BASE_LOADER):
    def construct_document(self, node: yaml.Node) -> Any:
        _check_graph(node)  # before any Python value is built
        return super().construct_document(node)


def _mapping_of_text_keys(loader: _StrictLoader, node: yaml.MappingNode) -> dict:
    """A mapping whose keys are the key scalars as written (checked to be scalars by _check_graph)."""
    mapping: dict[str, Any] = {}
    for key_node, value_node in node.value:
        key = key_node.value
        if key in mapping:
            raise _Refused(f"the key '{key[:40]}' appears twice", key_node.start_mark)
        mapping[key] = loader.construct_object(value_node)
    return mapping


def _marked(construct):
    """A scalar constructor whose ValueError (an impossible date, a number of more digits than Python converts)
    becomes a refusal marked with the scalar's line."""
    def build(loader: _StrictLoader, node: yaml.ScalarNode) -> Any:
        try:
            return construct(loader, node)
        except ValueError:
            kind = "date" if node.tag.endswith(":timestamp") else "number"
            raise _Refused(f"the {kind} '{str(node.value)[:40]}' cannot be read", node.start_mark) from None
    return build


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping_of_text_keys)
for _tag, _construct in (("int", yaml.constructor.SafeConstructor.construct_yaml_int),
                         ("timestamp", yaml.constructor.SafeConstructor.construct_yaml_timestamp)):
    _StrictLoader.add_constructor(f"tag:yaml.org,2002:{_tag}", _marked(_construct))


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
    """Parse ``path`` as JSON (``.json``) or YAML under the rules of the module docstring: a document of text
    keys, each written once, nested at most MAX_DEPTH deep (and, for YAML, at most MAX_NODES values with aliases
    expanded).  ``what`` names the file's role in messages ("schema file").  Any failure is one UsageError
    naming the file."""
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
        return _load_json(text, path)
    try:
        return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = exc.problem if isinstance(exc, (_Refused, yaml.constructor.ConstructorError)) else None
        raise UsageError(f"{quoted(path, '')}: not valid YAML{where}" + (f": {quoted(problem, '')}" if problem else "")) from None
    except yaml.YAMLError:
        raise UsageError(f"{quoted(path, '')}: not valid YAML") from None
    except ValueError:  # a scalar constructor not wrapped by _marked
        raise UsageError(f"{quoted(path, '')}: not valid YAML: a value cannot be read") from None


def _load_json(text: str, path: Path) -> Any:
    """A JSON document: duplicate keys refused, at most MAX_DEPTH deep (JSON has no aliases: its size on disk
    bounds it)."""
    def pairs(items: list[tuple[str, Any]]) -> dict:
        mapping = {}
        for key, value in items:
            if key in mapping:
                raise UsageError(f"{quoted(path, '')}: not valid JSON: the key {quoted(key)} appears twice")
            mapping[key] = value
        return mapping

    try:
        document = json.loads(text, object_pairs_hook=pairs)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{quoted(path, '')}: not valid JSON at line {exc.lineno}") from None
    except RecursionError:  # the parser nests by recursion: far deeper than MAX_DEPTH
        raise UsageError(f"{quoted(path, '')}: not valid JSON: lists and mappings nested more than {MAX_DEPTH} deep") from None
    except ValueError:  # int() of a number of thousands of digits
        raise UsageError(f"{quoted(path, '')}: not valid JSON: a number has more digits than can be read") from None
    if _depth(document) > MAX_DEPTH:
        raise UsageError(f"{quoted(path, '')}: not valid JSON: lists and mappings nested more than {MAX_DEPTH} deep")
    return document


def _depth(document: Any) -> int:
    """How deep lists and mappings nest in a parsed JSON document (a scalar: 0), without recursion."""
    deepest, stack = 0, [(document, 1)]
    while stack:
        value, depth = stack.pop()
        children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else None
        if children is None:
            continue
        deepest = max(deepest, depth)
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
    return deepest
