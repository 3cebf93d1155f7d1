"""Varchar, JSON and binary columns to Arrow, from their packed form.

A decoded message's varchar, JSON and binary columns are
:class:`~msgstream.wire.packed.PackedValues`: offsets and one byte buffer, the layout of an
Arrow string or binary array. Joining the columns of many messages is then one
``bytes.join`` of their buffers and a numpy pass over their lengths, with no Python object
per row; a column built in this process (a list) is packed first. A JSON value that is
``null`` (None, or the JSON text ``null``) becomes SQL NULL, as does a row marked null.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from msgstream.wire.packed import PackedKind, PackedValues, pack

_INT32_MAX = 2**31 - 1
_NULL_TEXT = np.frombuffer(b"null", np.uint8)


def packed_array(
    kind: PackedKind,
    arrow_type: pa.DataType,
    pieces: Sequence[Sequence[Any] | int],
    mask: npt.NDArray[np.bool_] | None,
) -> pa.Array:
    """One Arrow array of the concatenated ``pieces``: each a column's values (packed or
    a list) or a number of rows that have none (nulls). ``mask`` marks nulls (True)."""
    lengths: list[npt.NDArray[np.int64]] = []
    buffers: list[bytes | memoryview] = []
    nulls: list[npt.NDArray[np.bool_]] = []
    any_null = mask is not None
    for piece in pieces:
        if isinstance(piece, int):
            lengths.append(np.zeros(piece, np.int64))
            nulls.append(np.ones(piece, np.bool_))
            any_null = True
            continue
        packed = piece if isinstance(piece, PackedValues) else pack(kind, piece)
        lengths.append(np.diff(packed.offsets))
        buffers.append(packed.data)
        if packed.nulls is None:
            nulls.append(np.zeros(len(packed), np.bool_))
        else:
            nulls.append(packed.nulls)
            any_null = True
    sizes = np.concatenate(lengths) if lengths else np.zeros(0, np.int64)
    rows = len(sizes)
    offsets = np.zeros(rows + 1, np.int64)
    np.cumsum(sizes, out=offsets[1:])
    if offsets[-1] > _INT32_MAX:
        raise ValueError(f"{offsets[-1]} bytes of values exceed one Arrow array's 2 GiB")
    data = b"".join(buffers)
    null = np.concatenate(nulls) if any_null and nulls else np.zeros(rows, np.bool_)
    if mask is not None:
        null = null | mask
    if kind is PackedKind.JSON:
        null = null | null_texts(np.frombuffer(data, np.uint8), offsets, sizes)
    validity = None
    null_count = int(null.sum())
    if null_count:
        validity = pa.py_buffer(np.packbits(~null, bitorder="little"))
    return pa.Array.from_buffers(
        arrow_type,
        rows,
        [validity, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data)],
        null_count=null_count,
    )


def null_texts(
    raw: npt.NDArray[np.uint8], offsets: npt.NDArray[np.int64], sizes: npt.NDArray[np.int64]
) -> npt.NDArray[np.bool_]:
    """Rows whose JSON text is ``null``."""
    out = np.zeros(len(sizes), np.bool_)
    rows = np.flatnonzero(sizes == len(_NULL_TEXT))
    if len(rows):
        four = raw[offsets[rows][:, None] + np.arange(len(_NULL_TEXT))]
        out[rows] = (four == _NULL_TEXT).all(axis=1)
    return out


def json_texts(values: Sequence[Any], mask: npt.NDArray[np.bool_] | None = None) -> pa.Array:
    """One JSON text per value (``orjson`` form) as a string array; ``mask`` marks nulls
    (True = null), as do None values."""
    return packed_array(PackedKind.JSON, pa.string(), [values], mask)
