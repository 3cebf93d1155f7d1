"""Many messages encoded at once: :func:`encode_batch`, the producer's path for a pack.

A one-row Insert (an event, a log line, a sensor reading) is the message a stream sends
most of, and the one whose encoding costs most per row: :func:`msgstream.wire.codec.encode`
builds its JSON body from dicts, one small buffer at a time, for every message. Yet
one-row Inserts of one collection, partition and columns have the same JSON body
whenever their variable-length values have the same byte lengths, and their numeric
columns are fixed-width. So :func:`encode_batch` groups them by that shape, writes each
distinct body once (through ``encode_body`` itself), and reads and checks each column
and envelope field across the group at once. Messages of one body have payloads of one
size, laid out alike: when a group has one body (the usual pack of fixed-width columns),
its payloads are numpy records filled a field at a time, checksummed and cut into bytes
objects in C-level passes; a group of several bodies has each payload joined from its
pieces, in the order the body layout (:mod:`msgstream.wire.bodies`) gives its buffers.

One message alone (:func:`encode_one`, the path of a produce of one message) gains the
same way from the messages before it: the JSON body of each shape (collection,
partition, columns, value lengths) is kept once written, and a one-row Insert of a shape
seen before is joined from that body and its own buffers, by a function written (as
Python source, :mod:`msgstream.wire.generated`) for the types of its columns.

The bytes are exactly :func:`~msgstream.wire.codec.encode`'s, and so are the errors. What the
fast path does not take is encoded message by message: other types, more rows, validity
masks, JSON columns, nulls, values of another type than their column's, groups whose
bodies mostly differ. A pack in which anything fails on the fast path is encoded again
message by message, which raises the error :func:`encode` would.
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Callable, Sequence
from functools import partial
from itertools import repeat
from operator import attrgetter, itemgetter, methodcaller
from typing import Any, cast

import numpy as np
import orjson

from . import bodies, envelope
from .buffers import BodyWriter
from .codec import (
    MessageRegistry,
    byte_rows,
    default_registry,
    each_row,
    encode,
    envelope_prefix,
    fill_envelopes,
    sealed,
    sealed_each,
    sealed_records,
)
from .generated import Source
from .messages import InsertMsg, TsMsg
from .packed import ONE_VALUE_OFFSETS, PackedKind

MIN_BATCH = 8
"""Below this many one-row Inserts, grouping costs more than it saves."""
SAMPLE = 64
"""How many Inserts of a group :func:`_bodies_repeat` looks at."""
MIN_BODY_REUSE = 4
"""How many messages of a group must share each distinct body, on average, for the
group to be encoded column by column. Writing a body costs about what encoding its
message does, so a group of mostly distinct bodies (several varchar columns of varied
lengths) is encoded message by message instead."""

_JSON_OPTIONS = orjson.OPT_SERIALIZE_NUMPY
_ONE_VALUE_TYPES = {PackedKind.TEXT: str, PackedKind.BINARY: bytes}
"""Variable-length columns the fast path takes, with the one value type it accepts."""
_BODY = InsertMsg.BODY
_FAILURES = (
    ValueError, TypeError, OverflowError, AttributeError, LookupError, BufferError, struct.error
)  # fmt: skip
"""What bad input raises on the fast path; the batch is then encoded message by message."""
_values = attrgetter("values")
_dtype = attrgetter("dtype")
_row_ids = attrgetter("row_ids")
_fields = attrgetter("fields")
_place = attrgetter(*_BODY.names)
_collection, _partition = map(attrgetter, _BODY.names)
_name_and_dim = attrgetter("name", "dim")
_mask_names = [mask.name for mask in bodies.COLUMN.masks]
_masks = list(map(attrgetter, _mask_names))
_NONE_TYPE = {type(None)}
_PLAIN = {list, tuple}
_INSERT_ONLY = {InsertMsg}
_ARRAY_TYPES = {np.ndarray}
_msg_id = attrgetter("msg_id")
_timestamp = attrgetter("timestamp")
_source_id = attrgetter("source_id")
_time_range = methodcaller("time_range")
_nbytes = attrgetter("nbytes")
_row_timestamps = attrgetter("row_timestamps")
_first = itemgetter(0)
_second = itemgetter(1)
_lengths = partial(map, len)
SHAPES_KEPT = 1024
"""How many one-message body shapes :func:`encode_one` keeps (then it starts afresh)."""
REUSE_WINDOW = 64
"""Bodies :func:`encode_one` looks up before it judges whether keeping them pays."""
REUSE_PAUSE = 16384
"""Messages :func:`encode_one` encodes plainly after a window in which most bodies were
new (values of ever-changing lengths: log lines, say), before it tries again."""
_bodies: dict[tuple[Any, ...], bytes] = {}
_reuse = [0, 0, 0]
"""Bodies looked up and found new in the current window, and messages left to encode
plainly (counts kept without a lock: a race only shifts when the judgement falls)."""
_NUMPY_DTYPES: dict[Any, np.dtype[Any]] = {}


def encode_batch(
    msgs: Sequence[TsMsg], registry: MessageRegistry = default_registry
) -> list[bytes]:
    """``[encode(m, registry) for m in msgs]``, the same bytes and errors, faster for
    one-row Inserts (see the module doc). Sets each message's ``size`` as ``encode``
    does."""
    try:
        if len(msgs) >= MIN_BATCH and registry.knows(InsertMsg):
            if _all_one_row_inserts(msgs):  # the usual pack, found by C-level passes
                return _encode_grouped(msgs, None, registry)
            # One pass that costs a multi-row pack (which gains nothing) little.
            singles = [
                i for i, msg in enumerate(msgs) if type(msg) is InsertMsg and len(msg.row_ids) == 1
            ]
            if len(singles) >= MIN_BATCH:
                return _encode_grouped(msgs, singles, registry)
    except _FAILURES:
        pass  # encoded again below, which raises the first bad message's error
    return [encode_one(msg, registry) for msg in msgs]


def encode_one(msg: TsMsg, registry: MessageRegistry = default_registry) -> bytes:
    """``encode(msg, registry)``, the same bytes, size and errors; a one-row Insert whose
    shape was seen before reuses its JSON body (see the module doc). It is encoded by the
    function written for its columns' types (:func:`_single_encoder`), which checks what
    the pack's fast path checks and returns None for what that path does not take."""
    if _reuse[2]:
        _reuse[2] -= 1
    elif type(msg) is InsertMsg and registry.knows(InsertMsg):
        try:
            fields = msg.fields
            types = (fields[0].dtype,) if len(fields) == 1 else tuple(map(_dtype, fields))
            encoder = _SINGLE_ENCODERS.get(types, _UNKNOWN)
            if encoder is _UNKNOWN:
                encoder = _single_encoder(types)
            payload: bytes | None = None if encoder is None else encoder(msg, fields)
        except _FAILURES:
            payload = None  # encoded below, which raises encode's error
        if payload is not None:
            return payload
    return encode(msg, registry)


