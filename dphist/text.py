"""Column values as the text labels that categories and privacy units are matched on."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["as_text"]


def as_text(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Values as the text labels categories are matched on: text as it is (a dictionary of text stays
    dictionary-encoded), integral floats written as integers (3.0 -> "3"), anything else cast to text."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if pa.types.is_dictionary(values.type):
        if pa.types.is_string(values.type.value_type) or pa.types.is_large_string(values.type.value_type):
            return values
        values = values.dictionary_decode()
    if not (pa.types.is_string(values.type) or pa.types.is_large_string(values.type)):
        if pa.types.is_floating(values.type):
            values = pc.if_else(pc.equal(values, pc.floor(values)), pc.cast(values, pa.int64(), safe=False), values)
        values = pc.cast(values, pa.string())
    return values
