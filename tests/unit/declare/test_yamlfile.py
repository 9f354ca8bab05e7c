"""The one reader of schemas and job specs (dphist/declare/yamlfile.py): text keys, each once; a document bounded before
any Python value is built (values with aliases expanded, nesting, no endless values); every failure one
UsageError naming the file and, for YAML, the line."""

from __future__ import annotations

import time

import pytest

from dphist.errors import UsageError
from dphist.declare.yamlfile import MAX_DEPTH, MAX_NODES, load_document


def _load(tmp_path, text: str, name: str = "doc.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return load_document(path, "job spec")


def _refused(tmp_path, text: str, *words: str, name: str = "doc.yaml") -> str:
    with pytest.raises(UsageError) as caught:
        _load(tmp_path, text, name)
    message = str(caught.value)
    assert message.startswith(str(tmp_path / name)) and "\n" not in message, message
    for word in words:
        assert word in message, message
    return message


def _bomb(levels: int = 9, width: int = 9, indent: str = "  ") -> str:
    """A YAML list whose item k is `width` aliases of item k-1: width**levels leaves once expanded."""
    items = [f"{indent}- &a0 [{', '.join(['x'] * width)}]"]
    items += [f"{indent}- &a{k} [{', '.join([f'*a{k - 1}'] * width)}]" for k in range(1, levels)]
    return "\n".join(items) + "\n"


def test_plain_keys_are_read_as_their_text(tmp_path):
    """A plain key is its text: '2020' not 2020, 'no' not False (quoted and plain keys are one key: below)."""
    assert _load(tmp_path, "2020: a\nno: b\n1.5: c\n~: d\n'x': 1\n2020-01-01: e\n") == {
        "2020": "a", "no": "b", "1.5": "c", "~": "d", "x": 1, "2020-01-01": "e"}
    # The values keep YAML's types.
    assert _load(tmp_path, "a: 2020\nb: no\n") == {"a": 2020, "b": False}


@pytest.mark.parametrize("text, line, kind", [
    ("tables:\n  - {columns: [age], ? [a, b]: 1}\n", 2, "a list used as a key"),
    ("columns:\n  age: {type: numeric, ? [x]: 1}\n", 2, "a list used as a key"),
    ("hierarchy: {? [W]: [F, M]}\n", 1, "a list used as a key"),
    ("? {a: 1}\n: 2\n", 1, "a mapping used as a key"),
    ("base: &b {x: 1}\nother:\n  <<: *b\n", 3, "merge key"),
])
def test_keys_that_are_not_text_are_refused_with_their_line(tmp_path, text, line, kind):
    _refused(tmp_path, text, f"at line {line}", kind)


@pytest.mark.parametrize("text, key", [("a: 1\na: 2\n", "'a'"), ("1: x\n'1': y\n", "'1'"),
                                       ("m: {k: 1, k: 2}\n", "'k'")])
def test_a_key_written_twice_is_refused(tmp_path, text, key):
    _refused(tmp_path, text, "appears twice", key)


@pytest.mark.parametrize("where", ["rho", "workload", "noise", "share", "marginals", "values"])
def test_an_alias_bomb_anywhere_is_refused_in_milliseconds(tmp_path, where):
    """9 levels of 9 (387 million leaves expanded) in each place a spec or schema could hold it: refused while
    counting, before one list is built."""
    text = f"epsilon: '1'\n{where}:\n" + _bomb()
    started = time.perf_counter()
    _refused(tmp_path, text, "aliases are expanded", f"{MAX_NODES:,}")
    assert time.perf_counter() - started < 0.5


def test_aliases_within_the_bound_still_work(tmp_path):
    """Sharing a value by an alias is fine (each use counted); so is a document just under the bound."""
    assert _load(tmp_path, "a: &o {cap: 5}\nb: *o\nc: [*o, *o]\n") == {
        "a": {"cap": 5}, "b": {"cap": 5}, "c": [{"cap": 5}, {"cap": 5}]}
    # 8 levels of 4: 4**8 = 65,536 leaves expanded.
    document = _load(tmp_path, "v:\n" + _bomb(levels=8, width=4))
    assert len(document["v"]) == 8 and len(document["v"][7]) == 4


def test_an_endless_value_is_refused(tmp_path):
    _refused(tmp_path, "a: &a [1, *a]\n", "contains it")
    _refused(tmp_path, "a: &a {b: [*a]}\n", "contains it")


def test_nesting_is_bounded(tmp_path):
    assert _load(tmp_path, "a: " + "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1) + "\n")["a"] is not None
    _refused(tmp_path, "a: " + "[" * MAX_DEPTH + "]" * MAX_DEPTH + "\n", f"more than {MAX_DEPTH} deep")
    # Depth reached through aliases counts too.
    _refused(tmp_path, "x: &x " + "[" * 60 + "]" * 60 + "\ny: " + "[" * 50 + "*x" + "]" * 50 + "\n", "deep")


@pytest.mark.parametrize("text, words", [
    ("when: 2020-13-01\n", ("line 1", "date '2020-13-01'")),
    ("n: " + "7" * 5000 + "\n", ("line 1", "number")),
])
def test_values_python_cannot_build_are_refused_with_their_line(tmp_path, text, words):
    message = _refused(tmp_path, text, *words)
    assert len(message) < 300


@pytest.mark.parametrize("text, words", [
    ('{"a": 1, "a": 2}', ("appears twice",)),
    ('{"a": ' + "[" * 5000 + "]" * 5000 + "}", ("deep",)),
    ('{"a": ' + "[" * MAX_DEPTH + "]" * MAX_DEPTH + "}", ("deep",)),
    ('{"n": ' + "7" * 5000 + "}", ("number",)),
    ('{"a": 1,}', ("not valid JSON at line 1",)),
])
def test_json_documents_follow_the_same_rules(tmp_path, text, words):
    _refused(tmp_path, text, *words, name="doc.json")


def test_a_json_document_within_the_rules(tmp_path):
    assert _load(tmp_path, '{"a": [[1]], "2020": {"b": null}}', "doc.json") == {"a": [[1]], "2020": {"b": None}}