_UNKNOWN: Any = object()
_SINGLE_ENCODERS: dict[tuple[Any, ...], Callable[[InsertMsg, Any], bytes | None] | None] = {}
"""The one-message encoder of each tuple of column types met (None: not taken)."""


def _single_encoder(
    types: tuple[Any, ...],
) -> Callable[[InsertMsg, Any], bytes | None] | None:
    """The function that encodes a one-row Insert whose columns have ``types``: the
    checks and buffers of a one-row Insert's fast path, written out for those columns (a
    message is a few dozen operations, so a loop and a plan lookup per column would be a
    large share of it); None if a type is not taken. Kept per tuple of types."""
    plans = [_cell_plan(data_type) for data_type in types]  # raises for no data type
    encoder = None if any(plan[3] is None for plan in plans) else _write_single_encoder(plans)
    if len(_SINGLE_ENCODERS) >= SHAPES_KEPT:
        _SINGLE_ENCODERS.clear()
    _SINGLE_ENCODERS[types] = encoder
    return encoder


def _write_single_encoder(plans: list[_CellPlan]) -> Callable[[InsertMsg, Any], bytes | None]:
    """``encode_single(msg, fields)`` for columns of ``plans``: the row arrays in wire
    order, then each column's checks and buffers as its plan says, the body kept per
    shape (:func:`_body_of`), the envelope and checksum as :func:`encode` writes them.
    ``msgstream.wire.generated.source`` shows it."""
    scope: dict[str, Any] = {
        "_NDARRAY": _NDARRAY, "_PLAIN": _PLAIN, "_place": _place, "_row_arrays": _row_arrays,
        "_body_of": _body_of, "_join": b"".join, "_offsets": ONE_VALUE_OFFSETS.pack,
        "_from_bytes": int.from_bytes, "_envelope_prefix": envelope_prefix, "_sealed": sealed,
    }  # fmt: skip
    src = Source()
    with src.block("def encode_single(msg, fields):"):
        columns = ", ".join(f"c{k}" for k in range(len(plans)))
        src.line(f"{columns}, = fields" if plans else "pass")
        arrays = [f"r{at}" for at in range(len(_ROW_ARRAYS))]
        src.line(f"{', '.join(arrays)}, = _row_arrays(msg)")
        buffers = []
        for at, (_name, dtype) in enumerate(_ROW_ARRAYS):  # wire order
            scope[f"R{at}"] = dtype
            _check_one_row_array(src, f"r{at}", f"R{at}")
            src.line(f"b{at} = r{at}.tobytes()")
            buffers.append(f"b{at}")
        shape = ["_place(msg)"]
        for k, (data_type, numpy_dtype, kind, layout) in enumerate(plans):
            for mask in _mask_names:
                src.line(f"if c{k}.{mask} is not None: return None")
            src.line(f"v{k} = c{k}.values")
            if numpy_dtype is not None:
                scope[f"N{k}"] = numpy_dtype
                _check_one_row_array(src, f"v{k}", f"N{k}")
                src.line(f"d{k} = v{k}.tobytes()")
            else:
                scope[f"K{k}"] = kind
                src.line(f"if type(v{k}) not in _PLAIN or len(v{k}) != 1: return None")
                src.line(f"d{k} = v{k}[0]")
                src.line(f"if type(d{k}) is not K{k}: return None")
                if kind is str:
                    src.line(f"d{k} = d{k}.encode()")
            src.line(f"n{k} = len(d{k})")
            for offsets in cast(tuple[bool, ...], layout):
                buffers.append(f"_offsets(0, n{k})" if offsets else f"d{k}")
            scope[f"T{k}"] = id(data_type)
            shape.append(f"(c{k}.name, T{k}, c{k}.dim, n{k})")
        src.line(f"body = _body_of(({', '.join(shape)},), msg)")
        # A one-row message's time range is its row's timestamp (what time_range answers).
        src.line(f"ts = _from_bytes(b{_STAMPS_AT}, 'little')")
        src.line(f"tail = _join((body, {', '.join(buffers)}))  # one checksum call over it")
        src.line("payload = _sealed(_envelope_prefix(msg, ts, ts, len(body)), (tail,))")
        src.line("msg.size = len(payload)")
        src.line("return payload")
    return src.compile("encode_single", scope)


