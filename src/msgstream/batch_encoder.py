"""Many messages encoded at once: :func:`encode_batch`, the producer's path for a pack.

A one-row Insert (an event, a log line, a sensor reading) is the message a stream sends
most of, and the one whose encoding costs most per row: :func:`msgstream.codec.encode`
builds its JSON body from dicts, one small buffer at a time, for every message. Yet
one-row Inserts of one collection, partition and columns have the same JSON body
whenever their variable-length values have the same byte lengths, and their numeric
columns are fixed-width slices of one array. So :func:`encode_batch` groups them by that
shape, writes each distinct body once (through ``encode_body`` itself, so the body's
layout has one definition), takes each column of a group as one numpy array, and joins
every payload from those pieces: about a third of the per-message cost.

The bytes are exactly :func:`~msgstream.codec.encode`'s, and so are the errors: anything
the fast path does not take (other types, more rows, null masks, JSON columns, values of
unexpected types) is encoded message by message, and a batch in which anything fails is
encoded again message by message, which raises the error :func:`encode` would.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from functools import partial
from operator import attrgetter, itemgetter, methodcaller
from typing import Any

import numpy as np
import orjson

from . import envelope
from .buffers import BodyWriter
from .codec import MAGIC, VERSION, MessageRegistry, default_registry, encode
from .messages import InsertMsg, TsMsg
from .schema import DataType, FieldData

MIN_BATCH = 8
"""Below this many one-row Inserts, grouping costs more than it saves."""

_JSON_OPTIONS = orjson.OPT_SERIALIZE_NUMPY
_PACKED_TYPES = {DataType.VARCHAR: str, DataType.BINARY: bytes}
"""Variable-length columns the fast path takes, with the one value type it accepts."""
_ONE_ROW_OFFSETS = struct.Struct("<2q")
_FAILURES = (ValueError, TypeError, OverflowError, AttributeError, IndexError, struct.error)
"""What bad input raises on the fast path; the batch is then encoded message by message."""
_values = attrgetter("values")
_dtype = attrgetter("dtype")
_row_ids = attrgetter("row_ids")
_fields = attrgetter("fields")
_place = attrgetter("collection_name", "partition_name")
_name_and_dim = attrgetter("name", "dim")
_valid = attrgetter("valid")
_NONE_ID = {id(None)}
_msg_id = attrgetter("msg_id")
_timestamp = attrgetter("timestamp")
_source_id = attrgetter("source_id")
_time_range = methodcaller("time_range")
_first = itemgetter(0)
_second = itemgetter(1)
_lengths = partial(map, len)
_ROW_ID = np.dtype("<i8")
_SIZE = envelope.SIZE
_CRC_AT = envelope.CRC_OFFSET


def encode_batch(
    msgs: Sequence[TsMsg], registry: MessageRegistry = default_registry
) -> list[bytes]:
    """``[encode(m, registry) for m in msgs]``, the same bytes and errors, faster for
    one-row Inserts (see the module doc). Sets each message's ``size`` as ``encode``
    does."""
    inserts = [i for i, msg in enumerate(msgs) if type(msg) is InsertMsg]
    if len(inserts) < MIN_BATCH or not registry.knows(InsertMsg):
        return [encode(msg, registry) for msg in msgs]
    try:
        payloads = _encode_grouped(msgs, inserts, registry)
    except _FAILURES:
        return [encode(msg, registry) for msg in msgs]  # the first bad message's error
    return payloads


def _encode_grouped(
    msgs: Sequence[TsMsg], inserts: list[int], registry: MessageRegistry
) -> list[bytes]:
    payloads: list[bytes | None] = [None] * len(msgs)
    chosen: list[Any] = [msgs[i] for i in inserts]
    keys = list(zip(map(_place, chosen), map(len, map(_row_ids, chosen)), strict=True))
    groups: dict[tuple[Any, ...], list[int]]
    if len(set(keys)) == 1:  # the usual pack: one collection and partition, one shape
        groups = {keys[0]: inserts}
    else:
        groups = {}
        for index, key in zip(inserts, keys, strict=True):
            groups.setdefault(key, []).append(index)
    for (_, rows_each), members in groups.items():
        if rows_each == 1:
            for shaped in _by_columns(msgs, members):
                group = [msgs[i] for i in shaped]
                for index, payload in zip(shaped, _encode_group(group), strict=True):
                    payloads[index] = payload
    for index, msg in enumerate(msgs):
        if payloads[index] is None:
            payloads[index] = encode(msg, registry)
    return payloads  # type: ignore[return-value]  # every slot was filled above


def _by_columns(msgs: Sequence[TsMsg], members: list[int]) -> list[list[int]]:
    """``members`` (one-row Inserts of one collection and partition) split by their
    columns, keeping only the groups the fast path takes. Usually all have the same
    columns, checked a column at a time across the messages; else they are sorted out
    one by one."""
    if _columns_agree([msgs[i] for i in members]):
        return [members]
    groups: dict[tuple[Any, ...], list[int]] = {}
    for index in members:
        groups.setdefault(_columns_of(msgs[index]), []).append(index)
    return [shaped for shaped in groups.values() if _columns_agree([msgs[i] for i in shaped])]


def _columns_of(msg: Any) -> tuple[Any, ...]:
    """What of an Insert's columns its body depends on, besides its values."""
    return tuple([(c.name, id(c.dtype), c.dim, c.valid is None) for c in msg.fields])


