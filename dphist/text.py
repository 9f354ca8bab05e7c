"""Text for people and for matching: user input quoted for a message (:func:`quoted`), and column values as the
text labels that categories and privacy units are matched on (:func:`as_text`).

Importing this module is cheap (pyarrow is loaded by :func:`as_text` on first use), so the command line's error
paths can quote input without loading the data machinery.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["as_text", "quoted", "quoted_list", "first_of", "QUOTE_LIMIT"]

#: The most characters of any one piece of user input (a file, column or table name, an option's value, a key)
#: that a message quotes: enough to recognise it, and a 7 MB name cannot become a 7 MB log line.
QUOTE_LIMIT = 200

# Escapes that read better than their code point.
_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def quoted(value: object, quote: str = "'", limit: int = QUOTE_LIMIT) -> str:
    """``str(value)`` for a one-line message, between ``quote`` marks (``quote=""`` for a path at the head of a
    message): every character that is not printable (control characters, line and paragraph separators,
    format characters such as bidirectional overrides, lone surrogates) escaped as ``\\n``, ``\\t``, ``\\x1b``,
    ``\\u202e``, ``\\udcff``, so the result is one line in any terminal and encodes in any codec with
    backslashreplace; at most ``limit`` characters of the escaped text, and a longer one cut with ``...`` and
    its length noted: ``'nnn...' (7,000,000 characters)``.  Time and memory are O(limit) whatever the length."""
    text = str(value)
    pieces, used = [], 0
    for ch in text[: limit + 1]:
        piece = _ESCAPES.get(ch) or (ch if ch.isprintable() else _escaped(ch))
        if used + len(piece) > limit:
            return f"{quote}{''.join(pieces)}...{quote} ({len(text):,} characters)"
        pieces.append(piece)
        used += len(piece)
    return f"{quote}{''.join(pieces)}{quote}"


def quoted_list(values, limit: int = QUOTE_LIMIT) -> str:
    """Names for a message (the columns a file has): each as :func:`quoted` writes it without quote marks,
    comma-separated, as many as fit in about ``limit`` characters (at least one), then how many more there are:
    ``age, sex, ... (4,998 more)``."""
    values = list(values)
    shown, used = [], 0
    for value in values:
        text = quoted(value, "", limit)
        if shown and used + len(text) > limit:
            break
        shown.append(text)
        used += len(text) + 2
    rest = len(values) - len(shown)
    return ", ".join(shown) + (f", ... ({rest:,} more)" if rest else "")


def first_of(parts, most: int = 3, sep: str = "; ") -> str:
    """The first ``most`` of ``parts`` (texts already fit for a message) joined by ``sep``, then how many more
    there are: one reason per column of a 10,000-column file would make a line of a megabyte."""
    parts = list(parts)
    rest = len(parts) - most
    return sep.join(parts[:most]) + (f"{sep}and {rest:,} more" if rest > 0 else "")


def _escaped(ch: str) -> str:
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def as_text(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Values as the text labels categories are matched on: text as it is (a dictionary of text stays
    dictionary-encoded), whole floats in int64's range written as integers (3.0 -> "3"; 1e300, inf and nan as
    Arrow writes floats), anything else cast to text."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if pa.types.is_dictionary(values.type):
        if pa.types.is_string(values.type.value_type) or pa.types.is_large_string(values.type.value_type):
            return values
        values = values.dictionary_decode()
    if not (pa.types.is_string(values.type) or pa.types.is_large_string(values.type)):
        if pa.types.is_floating(values.type):
            values = pc.cast(values, pa.float64())  # half floats have no floor or text cast of their own
            # Both branches of if_else are computed for every value: only whole values below 2**63 reach the
            # integer cast (the others, infinities and nan among them, would make it fail).
            whole = pc.and_(pc.equal(values, pc.floor(values)), pc.less(pc.abs(values), 2.0 ** 63))
            integers = pc.cast(pc.if_else(whole, values, 0.0), pa.int64())
            values = pc.if_else(whole, pc.cast(integers, pa.string()), pc.cast(values, pa.string()))
        values = pc.cast(values, pa.string())
    return values
