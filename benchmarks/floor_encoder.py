"""The least a checked encoder does for the benchmarks' messages: floors for ``encode_batch``
and ``encode_one``.

The producer benchmarks send packs of one-row Inserts of one collection and partition,
each with one binary column of values of one length (``msgstream.bench.workload``).
:func:`least_checked_encode` encodes exactly such a pack and nothing else, with only the
checks that ``encode`` needs to refuse what it refuses for that shape: the message type,
the place, int envelope fields (in range), one-row arrays of the declared types, the
column's type, name and dim, no mask, one bytes value each. It reads each property once
across the pack in a C-level pass and fills numpy records, as ``encode_batch`` does, but
without its generality: no groups, no other columns, no fallback.
:func:`least_checked_encode_one` does the same for one such message, in straight-line
code, its JSON body kept per shape (as ``encode_one`` keeps it, without bounds or
windows).

So it is what any encoder of message objects, in Python with numpy, at least spends on
this pack while still refusing bad input; ``encode_batch`` against it is the price of
taking any pack. A pack of another shape is a ``ValueError`` here (the floor is only
measured on its own shape); ``tests/test_floor_encoder.py`` checks that both give
``encode``'s bytes.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from itertools import chain, repeat
from operator import attrgetter, itemgetter
from typing import Any

import numpy as np
import orjson

from msgstream.wire.batch_encoder import payload_records
from msgstream.wire.buffers import BodyWriter
from msgstream.wire.codec import envelope_prefix, fill_envelopes, sealed, sealed_records
from msgstream.wire.messages import InsertMsg, TsMsg
from msgstream.wire.packed import ONE_VALUE_OFFSETS
from msgstream.wire.schema import DataType

_HEADER = attrgetter("msg_id", "timestamp", "source_id")
_BODY = attrgetter("row_ids", "row_timestamps", "fields", *InsertMsg.BODY.names)
_ROW_TYPES = [np.dtype(buffer.dtype) for buffer in InsertMsg.BODY.buffers]
"""The numpy type of each per-row buffer (row ids, row timestamps), in wire order."""
_dtype = attrgetter("dtype")
_nbytes = attrgetter("nbytes")
_first = itemgetter(0)
_name, _dim, _valid, _values = map(attrgetter, ("name", "dim", "valid", "values"))


def least_checked_encode(msgs: Sequence[TsMsg]) -> list[bytes]:
    """``[encode(m) for m in msgs]`` for the benchmarks' pack (see the module doc);
    ``ValueError`` for any other pack, ``TypeError``/``OverflowError`` for an envelope
    field that ``encode`` refuses."""
    count = len(msgs)
    if list(map(type, msgs)).count(InsertMsg) != count:
        raise ValueError("not a pack of Inserts")
    row_ids, row_stamps, fields, *place = zip(*map(_BODY, msgs), strict=True)
    if not all(_one(names) for names in place) or list(map(len, fields)).count(1) != count:
        raise ValueError("not one collection and partition, and one column")
    headers = list(zip(*map(_HEADER, msgs), strict=True))
    if set(map(type, chain.from_iterable(headers))) != {int}:
        raise TypeError("an envelope field holds no int")
    msg_ids, timestamps, source_ids = (
        np.fromiter(values, code, count)
        for values, code in zip(headers, ("<i8", "<u8", "<i8"), strict=True)
    )
    ids, stamps = map(_rows, (row_ids, row_stamps), _ROW_TYPES)
    column = list(map(_first, fields))
    if (
        list(map(_dtype, column)).count(DataType.BINARY) != count
        or not (_one(list(map(_name, column))) and _one(list(map(_dim, column))))
        or list(map(_valid, column)).count(None) != count
    ):
        raise ValueError("not one binary column without a mask")
    values = list(map(_values, column))
    if set(map(type, values)) != {list} or set(map(len, values)) != {1}:
        raise ValueError("not a list of one value in every cell")
    data = list(map(_first, values))
    widths = set(map(len, data))
    if set(map(type, data)) != {bytes} or len(widths) != 1:
        raise ValueError("not bytes values of one length")
    width = widths.pop()
    body = orjson.dumps(msgs[0].encode_body(BodyWriter()), option=orjson.OPT_SERIALIZE_NUMPY)
    parts: list[Any] = [ids, stamps, np.void(ONE_VALUE_OFFSETS.pack(0, width))]
    if width:
        parts.append(np.frombuffer(b"".join(data), (np.void, width)))
    records = payload_records(count, body, parts)
    begins = stamps.view("<u8")
    fill_envelopes(
        records, InsertMsg.MSG_TYPE, msg_ids, timestamps, source_ids, begins, begins, len(body)
    )
    payloads = sealed_records(records)
    deque(map(setattr, msgs, repeat("size"), repeat(records.dtype.itemsize)), maxlen=0)
    return payloads


def _one(items: Sequence[Any]) -> bool:
    return items.count(items[0]) == len(items)


def _rows(arrays: Sequence[Any], dtype: np.dtype[Any]) -> Any:
    """One-row arrays of ``dtype``, their bytes as an array of an item a row."""
    if (
        set(map(type, arrays)) != {np.ndarray}
        or list(map(_dtype, arrays)).count(dtype) != len(arrays)
        or list(map(len, arrays)).count(1) != len(arrays)
        or set(map(_nbytes, arrays)) != {dtype.itemsize}
    ):
        raise ValueError(f"not one-row {dtype} arrays")
    return np.frombuffer(b"".join(arrays), (np.void, dtype.itemsize))


_BODIES: dict[tuple[Any, ...], bytes] = {}
_ROW_IDS, _ROW_STAMPS = _ROW_TYPES


def least_checked_encode_one(msg: TsMsg) -> bytes:
    """``encode(msg)`` for one message of the benchmarks' packs (see the module doc);
    ``ValueError`` for another message."""
    if type(msg) is not InsertMsg:
        raise ValueError("not an Insert")
    ids, stamps, fields = msg.row_ids, msg.row_timestamps, msg.fields
    if (
        type(ids) is not np.ndarray
        or ids.dtype != _ROW_IDS
        or len(ids) != 1
        or type(stamps) is not np.ndarray
        or stamps.dtype != _ROW_STAMPS
        or len(stamps) != 1
        or len(fields) != 1
    ):
        raise ValueError("not one row of one column")
    (column,) = fields
    values = column.values
    if (
        column.dtype is not DataType.BINARY
        or column.valid is not None
        or type(values) is not list
        or len(values) != 1
        or type(values[0]) is not bytes
    ):
        raise ValueError("not one binary value without a mask")
    data = values[0]
    width = len(data)
    shape = (msg.collection_name, msg.partition_name, column.name, column.dim, width)
    body = _BODIES.get(shape)
    if body is None:
        body = _BODIES[shape] = orjson.dumps(msg.encode_body(BodyWriter()))
    stamp = stamps.tobytes()
    begin = int.from_bytes(stamp, "little")
    tail = b"".join((body, ids.tobytes(), stamp, ONE_VALUE_OFFSETS.pack(0, width), data))
    payload = sealed(envelope_prefix(msg, begin, begin, len(body)), (tail,))
    msg.size = len(payload)
    return payload