def _check_one_row_array(src: Source, name: str, dtype: str) -> None:
    """Return None unless ``name`` is an array of one row of ``dtype`` (compared by
    identity first)."""
    src.line(
        f"if type({name}) is not _NDARRAY or len({name}) != 1"
        f" or ({name}.dtype is not {dtype} and {name}.dtype != {dtype}): return None"
    )


def _cell_plan(dtype: Any) -> _CellPlan:
    """How a one-row column of ``dtype`` is taken: the type itself, its numpy type
    (fixed-width values), else the one Python type its value must have (str or bytes),
    and the buffers it writes (:func:`_one_value_layout`); a layout of None: not taken
    (JSON, say)."""
    numpy_dtype = None if dtype.numpy_dtype is None else _numpy_dtype(dtype.numpy_dtype)
    kind = None if numpy_dtype is not None else _ONE_VALUE_TYPES.get(dtype.packed)
    layout = None
    if numpy_dtype is not None or kind is not None:
        layout = _one_value_layout(dtype.storage)
    return dtype, numpy_dtype, kind, layout


_CellPlan = tuple[Any, "np.dtype[Any] | None", "type | None", "tuple[bool, ...] | None"]
_NDARRAY = np.ndarray


def _body_of(shape: tuple[Any, ...], msg: InsertMsg) -> bytes:
    """The JSON body of ``msg``, whose shape is ``shape``: kept from the first message of
    that shape. A window in which most were new pauses the keeping (:data:`REUSE_PAUSE`)."""
    reuse = _reuse
    reuse[0] += 1
    body = _bodies.get(shape)
    if body is None:
        reuse[1] += 1
        if len(_bodies) >= SHAPES_KEPT:
            _bodies.clear()
        body = _bodies[shape] = orjson.dumps(msg.encode_body(BodyWriter()), option=_JSON_OPTIONS)
    if reuse[0] >= REUSE_WINDOW:
        if 2 * reuse[1] > reuse[0]:
            reuse[2] = REUSE_PAUSE
        reuse[0] = reuse[1] = 0
    return body


