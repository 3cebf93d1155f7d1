"""Decode plans: what a message body says, parsed and validated once, reused for every
payload that carries the same body.

The JSON part of a body describes a message's layout, not its rows: a Delete with int64
keys says "collection c, partition p, n rows, timestamps at offset o1, keys at offset o2"
and its data sits in the side buffers. Consecutive messages of one producer repeat that
JSON byte for byte. A stream that reads many of them fully decodes the first one (every
check of :func:`msgstream.wire.codec.decode`), keeps a plan keyed by (type, body bytes), and
for the next payloads of that type with the same body checks the envelope, the checksum
and that the buffer area is large enough: all that can differ, since the rest of
``decode``'s checks depend on the body bytes alone.

A plan builds a message in one step, and defers the numpy views over its buffers, its
``hash_keys`` list and its ``position`` until first used: the message keeps its
:attr:`~msgstream.wire.messages.TsMsg.lazy_body` (see :mod:`msgstream.wire.messages`). The built
message equals what :func:`~msgstream.wire.codec.decode` returns for the same payload. Types
and bodies without a plan (a Delete with string keys, an Insert with varchar, JSON or
binary columns, a CreateCollection, user types) are decoded in full, as before.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np

from . import bodies, envelope
from .lazy import DeferredBody
from .messages import (
    CreatePartitionMsg,
    DeleteMsg,
    DropCollectionMsg,
    DropPartitionMsg,
    InsertMsg,
    TimeTickMsg,
    TsMsg,
)
from .schema import FieldData

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
_STAMPS = bodies.ROW_TIMESTAMPS
_STAMP = np.dtype(_STAMPS.dtype)
_VALUES = bodies.FIXED_VALUES
_VALIDITY = bodies.VALIDITY
_MASK = np.dtype(_VALIDITY.item_type)
_NAMES = (bodies.COLLECTION, bodies.PARTITION)
_NOTHING_SHARED: Mapping[str, Any] = MappingProxyType({})


def kind_of(msg_type: int) -> int:
    if msg_type == TIME_TICK:
        return KIND_TICK
    return KIND_DML if msg_type in DML_TYPES else KIND_DATA


class Plan:
    """Builds the message of one validated payload.

    ``code`` is the message type the plan is for, ``kind`` its barrier row kind, ``need``
    the smallest payload the plan fits (its buffers must lie inside). ``ts_field`` is the
    envelope field the barrier orders by (its :func:`msgstream.wire.envelope.index`):
    ``end_ts`` for DML, whose envelope carries the range of its rows, else ``timestamp``.
    """

    __slots__ = ("code", "kind", "need", "shared", "stamp_rows", "stamps", "ts_field")

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
        self.shared: Mapping[str, Any] = _NOTHING_SHARED
        """Body fields every message of the plan has the same value of, which a message
        built by the plan takes when first read (:class:`msgstream.wire.lazy.DeferredBody`)."""

    def ts_range_agrees(self, payload: bytes, begin_ts: int, end_ts: int) -> bool:
        """Whether ``payload``'s row timestamps span exactly ``[begin_ts, end_ts]`` (its
        envelope's range); True for a plan without row timestamps."""
        rows = self.stamp_rows
        if not rows:
            return True
        stamps = np.frombuffer(payload[self.stamps], _STAMP, rows)
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
    (other plans are built row by row).

    A plan is made for a body whose buffers :func:`msgstream.wire.bodies.locate` placed (or,
    for bodies not read, none: :class:`UncheckedDmlPlan`); its arrays are views of them,
    made by the function generated from its message's body layout
    (:func:`msgstream.wire.bodies.body_viewer`, the plan's ``build_body``)."""

    __slots__ = ("cls", "offsets", "rows")
    layout: ClassVar[bodies.BodyLayout]
    """The layout of the bodies this class plans."""

    @classmethod
    def for_body(cls, layout: bodies.BodyLayout) -> type[DmlPlan]:
        """This kind of plan for bodies laid out as ``layout``: the class itself for its
        own layout, else a subclass (made once) whose ``build_body`` is generated from
        ``layout``."""
        if layout == cls.layout:
            return cls
        made = _LAID_OUT.get((cls, layout))
        if made is None:
            made = _LAID_OUT[cls, layout] = type(
                cls.__name__,
                (cls,),
                {
                    "__slots__": (),
                    "layout": layout,
                    "deferred": frozenset(layout.viewed),
                    "build_body": bodies.body_viewer(layout),
                },
            )
        return made

    def __init__(self, cls: type[TsMsg], placed: bodies.Placed | None) -> None:
        super().__init__(cls.MSG_TYPE, 0 if placed is None else placed.end)
        self.cls = cls
        self.rows: tuple[int] = (0,)
        """The arrays' shape."""
        self.offsets: tuple[int, ...] = ()
        """Where each buffer is in the payload (:func:`msgstream.wire.bodies.placed_buffers`)."""
        if placed is None:
            return
        self.shared = dict(zip(_NAMES, placed.names, strict=True))
        self.rows = (placed.rows,)
        self.offsets = tuple(at for _, at in placed.buffers)
        at = placed.at(_STAMPS)
        self.stamps = slice(at, at + (_STAMPS.nbytes(placed.rows) or 0))
        self.stamp_rows = placed.rows

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
        # garbage collector), and no call per message. The size and the collection and
        # partition names are left to their first read (DeferredSize, ``shared``).
        cls = self.cls
        out: list[Any] = []
        add = out.append
        for msg_id, stamp, source, payload, at in zip(
            msg_ids, stamps, sources, payloads, ats, strict=True
        ):
            msg: Any = _new(cls)
            msg.msg_id = msg_id
            msg.timestamp = stamp
            msg.source_id = source
            msg.lazy_body = (self, payload, at, where)
            add(msg)
        return out


class DeletePlan(DmlPlan):
    """A Delete with int64 keys: timestamps and keys are views into the payload."""

    __slots__ = ()
    layout = DeleteMsg.BODY
    deferred = frozenset(layout.viewed)
    build_body = bodies.body_viewer(layout)  # type: ignore[assignment]


class _Column:
    """One fixed-width column of an Insert plan (numeric, bool or vectors)."""

    __slots__ = ("at", "dim", "dtype", "item", "name", "rows", "shape", "valid_at")

    def __init__(self, placed: bodies.PlacedColumn, rows: int) -> None:
        self.name = placed.name
        self.dtype = placed.dtype
        self.item = np.dtype(placed.dtype.numpy_dtype)
        self.dim = placed.dim
        self.rows = (rows,)
        self.shape = (rows,) if placed.dim is None else (rows, placed.dim)
        offsets = {buffer.key: at for buffer, at in placed.buffers}
        self.at = offsets[_VALUES.key]
        self.valid_at = offsets.get(_VALIDITY.key)
        """Where its validity mask is (None: it has none)."""

    def build(self, payload: bytes) -> FieldData:
        column = FieldData.__new__(FieldData)
        column.name = self.name
        column.dtype = self.dtype
        column.values = np.ndarray(self.shape, self.item, payload, self.at)
        column.dim = self.dim
        valid_at = self.valid_at
        column.valid = None if valid_at is None else np.ndarray(self.rows, _MASK, payload, valid_at)
        return column


class InsertPlan(DmlPlan):
    """An Insert whose columns are all fixed-width: numeric, bool or vectors (no packed
    values, whose bytes are checked on every read)."""

    __slots__ = ("columns",)
    layout = InsertMsg.BODY
    deferred = frozenset(layout.viewed)
    build_body = bodies.body_viewer(layout)  # type: ignore[assignment]

    def __init__(self, cls: type[TsMsg], placed: bodies.Placed) -> None:
        super().__init__(cls, placed)
        self.columns = [_Column(column, placed.rows) for column in placed.columns]


class UncheckedDmlPlan(DmlPlan):
    """Insert or Delete payloads whose bodies were not read: only their envelopes and
    checksums were checked. Made for a stream asked to leave such bodies unchecked
    (``unchecked_bodies``), for a consumer that reads the payloads itself (the Spark
    bridge turns many Inserts into Arrow columns in whole-batch passes, with checks of
    its own): the reader parses no body, and one plan serves every payload of its type.

    Its message defers every body field, collection and partition included; the first
    read of one decodes the payload in full with :func:`~msgstream.wire.codec.decode`
    (``decode``), so a bad body raises :class:`~msgstream.errors.DecodeError` there
    instead of being skipped by the reader. A plan holds no per-payload state, and not
    the parsed body: a plan lives as long as its messages, and a dozen small dicts per
    message kept alive make every full garbage collection slower.
    """

    __slots__ = ("_decode",)

    def __init__(self, cls: type[TsMsg], decode: Callable[[bytes], TsMsg]) -> None:
        super().__init__(cls, None)  # no row timestamps to compare on arrival
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
    deferred = frozenset(InsertMsg.BODY.attrs)


class _UncheckedDeletePlan(UncheckedDmlPlan):
    __slots__ = ()
    deferred = frozenset(DeleteMsg.BODY.attrs)


_UNCHECKED: dict[type[TsMsg], type[UncheckedDmlPlan]] = {
    InsertMsg: _UncheckedInsertPlan,
    DeleteMsg: _UncheckedDeletePlan,
}


# --- making plans -----------------------------------------------------------------------

_SCALARS = (str, int, float, bool, type(None))
_LAID_OUT: dict[tuple[type[DmlPlan], bodies.BodyLayout], type[DmlPlan]] = {}
_PLAN_CLASSES: dict[type[TsMsg], type[DmlPlan] | None] = {}


def plan_for(cls: type[TsMsg], body: Any, base: int) -> Plan | None:
    """A plan for payloads of ``cls`` whose body is ``body`` (parsed JSON of a payload
    that :func:`~msgstream.wire.codec.decode` accepted), side buffers from ``base`` on; None
    when the type or this body has no plan (decode each such payload in full)."""
    if type(body) is not dict:
        return None
    if cls in StaticPlan.TYPES:
        if all(type(v) in _SCALARS for v in body.values()):
            return StaticPlan(cls, dict(body), base)
        return None
    plan = _PLAN_CLASSES[cls] if cls in _PLAN_CLASSES else _plan_class(cls)
    if plan is None:
        return None
    placed = bodies.locate(plan.layout, body, base)
    return None if placed is None else plan(cls, placed)


def _plan_class(cls: type[TsMsg]) -> type[DmlPlan] | None:
    """The plan class for payloads of ``cls``, if it declares its own body layout
    (``BODY``: Insert, Delete) and defers the fields made from its buffers and columns
    (:func:`msgstream.wire.lazy.deferred`); None: decode its payloads in full. A plan gives its
    messages their collection and partition itself (its ``shared`` fields), so a layout
    with other strings has none."""
    layout = cls.__dict__.get("BODY")
    found = None
    if (
        isinstance(layout, bodies.BodyLayout)
        and layout.names == _NAMES
        and all(
            any(isinstance(vars(k).get(name), DeferredBody) for k in cls.__mro__)
            for name in layout.viewed
        )
    ):
        found = (DeletePlan if layout.columns is None else InsertPlan).for_body(layout)
    _PLAN_CLASSES[cls] = found
    return found
