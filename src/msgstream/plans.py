"""Decode plans: what a message body says, parsed and validated once, reused for every
payload that carries the same body.

The JSON part of a body describes a message's layout, not its rows: a Delete with int64
keys says "collection c, partition p, n rows, timestamps at offset o1, keys at offset o2"
and its data sits in the side buffers. Consecutive messages of one producer repeat that
JSON byte for byte. A stream that reads many of them fully decodes the first one (every
check of :func:`msgstream.codec.decode`), keeps a plan keyed by (type, body bytes), and
for the next payloads of that type with the same body checks the envelope, the checksum
and that the buffer area is large enough: all that can differ, since the rest of
``decode``'s checks depend on the body bytes alone.

A plan builds a message in one step, and defers the numpy views over its buffers, its
``hash_keys`` list and its ``position`` until first used: the message keeps its
:attr:`~msgstream.messages.TsMsg.lazy_body` (see :mod:`msgstream.messages`). The built
message equals what :func:`~msgstream.codec.decode` returns for the same payload. Types
and bodies without a plan (a Delete with string keys, an Insert with varchar, JSON or
binary columns, a CreateCollection, user types) are decoded in full, as before.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from . import envelope
from .messages import (
    CreatePartitionMsg,
    DeleteMsg,
    DropCollectionMsg,
    DropPartitionMsg,
    InsertMsg,
    TimeTickMsg,
    TsMsg,
    U64Array,
)
from .schema import DataType, FieldData

Where = tuple[str, str]
"""(channel, subscription name): what a position needs besides the MessageID."""
_BY_END_TS = envelope.index("end_ts")
_BY_TIMESTAMP = envelope.index("timestamp")

# Row kinds, as the time-tick barrier sees them (one byte per row in a ``bytearray``).
KIND_DML = 0
"""Insert or Delete: a data message de-duplicated by (source_id, msg_id) within a pack."""
KIND_DATA = 1
"""Any other data message."""
KIND_TICK = 2
"""A time tick."""
KIND_DEAD = 3
"""Read but never delivered (skipped after a seek, rejected as late, a stale tick)."""

TIME_TICK = TimeTickMsg.MSG_TYPE
DML_TYPES = frozenset({InsertMsg.MSG_TYPE, DeleteMsg.MSG_TYPE})

_new = object.__new__
_NO_STAMPS = slice(0, 0)
_U8 = np.dtype("<u8")
_I8 = np.dtype("<i8")


def kind_of(msg_type: int) -> int:
    if msg_type == TIME_TICK:
        return KIND_TICK
    return KIND_DML if msg_type in DML_TYPES else KIND_DATA


class Plan:
    """Builds the message of one validated payload.

    ``code`` is the message type the plan is for, ``kind`` its barrier row kind, ``need``
    the smallest payload the plan fits (its buffers must lie inside). ``ts_field`` is the
    envelope field the barrier orders by (its :func:`msgstream.envelope.index`):
    ``end_ts`` for DML, whose envelope carries the range of its rows, else ``timestamp``.
    """

    __slots__ = ("code", "kind", "need", "stamp_rows", "stamps", "ts_field")

    deferred: ClassVar[frozenset[str]] = frozenset()
    """The body fields a message built by this plan leaves to :meth:`build_body`."""

    def __init__(self, code: int, need: int) -> None:
        self.code = code
        self.kind = kind_of(code)
        self.need = need
        self.ts_field = _BY_END_TS if self.kind == KIND_DML else _BY_TIMESTAMP
        self.stamps = _NO_STAMPS
        """Where a payload of this plan holds its row timestamps (DML plans)."""
        self.stamp_rows = 0
        """How many row timestamps that is."""

    def ts_range_agrees(self, payload: bytes, begin_ts: int, end_ts: int) -> bool:
        """Whether ``payload``'s row timestamps span exactly ``[begin_ts, end_ts]`` (its
        envelope's range); True for a plan without row timestamps."""
        rows = self.stamp_rows
        if not rows:
            return True
        stamps = np.frombuffer(payload[self.stamps], _U8, rows)
        return (int(stamps.min()), int(stamps.max())) == (begin_ts, end_ts)

    def build(
        self, msg_id: int, timestamp: int, source_id: int, payload: bytes, at: Any, where: Where
    ) -> TsMsg:
        """The message of ``payload`` (whose envelope holds ``msg_id``, ``timestamp`` and
        ``source_id``); its position is at ``at`` (the MessageID's bytes) in ``where`` =
        (channel, subscription)."""
        raise NotImplementedError

    def build_body(self, payload: bytes) -> dict[str, Any]:
        """The :attr:`deferred` fields of the message of ``payload`` (built by
        :meth:`build`)."""
        return {}