def _numpy_dtype(name: Any) -> np.dtype[Any]:
    found = _NUMPY_DTYPES.get(name)
    if found is None:
        found = _NUMPY_DTYPES[name] = np.dtype(name)
    return found


def _all_one_row_inserts(msgs: Sequence[TsMsg]) -> bool:
    return set(map(type, msgs)) == _INSERT_ONLY and set(map(len, map(_row_ids, msgs))) == {1}


def _encode_grouped(
    msgs: Sequence[TsMsg], singles: list[int] | None, registry: MessageRegistry
) -> list[bytes]:
    """Encode ``msgs``, its one-row Inserts (at ``singles``; None: every message) column by
    column where they qualify, by collection and partition."""
    if singles is None:
        singles, chosen = list(range(len(msgs))), list(msgs)
    else:
        chosen = [msgs[i] for i in singles]
    collections = list(map(_collection, chosen))
    partitions = list(map(_partition, chosen))
    count = len(chosen)
    groups: dict[tuple[str, str], tuple[list[int], list[Any]]]
    if collections.count(collections[0]) == count and partitions.count(partitions[0]) == count:
        groups = {(collections[0], partitions[0]): (singles, chosen)}  # the usual pack
    else:
        groups = {}
        places = zip(collections, partitions, strict=True)
        for index, msg, place in zip(singles, chosen, places, strict=True):
            members, member_msgs = groups.setdefault(place, ([], []))
            members.append(index)
            member_msgs.append(msg)
    payloads: list[bytes | None] = [None] * len(msgs)
    for members, member_msgs in groups.values():
        if _bodies_repeat(member_msgs[:SAMPLE]):
            for shaped, shaped_msgs, columns in _by_columns(members, member_msgs):
                encoded = _encode_group(shaped_msgs, columns)
                if encoded is not None and len(encoded) == len(msgs):
                    return encoded  # one group was the whole pack
                for index, payload in zip(shaped, encoded or (), strict=True):
                    payloads[index] = payload
    for index, msg in enumerate(msgs):
        if payloads[index] is None:
            payloads[index] = encode_one(msg, registry)
    return payloads  # type: ignore[return-value]  # every slot was filled above