def _columns_agree(group: list[Any]) -> bool:
    """Whether the Inserts of ``group`` have the same columns (names, types, dims), all
    of a kind the fast path takes: numeric or vector, varchar or binary, no validity
    mask."""
    columns = list(map(_fields, group))
    if len(set(map(len, columns))) != 1:
        return False
    for cells in zip(*columns, strict=True):
        # By identity where it can: hashing an enum member runs Python code.
        dtypes = set(map(id, map(_dtype, cells)))
        if (
            len(dtypes) != 1
            or set(map(id, map(_valid, cells))) != _NONE_ID
            or len(set(map(_name_and_dim, cells))) != 1
        ):
            return False
        dtype = cells[0].dtype
        if dtype.numpy_dtype is None and dtype not in _PACKED_TYPES:
            return False
    return True


def _encode_group(group: list[Any]) -> list[bytes]:
    """Payloads of one-row Inserts of one collection, partition and columns, column by
    column."""
    count = len(group)
    columns: list[tuple[list[bytes], bool]] = []  # each column's bytes, and if packed
    packed: list[list[bytes]] = []  # the variable-length values, column by column
    for position, column in enumerate(group[0].fields):
        cells: list[Any] = [g.fields[position] for g in group]
        kind = _PACKED_TYPES.get(column.dtype)
        if kind is None:
            target = np.dtype(column.dtype.numpy_dtype)
            columns.append((_row_bytes(list(map(_values, cells)), target), False))
        else:
            data = _one_value_each(cells, kind)
            columns.append((data, True))
            packed.append(data)
    # The JSON body of each distinct combination of value lengths, from the first
    # message that has it.
    keys: list[Any] = list(zip(*map(_lengths, packed), strict=True)) if packed else [()] * count
    bodies: dict[Any, bytes] = {}
    for key, msg in zip(keys, group, strict=True):
        if key not in bodies:
            bodies[key] = orjson.dumps(msg.encode_body(BodyWriter()), option=_JSON_OPTIONS)
    body_of = list(map(bodies.__getitem__, keys))
    heads = _envelopes(group, list(map(len, body_of)))
    row_ids = _row_bytes(list(map(_row_ids, group)), _ROW_ID)
    stamps = heads["end_ts"].tobytes()  # one row: its timestamp is the message's range
    prefixes = heads.tobytes()
    payloads = []
    for row, msg in enumerate(group):
        at = row * _SIZE
        prefix = prefixes[at : at + _CRC_AT]
        pieces = [body_of[row], row_ids[row], stamps[row * 8 : row * 8 + 8]]
        for data, is_packed in columns:
            value = data[row]
            if is_packed:
                pieces.append(_ONE_ROW_OFFSETS.pack(0, len(value)))
            pieces.append(value)
        tail = b"".join(pieces)
        crc = zlib.crc32(tail, zlib.crc32(prefix))
        payload = b"".join((prefix, crc.to_bytes(4, "little"), tail))
        msg.size = len(payload)
        payloads.append(payload)
    return payloads


def _envelopes(group: list[Any], body_sizes: list[int]) -> Any:
    """The envelopes of ``group`` (crc left 0) as one record array, each field checked
    as ``struct`` would check it: ints only (numpy would truncate a float), in range
    (numpy raises OverflowError)."""
    heads = np.zeros(len(group), envelope.DTYPE)
    heads["magic"] = MAGIC
    heads["version"] = VERSION
    heads["msg_type"] = InsertMsg.MSG_TYPE
    ranges = list(map(_time_range, group))
    for name, values in (
        ("msg_id", list(map(_msg_id, group))),
        ("timestamp", list(map(_timestamp, group))),
        ("source_id", list(map(_source_id, group))),
        ("begin_ts", list(map(_first, ranges))),
        ("end_ts", list(map(_second, ranges))),
    ):
        if set(map(type, values)) != {int}:
            raise TypeError(f"{name} not int")
        heads[name] = values
    if not (heads["begin_ts"] == heads["end_ts"]).all():
        raise ValueError("a one-row message's time range is its row's timestamp")
    heads["json_len"] = body_sizes
    return heads


def _row_bytes(arrays: list[Any], dtype: np.dtype[Any]) -> list[bytes]:
    """The bytes of each one-row array, as ``BodyWriter.add_array`` writes them. Every
    array must hold ``dtype`` already: a converted value could differ from a value
    converted on its own (the per-message path)."""
    if set(map(_dtype, arrays)) != {dtype} or set(map(len, arrays)) != {1}:
        raise TypeError(f"a column is not one row of {dtype}")
    return list(map(np.ndarray.tobytes, arrays))


def _one_value_each(cells: list[FieldData], kind: type) -> list[bytes]:
    """The bytes of the one value of each varchar (UTF-8) or binary cell."""
    values = [cell.values for cell in cells]
    if not set(map(type, values)) <= {list, tuple} or set(map(len, values)) != {1}:
        raise TypeError("not one plain value per cell")
    firsts = [value[0] for value in values]
    if set(map(type, firsts)) != {kind}:
        raise TypeError(f"values other than {kind.__name__}")
    return list(map(str.encode, firsts)) if kind is str else firsts