class ReadyPlan(Plan):
    """A message that was decoded already (a type without a plan, or one fed to the
    barrier as an object): building it returns it as is, its position untouched."""

    __slots__ = ("msg",)

    def __init__(self, msg: TsMsg) -> None:
        super().__init__(msg.MSG_TYPE, 0)
        self.msg = msg

    def build(
        self, msg_id: int, timestamp: int, source_id: int, payload: bytes, at: Any, where: Where
    ) -> TsMsg:
        return self.msg


class StaticPlan(Plan):
    """A type whose body holds only immutable scalars (a time tick, drop collection,
    create and drop partition): every message shares the decoded field values."""

    __slots__ = ("cls", "fields")

    # Types whose decoded fields are exactly their body's scalars.
    TYPES: ClassVar[frozenset[type[TsMsg]]] = frozenset(
        {TimeTickMsg, DropCollectionMsg, CreatePartitionMsg, DropPartitionMsg}
    )

    def __init__(self, cls: type[TsMsg], fields: dict[str, Any], need: int) -> None:
        super().__init__(cls.MSG_TYPE, need)
        self.cls = cls
        self.fields = fields

    def build(
        self, msg_id: int, timestamp: int, source_id: int, payload: bytes, at: Any, where: Where
    ) -> TsMsg:
        msg: Any = _new(self.cls)
        msg.msg_id = msg_id
        msg.timestamp = timestamp
        msg.source_id = source_id
        msg.size = len(payload)
        msg.lazy_body = (self, payload, at, where)
        for name, value in self.fields.items():
            setattr(msg, name, value)
        return msg  # type: ignore[no-any-return]


class DmlPlan(Plan):
    """Insert and Delete plans: the message keeps its payload, its arrays deferred. The
    hot path of a stream: :meth:`build_many` builds a run of rows of one plan in one call
    (other plans are built row by row)."""

    __slots__ = ("cls", "collection", "partition", "rows", "stamps_at")

    def __init__(
        self,
        cls: type[TsMsg],
        collection: str,
        partition: str,
        rows: int,
        stamps_at: int,
        need: int,
    ) -> None:
        super().__init__(cls.MSG_TYPE, need)
        self.cls = cls
        self.collection = collection
        self.partition = partition
        self.rows = rows
        self.stamps_at = stamps_at
        self.stamps = slice(stamps_at, stamps_at + rows * 8)
        self.stamp_rows = rows

    def _row_timestamps(self, payload: bytes) -> U64Array:
        return np.ndarray((self.rows,), _U8, payload, self.stamps_at)

    def build(
        self, msg_id: int, timestamp: int, source_id: int, payload: bytes, at: Any, where: Where
    ) -> TsMsg:
        return self.build_many([msg_id], [timestamp], [source_id], [payload], [at], where)[0]

    def build_many(
        self,
        msg_ids: list[int],
        stamps: list[int],
        sources: list[int],
        payloads: list[bytes],
        ats: list[Any],
        where: Where,
    ) -> list[TsMsg]:
        # The hot loop of a stream: attribute stores, not a dict (CPython keeps them
        # inline in the object, so a message is one allocation, one object for the
        # garbage collector), and no call per message.
        cls, collection, partition = self.cls, self.collection, self.partition
        named = "collection_name" not in self.deferred  # else read with the body
        out: list[Any] = []
        add = out.append
        for msg_id, stamp, source, payload, at in zip(
            msg_ids, stamps, sources, payloads, ats, strict=True
        ):
            msg: Any = _new(cls)
            msg.msg_id = msg_id
            msg.timestamp = stamp
            msg.source_id = source
            msg.size = len(payload)
            if named:
                msg.collection_name = collection
                msg.partition_name = partition
            msg.lazy_body = (self, payload, at, where)
            add(msg)
        return out