def _bodies_repeat(sample: list[Any]) -> bool:
    """Whether one-row Inserts like ``sample`` (the first of a group) may share their
    bodies often enough for the fast path: False when most of the sample's bodies differ
    (a look at the lengths of their variable-length values, in characters: an estimate),
    so that a pack of mostly distinct bodies costs little more than encoding it message
    by message. :func:`_encode_group` checks the whole group."""
    keys = set()
    for msg in sample:
        lengths = [
            _first_length(c.values) for c in msg.fields if c.dtype.packed in _ONE_VALUE_TYPES
        ]
        keys.add(tuple(lengths))
    return len(keys) <= len(sample) * 3 // 4


def _first_length(values: Any) -> int:
    first = values[0] if len(values) == 1 else None
    return len(first) if isinstance(first, str | bytes) else -1


_Columns = list[tuple[Any, bodies.Storage]]
"""A group's columns in order: each row's value, and the column's storage (which says the
buffers the value goes to). A fixed-width column's values are one numpy array of raw
bytes, an item a row; a packed column's (varchar, binary) a list of bytes, a row each."""
_Part = Any
"""One buffer of every message of a group: a numpy array of an item a message, or one item
(a numpy scalar) all of them share."""


def _by_columns(
    members: list[int], member_msgs: list[Any]
) -> list[tuple[list[int], list[Any], _Columns]]:
    """The one-row Inserts at ``members`` (``member_msgs``, of one collection and
    partition) split by their columns, with the columns' bytes, keeping only the groups
    the fast path takes. Usually all have the same columns, checked a column at a time
    across the messages; else they are sorted out one by one."""
    columns = _columns(member_msgs)
    if columns is not None:
        return [(members, member_msgs, columns)]
    groups: dict[tuple[Any, ...], tuple[list[int], list[Any]]] = {}
    for index, msg in zip(members, member_msgs, strict=True):
        shaped, shaped_msgs = groups.setdefault(_columns_of(msg), ([], []))
        shaped.append(index)
        shaped_msgs.append(msg)
    found = []
    for shaped, shaped_msgs in groups.values():
        columns = _columns(shaped_msgs)
        if columns is not None:
            found.append((shaped, shaped_msgs, columns))
    return found


def _columns_of(msg: Any) -> tuple[Any, ...]:
    """What of an Insert's columns decides whether and how the fast path takes them."""
    return tuple(
        [(c.name, id(c.dtype), c.dim, c.valid is None, _cell_kind(c.values)) for c in msg.fields]
    )


def _cell_kind(values: Any) -> Any:
    if type(values) in (list, tuple):
        return type(values[0]) if len(values) == 1 else -len(values)
    return getattr(values, "dtype", type(values))


def _columns(group: list[Any]) -> _Columns | None:
    """The columns of ``group``'s Inserts, row by row as bytes, if they have the same
    columns (names, types, dims) and all are of a kind the fast path takes: numeric or
    vector arrays of the column's type, or one str (varchar) or bytes (binary) value, and
    no mask (a validity mask); else None."""
    fields = list(map(_fields, group))
    if len(set(map(len, fields))) != 1:
        return None
    columns: _Columns = []
    for cells in zip(*fields, strict=True):
        dtype = cells[0].dtype
        # Types by identity, which list.count tries first: hashing an enum member runs
        # Python code, and an int per cell (id) costs more than the count.
        if (
            list(map(_dtype, cells)).count(dtype) != len(cells)
            or any(set(map(type, map(mask, cells))) != _NONE_TYPE for mask in _masks)
            or len(set(map(_name_and_dim, cells))) != 1
        ):
            return None
        values = list(map(_values, cells))
        data: Any
        if dtype.numpy_dtype is not None:
            data = _fixed_rows(values, _numpy_dtype(dtype.numpy_dtype))
        else:
            kind = _ONE_VALUE_TYPES.get(dtype.packed)
            data = None if kind is None else _one_value_each(values, kind)
        if data is None or _one_value_layout(dtype.storage) is None:
            return None
        columns.append((data, dtype.storage))
    return columns


