"""JSON values to an Arrow string column of JSON texts, without a call per value.

``orjson`` serialises the whole list at once (compact output, no whitespace); the array
text is then cut into its elements with numpy, looking only at the few characters that
matter (quotes, backslashes, brackets, braces, commas): a quote delimits a string unless
an odd run of backslashes precedes it, brackets and braces outside strings give the
nesting depth, and the commas outside strings at depth zero separate the elements.
Removing those commas leaves the elements back to back: exactly the data buffer of an
Arrow string array, whose offsets are the cumulative element lengths. ``null`` elements
(JSON null or None) become SQL NULL.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import orjson
import pyarrow as pa
import pyarrow.compute as pc

_QUOTE, _BACKSLASH, _COMMA = ord('"'), ord("\\"), ord(",")
_SPECIAL = np.zeros(256, np.bool_)
_SPECIAL[[ord(c) for c in '"\\,[]{}']] = True
_DEPTH = np.zeros(256, np.int64)
_DEPTH[[ord("["), ord("{")]] = 1
_DEPTH[[ord("]"), ord("}")]] = -1
_INT32_MAX = 2**31 - 1


def _real_quotes(
    positions: npt.NDArray[np.intp], chars: npt.NDArray[np.uint8]
) -> npt.NDArray[np.bool_]:
    """Which of the special characters are unescaped quotes."""
    quote: npt.NDArray[np.bool_] = chars == _QUOTE
    backslash: npt.NDArray[np.bool_] = chars == _BACKSLASH
    if not backslash.any():
        return quote
    index = np.arange(len(chars))
    follows = np.concatenate(([False], (positions[1:] == positions[:-1] + 1) & backslash[:-1]))
    run_start = np.maximum.accumulate(np.where(backslash & ~follows, index, 0))
    escaper = backslash & ((index - run_start) % 2 == 0)
    escaped = np.concatenate(([False], escaper[:-1] & (positions[1:] == positions[:-1] + 1)))
    real: npt.NDArray[np.bool_] = quote & ~escaped
    return real


def json_texts(values: Sequence[Any], mask: npt.NDArray[np.bool_] | None = None) -> pa.Array:
    """One JSON text per value (``orjson`` form) as a string array; ``mask`` marks nulls
    (True = null), as do None values."""
    count = len(values)
    if count == 0:
        return pa.array([], pa.string())
    whole = orjson.dumps(values, option=orjson.OPT_SERIALIZE_NUMPY)
    text = np.frombuffer(whole, np.uint8)[1:-1]  # inside the outer [ ]
    if len(text) > _INT32_MAX:  # beyond 32-bit offsets: one text at a time
        return pa.array(list(map(orjson.dumps, values)), pa.binary()).cast(pa.string())
    positions = np.flatnonzero(_SPECIAL[text])
    chars = text[positions]
    quote = _real_quotes(positions, chars)
    in_string = (np.cumsum(quote) % 2).astype(np.bool_) | quote
    depth = np.cumsum(np.where(in_string, 0, _DEPTH[chars]))
    cuts = positions[(chars == _COMMA) & ~in_string & (depth == 0)]
    if len(cuts) != count - 1:
        raise ValueError(f"split {count} JSON values into {len(cuts) + 1} texts")
    keep = np.ones(len(text), np.bool_)
    keep[cuts] = False
    lengths = np.diff(np.concatenate(([-1], cuts, [len(text)]))) - 1
    offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int32)
    array = pa.Array.from_buffers(
        pa.string(), count, [None, pa.py_buffer(offsets), pa.py_buffer(text[keep])]
    )
    null = pc.equal(array, "null")
    if mask is not None:
        null = pc.or_(null, pa.array(mask))
    if pc.any(null).as_py():
        array = pc.if_else(null, pa.scalar(None, pa.string()), array)
    return array