class DeletePlan(DmlPlan):
    """A Delete with int64 keys: timestamps and keys are views into the payload."""

    __slots__ = ("keys_at",)
    deferred = frozenset({"row_timestamps", "primary_keys"})

    def __init__(
        self, collection: str, partition: str, rows: int, stamps_at: int, keys_at: int
    ) -> None:
        need = max(stamps_at, keys_at) + rows * 8
        super().__init__(DeleteMsg, collection, partition, rows, stamps_at, need)
        self.keys_at = keys_at

    def build_body(self, payload: bytes) -> dict[str, Any]:
        return {
            "row_timestamps": self._row_timestamps(payload),
            "primary_keys": np.ndarray((self.rows,), _I8, payload, self.keys_at),
        }


class _Column:
    """One numeric or vector column of an Insert plan."""

    __slots__ = ("at", "dim", "dtype", "item", "name", "shape", "valid_at")

    def __init__(
        self, name: str, dtype: DataType, rows: int, dim: int | None, at: int, valid_at: int | None
    ) -> None:
        self.name = name
        self.dtype = dtype
        self.item = np.dtype(dtype.numpy_dtype)
        self.dim = dim
        self.shape = (rows,) if dim is None else (rows, dim)
        self.at = at
        self.valid_at = valid_at

    @property
    def end(self) -> int:
        """Where the column's buffers end in the payload."""
        rows = self.shape[0]
        end = self.at + rows * (self.dim or 1) * self.item.itemsize
        return end if self.valid_at is None else max(end, self.valid_at + rows)

    def build(self, payload: bytes) -> FieldData:
        column = FieldData.__new__(FieldData)
        column.name = self.name
        column.dtype = self.dtype
        column.values = np.ndarray(self.shape, self.item, payload, self.at)
        column.dim = self.dim
        column.valid = (
            None
            if self.valid_at is None
            else np.ndarray(self.shape[:1], np.bool_, payload, self.valid_at)
        )
        return column


class InsertPlan(DmlPlan):
    """An Insert whose columns are all numeric, bool or vectors (no inline values)."""

    __slots__ = ("columns", "ids_at")
    deferred = frozenset({"row_timestamps", "row_ids", "fields"})

    def __init__(
        self,
        collection: str,
        partition: str,
        rows: int,
        ids_at: int,
        stamps_at: int,
        columns: list[_Column],
    ) -> None:
        need = max([ids_at + rows * 8, stamps_at + rows * 8, *(c.end for c in columns)])
        super().__init__(InsertMsg, collection, partition, rows, stamps_at, need)
        self.ids_at = ids_at
        self.columns = columns

    def build_body(self, payload: bytes) -> dict[str, Any]:
        return {
            "row_timestamps": self._row_timestamps(payload),
            "row_ids": np.ndarray((self.rows,), _I8, payload, self.ids_at),
            "fields": [c.build(payload) for c in self.columns],
        }


class UncheckedDmlPlan(DmlPlan):
    """Insert or Delete payloads whose bodies were not read: only their envelopes and
    checksums were checked. Made for a stream asked to leave such bodies unchecked
    (``unchecked_bodies``), for a consumer that reads the payloads itself (the Spark
    bridge turns many Inserts into Arrow columns in whole-batch passes, with checks of
    its own): the reader parses no body, and one plan serves every payload of its type.

    Its message defers every body field, collection and partition included; the first
    read of one decodes the payload in full with :func:`~msgstream.codec.decode`
    (``decode``), so a bad body raises :class:`~msgstream.errors.DecodeError` there
    instead of being skipped by the reader. A plan holds no per-payload state, and not
    the parsed body: a plan lives as long as its messages, and a dozen small dicts per
    message kept alive make every full garbage collection slower.
    """

    __slots__ = ("_decode",)
    header_deferred = frozenset({"collection_name", "partition_name"})

    def __init__(self, cls: type[TsMsg], decode: Callable[[bytes], TsMsg]) -> None:
        super().__init__(cls, "", "", 0, 0, 0)
        self.stamps = _NO_STAMPS  # unchecked: no row timestamps to compare on arrival
        self.stamp_rows = 0
        self._decode = decode

    def build_body(self, payload: bytes) -> dict[str, Any]:
        msg = self._decode(payload)
        return {name: getattr(msg, name) for name in self.deferred}

    @staticmethod
    def of(cls: type[TsMsg], decode: Callable[[bytes], TsMsg]) -> UncheckedDmlPlan | None:
        """The plan for payloads of ``cls``; None if ``cls`` is not Insert or Delete
        (decode those in full)."""
        plan_cls = _UNCHECKED.get(cls)
        return None if plan_cls is None else plan_cls(cls, decode)