def _encode_group(group: list[Any], columns: _Columns) -> list[bytes] | None:
    """Payloads of one-row Inserts of one collection, partition and ``columns``; None if
    their variable-length values make most bodies differ. Messages of one JSON body (the
    same lengths of variable-length values) have payloads of one size: when the whole
    group has one body, its payloads are filled as records (:func:`_payloads`); else each
    is joined from its pieces (:func:`_joined`)."""
    count = len(group)
    packed = [data for data, storage in columns if storage.sized_by_values]
    keys: list[Any]
    if len(packed) == 1:  # the usual one varchar or binary column: its lengths
        keys = list(map(len, packed[0]))
    else:
        keys = list(zip(*map(_lengths, packed), strict=True)) if packed else [()] * count
    distinct = len(set(keys))
    if distinct * MIN_BODY_REUSE > count:
        return None
    header = _headers(group)
    row_parts = _row_parts(group, header[-1])
    if row_parts is None:
        return None
    if distinct == 1:
        return _payloads(group, header, row_parts, columns)
    return _joined(group, keys, header, row_parts, columns)


def _headers(group: list[Any]) -> tuple[Any, Any, Any, Any]:
    """The envelope fields that differ from message to message, as arrays: msg_ids,
    timestamps, source_ids, and each one-row message's row timestamp (also its time
    range). ``TypeError`` for a field that is no int (numpy would take a float,
    truncated, where :func:`~msgstream.wire.codec.encode` refuses it), ``OverflowError``
    for one out of its field's range."""
    msg_ids, timestamps, source_ids = (
        _ints(list(map(read, group)), dtype) for read, dtype in _HEADER_FIELDS
    )
    stamps = _fixed_rows(list(map(_row_timestamps, group)), _STAMPS_DTYPE)
    if stamps is None:  # what time_range answers (a message decoded without its arrays)
        ranges = list(map(_time_range, group))
        ends = list(map(_second, ranges))
        if list(map(_first, ranges)) != ends:
            raise ValueError("a one-row message's time range is its row's timestamp")
        return msg_ids, timestamps, source_ids, _ints(ends, _STAMPS_DTYPE)
    return msg_ids, timestamps, source_ids, stamps.view(_STAMPS_DTYPE)


def _ints(values: list[Any], dtype: np.dtype[Any]) -> Any:
    """``values`` as an array of ``dtype``; ``TypeError`` unless all are ints,
    ``OverflowError`` for one out of its range."""
    if set(map(type, values)) != _INT:
        raise TypeError("an envelope field holds no int")
    return np.fromiter(values, dtype, len(values))


def _payloads(
    group: list[Any], header: tuple[Any, ...], row_parts: list[Any], columns: _Columns
) -> list[bytes]:
    """The payloads of one-row Inserts that share one JSON body, and so one size: a
    record a message (the envelope, the body, then each buffer in the body layout's
    order), filled a field at a time for the whole group and sealed at once. Sets each
    message's ``size`` as ``encode`` does."""
    body = orjson.dumps(group[0].encode_body(BodyWriter()), option=_JSON_OPTIONS)
    msg_ids, timestamps, source_ids, stamps = header
    parts: list[_Part] = list(row_parts)
    for data, storage in columns:
        if type(data) is _NDARRAY:
            parts.append(data)
            continue
        width = len(data[0])  # the same length in every message: one body
        for offsets in cast(tuple[bool, ...], _one_value_layout(storage)):
            if offsets:
                parts.append(np.void(ONE_VALUE_OFFSETS.pack(0, width)))
            elif width:
                parts.append(np.frombuffer(b"".join(data), (np.void, width)))
    records = payload_records(len(group), body, parts)
    fill_envelopes(
        records, InsertMsg.MSG_TYPE, msg_ids, timestamps, source_ids, stamps, stamps, len(body)
    )
    payloads = sealed_records(records)
    deque(map(setattr, group, repeat("size"), repeat(records.dtype.itemsize)), maxlen=0)
    return payloads


def payload_records(count: int, body: bytes, parts: Sequence[Any]) -> Any:
    """``count`` payloads of one size as numpy records (:func:`_record_type`), the JSON
    ``body`` and each of ``parts`` (the buffers in wire order: an array of an item a
    payload, or one item all share) written in; the envelope is left to
    :func:`~msgstream.wire.codec.fill_envelopes`, the checksum to
    :func:`~msgstream.wire.codec.sealed_records`."""
    records = np.empty(count, _record_type(len(body), tuple(part.dtype for part in parts)))
    records[_BODY_FIELD] = np.void(body)
    for name, part in zip(records.dtype.names[_FIRST_PART:], parts, strict=True):
        records[name] = part
    return records


_BODY_FIELD = "body"
_FIRST_PART = len(envelope.NAMES) + 1
"""Where a record's buffers start among its fields (after the envelope's and the body)."""
_RECORD_TYPES: dict[tuple[Any, ...], np.dtype[Any]] = {}


def _record_type(body_len: int, parts: tuple[np.dtype[Any], ...]) -> np.dtype[Any]:
    """A payload as a numpy record: the envelope's fields, a JSON body of ``body_len``
    bytes, then a field of each type in ``parts`` (kept: a few per producer)."""
    key = (body_len, parts)
    found = _RECORD_TYPES.get(key)
    if found is None:
        if len(_RECORD_TYPES) >= SHAPES_KEPT:
            _RECORD_TYPES.clear()
        fields = [(_BODY_FIELD, np.dtype((np.void, body_len)))]
        fields += ((f"part{index}", part) for index, part in enumerate(parts))
        found = _RECORD_TYPES[key] = np.dtype(envelope.DTYPE.descr + fields)
    return found


def _joined(
    group: list[Any], keys: list[Any], header: tuple[Any, ...], row_parts: list[Any],
    columns: _Columns,
) -> list[bytes]:  # fmt: skip
    """The payloads of one-row Inserts of several JSON bodies (``keys``: each one's), each
    joined from its envelope, its body and its buffers' bytes, in C-level maps. Sets each
    message's ``size`` as ``encode`` does."""
    # Messages of one key have the same body: any of them writes it (the last, by dict).
    bodies_of = {
        key: orjson.dumps(msg.encode_body(BodyWriter()), option=_JSON_OPTIONS)
        for key, msg in dict(zip(keys, group, strict=True)).items()
    }
    body_of = list(map(bodies_of.__getitem__, keys))
    msg_ids, timestamps, source_ids, stamps = header
    heads = np.empty(len(group), envelope.DTYPE)
    body_lens = np.fromiter(map(len, body_of), np.uint32, len(group))
    fill_envelopes(
        heads, InsertMsg.MSG_TYPE, msg_ids, timestamps, source_ids, stamps, stamps, body_lens
    )
    prefixes = each_row(byte_rows(heads)[:, : envelope.CRC_OFFSET])
    parts: list[list[bytes]] = [body_of]
    parts += (each_row(byte_rows(part)) for part in row_parts)
    for data, storage in columns:
        if type(data) is _NDARRAY:
            parts.append(each_row(byte_rows(data)))
            continue
        for offsets in cast(tuple[bool, ...], _one_value_layout(storage)):
            parts.append(
                list(map(ONE_VALUE_OFFSETS.pack, repeat(0), map(len, data))) if offsets else data
            )
    payloads = sealed_each(prefixes, list(map(b"".join, zip(*parts, strict=True))))
    deque(map(setattr, group, repeat("size"), map(len, payloads)), maxlen=0)
    return payloads