class _UncheckedInsertPlan(UncheckedDmlPlan):
    __slots__ = ()
    deferred = InsertPlan.deferred | UncheckedDmlPlan.header_deferred


class _UncheckedDeletePlan(UncheckedDmlPlan):
    __slots__ = ()
    deferred = DeletePlan.deferred | UncheckedDmlPlan.header_deferred


_UNCHECKED: dict[type[TsMsg], type[UncheckedDmlPlan]] = {
    InsertMsg: _UncheckedInsertPlan,
    DeleteMsg: _UncheckedDeletePlan,
}


# --- making plans -----------------------------------------------------------------------

_SCALARS = (str, int, float, bool, type(None))


def _ref(value: Any, base: int, nbytes: int) -> int | None:
    """The absolute offset of a buffer reference holding exactly ``nbytes`` (> 0) bytes."""
    if type(value) is not dict or nbytes <= 0:
        return None
    offset, size = value.get("o"), value.get("n")
    if type(offset) is not int or type(size) is not int or offset < 0 or size != nbytes:
        return None
    return base + offset


def plan_for(cls: type[TsMsg], body: Any, base: int) -> Plan | None:
    """A plan for payloads of ``cls`` whose body is ``body`` (parsed JSON of a payload
    that :func:`~msgstream.codec.decode` accepted), side buffers from ``base`` on; None
    when the type or this body has no plan (decode each such payload in full)."""
    if type(body) is not dict:
        return None
    if cls in StaticPlan.TYPES:
        if all(type(v) in _SCALARS for v in body.values()):
            return StaticPlan(cls, dict(body), base)
        return None
    rows = body.get("rows")
    if type(rows) is not int or rows <= 0:
        return None
    collection, partition = body.get("collection_name"), body.get("partition_name")
    if type(collection) is not str or type(partition) is not str:
        return None
    stamps_at = _ref(body.get("row_timestamps"), base, rows * 8)
    if stamps_at is None:
        return None
    if cls is DeleteMsg:
        keys_at = _ref(body.get("int_keys"), base, rows * 8)
        if keys_at is None:
            return None
        return DeletePlan(collection, partition, rows, stamps_at, keys_at)
    if cls is InsertMsg:
        ids_at = _ref(body.get("row_ids"), base, rows * 8)
        fields = body.get("fields")
        if ids_at is None or type(fields) is not list:
            return None
        columns = []
        for spec in fields:
            column = _column(spec, rows, base)
            if column is None:
                return None
            columns.append(column)
        return InsertPlan(collection, partition, rows, ids_at, stamps_at, columns)
    return None


def _column(spec: Any, rows: int, base: int) -> _Column | None:
    if type(spec) is not dict or type(spec.get("name")) is not str:
        return None
    try:
        dtype = DataType(spec.get("dtype"))
    except ValueError:
        return None
    numpy_dtype = dtype.numpy_dtype
    dim = spec.get("dim")
    if numpy_dtype is None or (dim is not None and (type(dim) is not int or dim <= 0)):
        return None
    if dtype.is_vector != (dim is not None):
        return None
    itemsize = np.dtype(numpy_dtype).itemsize
    at = _ref(spec.get("buf"), base, rows * (dim or 1) * itemsize)
    if at is None:
        return None
    valid_at = None
    if "valid" in spec:
        valid_at = _ref(spec["valid"], base, rows)
        if valid_at is None:
            return None
    return _Column(spec["name"], dtype, rows, dim, at, valid_at)