def _row_parts(group: list[Any], stamps: Any) -> list[Any] | None:
    """Each one-row Insert's per-row buffers (row ids, row timestamps), an array per
    buffer in wire order, an item a message; None unless each is an array of the buffer's
    type. The row timestamps are given (``stamps``: see :func:`_headers`)."""
    parts = []
    for at, (name, dtype) in enumerate(_ROW_ARRAYS):
        arrays = None if at == _STAMPS_AT else list(map(attrgetter(name), group))
        found = stamps if arrays is None else _fixed_rows(arrays, dtype)
        if found is None:
            return None
        parts.append(found)
    return parts


_STAMPS = bodies.ROW_TIMESTAMPS
_ROW_ARRAYS = [(buffer.name, np.dtype(buffer.dtype)) for buffer in _BODY.buffers]
"""An Insert's per-row buffers as the arrays a one-row message holds them in (wire order):
(attribute, numpy type)."""
_STAMPS_AT = _BODY.buffers.index(_STAMPS)
"""Where the row timestamps stand among them."""
_row_arrays = attrgetter(*(name for name, _ in _ROW_ARRAYS))
_STAMPS_DTYPE = _ROW_ARRAYS[_STAMPS_AT][1]
_INT = {int}
_HEADER_FIELDS = ((_msg_id, np.dtype(np.int64)), (_timestamp, np.dtype(np.uint64)),
                  (_source_id, np.dtype(np.int64)))  # fmt: skip
_OFFSETS = bodies.Count.OFFSETS
_VALUE_COUNTS = (bodies.Count.VALUES, bodies.Count.ANY)


def _one_value_layout(storage: bodies.Storage) -> tuple[bool, ...] | None:
    """The buffers a one-row column of ``storage`` writes, in wire order: True for its
    offsets, False for the value itself; a mask is absent. None if it has another.
    Worked out once a storage (kept by identity: hashing the frozen dataclass runs
    Python)."""
    known = _LAYOUTS.get(id(storage))
    if known is None or known[0] is not storage:
        known = _LAYOUTS[id(storage)] = (storage, _layout_of(storage))
    return known[1]


def _layout_of(storage: bodies.Storage) -> tuple[bool, ...] | None:
    layout = []
    for buffer in storage.buffers:
        if buffer.optional:
            continue
        if buffer.count is _OFFSETS:
            layout.append(True)
        elif buffer.count in _VALUE_COUNTS:
            layout.append(False)
        else:
            return None
    return tuple(layout)


_LAYOUTS: dict[int, tuple[bodies.Storage, tuple[bool, ...] | None]] = {}


def _fixed_rows(arrays: list[Any], dtype: np.dtype[Any]) -> Any:
    """The bytes of one-row arrays (each row's bytes, as ``BodyWriter.add_array`` writes
    them) as one numpy array of an item a row; None unless every one is an array of
    ``dtype`` and one size, of one row (a converted value could differ from one converted
    on its own, as the per-message path does)."""
    if not set(map(type, arrays)) <= _ARRAY_TYPES or set(map(_dtype, arrays)) != {dtype}:
        return None
    # One row each and one size (so one item shape, the type being one): ints, cheaper
    # to collect than the shapes' tuples.
    if list(map(len, arrays)).count(1) != len(arrays) or len(set(map(_nbytes, arrays))) != 1:
        return None
    width = arrays[0].nbytes
    if not width:
        return None
    try:
        joined = b"".join(arrays)
    except TypeError:  # a view that is not contiguous has no flat buffer: copy each
        joined = b"".join(map(np.ndarray.tobytes, arrays))
    return np.frombuffer(joined, (np.void, width))


def _one_value_each(values: list[Any], kind: type) -> list[bytes] | None:
    """The bytes of the one value of each varchar (``kind`` str, UTF-8) or binary (bytes)
    cell, given the cells' values; None unless each is a list or tuple of one ``kind``."""
    if not set(map(type, values)) <= _PLAIN or set(map(len, values)) != {1}:
        return None
    firsts = list(map(_first, values))
    if set(map(type, firsts)) != {kind}:
        return None
    return list(map(str.encode, firsts)) if kind is str else firsts
