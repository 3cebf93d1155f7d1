"""Insert payloads straight to Arrow columns, many messages at once.

A Spark task reads thousands of small Insert messages (tens of rows each). Decoding each
into an :class:`~msgstream.wire.messages.InsertMsg` costs tens of numpy and Python calls per
message and column -- the per-message cost that dominated a slice read. An
:class:`InsertColumns` instead notes, per message, the envelope's facts and the shape of
its small JSON body (:mod:`~bridge_spark.data.body_shapes`: a body is parsed only when its
shape is new). :meth:`build` reads the numbers of every body (row counts, where each
buffer lies) in a few numpy passes per shape, checks them, joins each column's buffers of
every message with one ``bytes.join`` and checks those in whole numpy / Arrow passes: the
row timestamps against the envelopes' time ranges, the packed offsets, UTF-8 text
(Arrow's full validation), JSON texts (one parse of all rows).

It is strict exactly where :func:`msgstream.wire.codec.decode` is, by construction: a payload
that does not fit the fast path (another codec version or type, another collection, a
field missing or of another type, a bad checksum, a reference that is not two
non-negative integers) is refused by :meth:`offer`, and a batch that fails any
whole-batch check (a buffer reaching past its payload, a size that disagrees with the
row count, ...) raises :class:`BatchRefused`;
the caller then decodes those payloads one by one, which reports the precise error (and
a :class:`~bridge_spark.errors.SchemaMismatchError` for a message that does not fit the
frame). The rows come out as :class:`~bridge_spark.data.convert.FrameBuilder` builds them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import repeat
from operator import getitem
from typing import Any, cast

import numpy as np
import numpy.typing as npt
import orjson
import pyarrow as pa

from msgstream.configuration.limits import DEFAULT_MAX_MESSAGE_BYTES
from msgstream.errors import DecodeError
from msgstream.wire import bodies, envelope
from msgstream.wire.bodies import COLUMN, VALIDITY, BodyLayout, Buffer, ColumnSlots
from msgstream.wire.codec import VERSION, intact_envelope
from msgstream.wire.messages import InsertMsg, MsgType
from msgstream.wire.packed import PackedKind, check_json  # unpack()'s own JSON check, many at once
from msgstream.wire.schema import FieldSchema

from .arrays import numeric_array, text_array, wrapped
from .body_shapes import BodyShape, Path, shape_of
from .frames import CHANNEL, MSG_ID, OP, OP_INSERT, PARTITION, ROW_ID, TS, FrameSchema
from .varlen import null_texts

_INSERT = int(MsgType.INSERT)
_SIZE = envelope.SIZE
(_VERSION, _TYPE, _MSG_ID, _TIMESTAMP, _BEGIN, _END) = map(
    envelope.index, ("version", "msg_type", "msg_id", "timestamp", "begin_ts", "end_ts")
)
_INT64_MAX = np.uint64(2**63 - 1)
_INT32_MAX = 2**31 - 1


class BatchRefused(Exception):
    """A whole-batch check failed: decode the batch's payloads one by one instead."""


_IDS = bodies.ROW_IDS
_STAMPS = bodies.ROW_TIMESTAMPS
_OFFSETS, _DATA, _NULLS = bodies.OFFSETS, bodies.DATA, bodies.NULLS
_cut = cast(Callable[[bytes, slice], bytes], getitem)
"""``payload[a:b]``, for C-level maps."""
_NONE = -1
"""The start of a buffer a message does not have (an optional mask)."""

# A message's *layout* is the numbers of its body, one slot each (where each number goes:
# msgstream.wire.bodies.slots), -1 where it has none.
MAX_SHAPES = 256
"""Bodies an :class:`InsertColumns` tries to learn a shape from (each try re-serialises
and scans the body); after that, a body of a shape not learned is only parsed. Bounds
the cost of bodies that have no shape (not as ``orjson`` writes them) as well."""
_NUMBER_LIMIT = 2**53
"""Larger numbers in a parsed body are refused by :meth:`InsertColumns.offer` (no buffer
of a payload is that large: the checks would refuse them anyway)."""


def _join(
    payloads: list[bytes], starts: npt.NDArray[np.int64], sizes: npt.NDArray[np.int64]
) -> bytes:
    """The buffers, one per payload (``payloads[i][starts[i]:starts[i] + sizes[i]]``),
    joined.

    Each buffer is cut as a bytes copy, not a memoryview: ``join`` holds every piece at
    once, and memoryviews are objects the garbage collector tracks (tens of thousands
    per batch set off young collections; bytes set off none), while copying a piece
    twice costs less."""
    slices = map(slice, starts.tolist(), (starts + sizes).tolist())
    return b"".join(map(_cut, payloads, slices))


@dataclass(slots=True)
class _Messages:
    """What each collected message brings besides its buffers, one list per fact."""

    counts: list[int] = field(default_factory=list)
    msg_ids: list[int] = field(default_factory=list)
    begins: list[int] = field(default_factory=list)
    """The envelopes' time ranges: ``begin_ts`` ..."""
    ends: list[int] = field(default_factory=list)
    """... and ``end_ts``."""
    channels: list[int] = field(default_factory=list)
    """Indexes into the channel names seen."""
    partitions: list[int] = field(default_factory=list)
    """Indexes into the partition names seen."""
    bases: list[int] = field(default_factory=list)
    """Where each payload's body ends and its buffers start."""

    def clear(self) -> None:
        for facts in (self.counts, self.msg_ids, self.begins, self.ends, self.channels,
                      self.partitions, self.bases):  # fmt: skip
            facts.clear()


@dataclass(slots=True)
class _Column:
    """One schema field, where its numbers go in a layout."""

    spec: FieldSchema
    item: np.dtype[Any] | None
    """The numpy type of a numeric or vector column; None for varchar, JSON, binary."""
    dtype: str
    """The schema's type as a body spells it (``DataType.value``, read once: an enum's
    ``value`` is a property lookup)."""
    slots: ColumnSlots
    """Where its numbers go in a layout."""
    buffers: tuple[Buffer, ...]
    """Its buffers, in wire order (its storage's, then its masks)."""
    sizes: tuple[tuple[int, tuple[int, int] | None, bool], ...]
    """Each buffer's slot, its size per row (:meth:`~msgstream.wire.bodies.Buffer.per_row`)
    and whether it is optional."""

    def slot(self, buffer: Buffer) -> int:
        """The slot of ``buffer``'s offset (its size is in the next)."""
        return self.slots.buffers[buffer.key]


@dataclass(frozen=True, slots=True)
class _BodyPlan:
    """What a body that fits the frame says besides its numbers: its partition, and the
    path of the number that goes to each slot of the layout."""

    partition: str
    paths: tuple[tuple[int, Path], ...]


@dataclass(slots=True)
class _Known:
    """A body shape that fits the frame, and the messages of it collected (by index)."""

    shape: BodyShape
    plan: _BodyPlan
    members: list[int] = field(default_factory=list)


class InsertColumns:
    """Collects Insert payloads of one frame and builds their rows as one Arrow table."""

    def __init__(
        self,
        frame: FrameSchema,
        max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        layout: BodyLayout = InsertMsg.BODY,
    ) -> None:
        self.frame = frame
        self.max_bytes = max_bytes
        self.enabled = frame.kind.has_inserts
        self.layout = layout
        """How the bodies read are laid out (:mod:`msgstream.wire.bodies`)."""
        fields = frame.collection.fields
        self._slots = bodies.slots(layout, [f.dtype.storage for f in fields])
        self._rows_path: Path = (layout.rows,)
        self._columns = {
            f.name: _Column(
                f,
                None if f.dtype.numpy_dtype is None else np.dtype(f.dtype.numpy_dtype),
                f.dtype.value,
                slots,
                COLUMN.buffers(f.dtype.storage),
                tuple(
                    (slots.buffers[b.key], b.per_row(f.dim, f.dtype.numpy_dtype), b.optional)
                    for b in COLUMN.buffers(f.dtype.storage)
                ),
            )
            for f, slots in zip(fields, self._slots.columns, strict=True)
        }
        self._sizes = tuple((self._slots.buffers[b.key], b.per_row()) for b in layout.buffers)
        self._width = self._slots.width
        self._shapes: dict[bytes, list[_Known]] = {}
        self._tries = 0
        self._parsed: list[list[int]] = []
        """The layouts of the messages whose bodies were parsed ..."""
        self._parsed_at: list[int] = []
        """... and their indexes."""
        self._payloads: list[bytes] = []
        self._messages = _Messages()
        self._channels: dict[str, int] = {}
        self._partitions: dict[str, int] = {}
        self.rows = 0

    @property
    def payloads(self) -> list[bytes]:
        """The payloads collected since the last :meth:`clear` (to decode them one by one
        when :meth:`build` refuses the batch)."""
        return self._payloads

    def clear(self) -> None:
        """Start a new batch (the shapes learned are kept)."""
        for known in self._shapes.values():
            for shape in known:
                shape.members.clear()
        for part in (self._payloads, self._parsed, self._parsed_at, self._messages):
            part.clear()
        self.rows = 0

    def offer(self, payload: bytes, channel: str, *, checksum_verified: bool = False) -> bool:
        """Take an Insert payload of the frame's collection read from ``channel``; False
        (nothing taken) for any other payload, or one that does not fit the fast path.
        ``checksum_verified``: a stream's reader checked the payload's checksum already."""
        if not self.enabled:
            return False
        size = len(payload)
        if type(payload) is not bytes or not _SIZE <= size <= self.max_bytes:
            return False
        intact = intact_envelope(payload, checksum_verified=checksum_verified)
        if intact is None:
            return False
        head, base = intact
        if head[_VERSION] != VERSION or head[_TYPE] != _INSERT or head[_TIMESTAMP] == 0:
            return False
        body = payload[_SIZE:base]
        index = len(self._payloads)
        for known in self._shapes.get(shape_of(body), ()):
            if known.shape.fits(body):
                rows = known.shape.number(body, self._rows_path)
                if not rows:
                    return False  # no rows, or a leading zero: decoding says which
                known.members.append(index)
                partition = known.plan.partition
                break
        else:
            taken = self._parse(body, index)
            if taken is None:
                return False
            rows, partition = taken
        self._payloads.append(payload)
        messages = self._messages
        messages.counts.append(rows)
        messages.msg_ids.append(head[_MSG_ID])
        messages.begins.append(head[_BEGIN])
        messages.ends.append(head[_END])
        messages.channels.append(_index(self._channels, channel))
        messages.partitions.append(_index(self._partitions, partition))
        messages.bases.append(base)
        self.rows += rows
        return True

    def _parse(self, body: bytes, index: int) -> tuple[int, str] | None:
        """Take the body of the message ``index`` by parsing it (learning its shape);
        ``(rows, partition)``, or None if it does not fit the frame."""
        try:
            parsed = orjson.loads(body)
        except orjson.JSONDecodeError:
            return None
        plan = self._plan(parsed)
        if plan is None:
            return None
        layout = [_NONE] * self._width
        for slot, path in plan.paths:
            value = _number_at(parsed, path)
            if value is None:
                return None
            layout[slot] = value
        if not layout[self._slots.rows]:
            return None
        if self._tries < MAX_SHAPES:
            self._tries += 1
            shape = BodyShape.learn(body, parsed)
            if shape is not None:
                self._shapes.setdefault(shape.key, []).append(_Known(shape, plan))
        self._parsed.append(layout)
        self._parsed_at.append(index)
        return layout[self._slots.rows], plan.partition

    def _plan(self, body: Any) -> _BodyPlan | None:
        """The plan of a parsed body that fits the frame (its numbers not looked at:
        :meth:`_check` checks them for every message at once); None if it does not."""
        layout = self.layout
        if type(body) is not dict or body.get(bodies.COLLECTION) != self.frame.name:
            return None
        partition, fields = body.get(bodies.PARTITION), body.get(layout.columns or "")
        if any(type(body.get(name)) is not str for name in layout.names):
            return None
        if type(partition) is not str or layout.rows not in body:
            return None
        if type(fields) is not list or len(fields) != len(self._columns):
            return None
        paths: list[tuple[int, Path]] = [(self._slots.rows, self._rows_path)]
        for buffer in layout.buffers:
            if not _is_reference(body.get(buffer.key)):
                return None
            paths += _reference_paths(self._slots.buffers[buffer.key], (buffer.key,))
        seen: set[str] = set()
        for number, spec in enumerate(fields):
            if type(spec) is not dict:
                return None
            name = spec.get(COLUMN.name)
            column = self._columns.get(name) if type(name) is str else None
            if column is None or name in seen:
                return None  # also a field named twice (and so another missing)
            seen.add(column.spec.name)
            if spec.get(COLUMN.dtype) != column.dtype or COLUMN.rows not in spec:
                return None
            where: Path = (layout.columns or "", number)
            paths.append((column.slots.rows, (*where, COLUMN.rows)))
            if column.spec.dim is None:
                if spec.get(COLUMN.dim) is not None:
                    return None
            elif COLUMN.dim in spec:
                paths.append((column.slots.dim, (*where, COLUMN.dim)))
            else:
                return None
            for buffer in column.buffers:
                if buffer.optional and buffer.key not in spec:
                    continue  # an optional mask
                if not _is_reference(spec.get(buffer.key)):
                    return None
                paths += _reference_paths(column.slot(buffer), (*where, buffer.key))
        return _BodyPlan(partition, tuple(paths))

    def _layout(self, bases: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """Every collected message's layout, a row each: the parsed ones as noted, the
        others' numbers read shape by shape."""
        layout = np.full((len(self._payloads), self._width), _NONE, np.int64)
        if self._parsed:
            layout[self._parsed_at] = self._parsed
        for shapes in self._shapes.values():
            for known in shapes:
                members = known.members
                if not members:
                    continue
                payloads = map(self._payloads.__getitem__, members)
                bodies = map(slice, repeat(_SIZE), bases[members].tolist())
                numbers = known.shape.numbers(b"".join(map(_cut, payloads, bodies)), len(members))
                if numbers is None:
                    raise BatchRefused("a body writes a number with a leading zero or too long")
                for slot, path in known.plan.paths:
                    layout[members, slot] = numbers[path]
        return layout

    def _check(self, layout: npt.NDArray[np.int64], bases: npt.NDArray[np.int64]) -> None:
        """What decoding checks of every body's numbers, for all at once: row counts,
        dimensions, each buffer's size, and that it ends inside its payload."""
        rows = layout[:, self._slots.rows]
        area = np.fromiter(map(len, self._payloads), np.int64, len(self._payloads)) - bases

        def inside(slot: int, per_row: tuple[int, int] | None, optional: bool = False) -> bool:
            offset, length = layout[:, slot], layout[:, slot + 1]
            fine = offset + length <= area
            if per_row is not None:  # else any size is right
                step, fixed = per_row
                size = rows if step == 1 else rows * step
                fine &= length == (size if fixed == 0 else size + fixed)
            if optional:
                fine |= offset == _NONE
            return bool(fine.all())

        fine = bool((rows > 0).all()) and all(inside(*sized) for sized in self._sizes)
        for column in self._columns.values():
            if not fine:
                break
            spec = column.spec
            fine = bool((layout[:, column.slots.rows] == rows).all())
            if spec.dim is not None:
                fine &= bool((layout[:, column.slots.dim] == spec.dim).all())
            for sized in column.sizes:
                fine &= inside(*sized)
        if not fine:
            raise BatchRefused(
                "a body's numbers are not its buffers' (a size that is not its rows', a "
                "buffer past the payload's end, another dimension)"
            )

    # --- building -------------------------------------------------------------------------
    def build(self) -> pa.Table:
        """The collected rows (in the frame's schema); :class:`BatchRefused` if a
        whole-batch check fails."""
        messages = self._messages
        counts = np.array(messages.counts, np.int64)
        total = int(counts.sum())
        bases = np.array(messages.bases, np.int64)
        layout = self._layout(bases)
        self._check(layout, bases)
        laid = _Laid(self._payloads, bases, layout)
        starts = np.zeros(len(counts), np.int64)
        np.cumsum(counts[:-1], out=starts[1:])
        stamps = np.frombuffer(self._joined(laid, _STAMPS), _STAMPS.item_type)
        if not (
            (np.minimum.reduceat(stamps, starts) == np.array(messages.begins, np.uint64)).all()
            and (np.maximum.reduceat(stamps, starts) == np.array(messages.ends, np.uint64)).all()
        ):
            raise BatchRefused("a message's row timestamps are not its envelope's time range")
        if stamps.max() > _INT64_MAX:
            raise BatchRefused("a row timestamp does not fit a signed 64-bit long")
        arrays: list[pa.Array] = []
        for column in self.frame.columns:
            name = column.name
            if column.dtype is not None:
                arrays.append(
                    self._field_array(self._columns[name], column.type, counts, total, laid)
                )
            elif name == OP:
                arrays.append(text_array([OP_INSERT]).take(wrapped(np.zeros(total, np.int8))))
            elif name == ROW_ID:
                arrays.append(wrapped(np.frombuffer(self._joined(laid, _IDS), _IDS.item_type)))
            elif name == TS:
                arrays.append(wrapped(stamps.view(np.int64)))
            elif name == MSG_ID:
                arrays.append(wrapped(np.repeat(np.array(messages.msg_ids, np.int64), counts)))
            elif name == CHANNEL:
                arrays.append(_lookup(self._channels, messages.channels, counts))
            elif name == PARTITION:
                arrays.append(_lookup(self._partitions, messages.partitions, counts))
            else:
                raise AssertionError(f"unexpected metadata column {name!r}")
        return pa.Table.from_arrays(arrays, schema=self.frame.arrow_schema)

    def _joined(self, laid: _Laid, buffer: Buffer) -> bytes:
        """The per-row ``buffer`` of the body of every message, joined."""
        return laid.join(self._slots.buffers[buffer.key])

    def _field_array(
        self,
        column: _Column,
        arrow_type: pa.DataType,
        counts: npt.NDArray[np.int64],
        total: int,
        laid: _Laid,
    ) -> pa.Array:
        spec = column.spec
        null = _joined_mask(laid, column.slot(VALIDITY), counts, VALIDITY)
        if column.item is None:
            return self._packed_array(column, arrow_type, counts, total, null, laid)
        if null is not None and not spec.nullable:
            raise BatchRefused(f"field {spec.name!r} holds nulls")
        values = np.frombuffer(laid.join(column.slot(bodies.FIXED_VALUES)), column.item)
        mask = None if null is None else wrapped(null)
        if spec.dtype.is_vector:
            dim = spec.dim or 0
            offsets = wrapped(np.arange(0, (total + 1) * dim, dim, dtype=np.int32))
            return pa.ListArray.from_arrays(offsets, wrapped(values), type=arrow_type, mask=mask)
        return numeric_array(values, arrow_type, null)

    def _packed_array(
        self,
        column: _Column,
        arrow_type: pa.DataType,
        counts: npt.NDArray[np.int64],
        total: int,
        null: npt.NDArray[np.bool_] | None,
        laid: _Laid,
    ) -> pa.Array:
        """A varchar, JSON or binary column from every message's offsets and data,
        checked as :func:`msgstream.wire.packed.unpack` checks each message's."""
        spec = column.spec
        offsets = np.frombuffer(laid.join(column.slot(_OFFSETS)), _OFFSETS.item_type)
        sizes = laid.layout[:, column.slot(_DATA) + 1]
        lasts = np.cumsum(counts + 1) - 1
        firsts = lasts - counts
        if not ((offsets[firsts] == 0).all() and (offsets[lasts] == sizes).all()):
            raise BatchRefused(f"field {spec.name!r}: offsets do not span their buffer")
        steps = np.diff(offsets)
        lengths = np.delete(steps, lasts[:-1])  # drop the steps between two messages
        if (lengths < 0).any():
            raise BatchRefused(f"field {spec.name!r}: offsets decrease")
        whole = np.zeros(total + 1, np.int64)
        np.cumsum(lengths, out=whole[1:])
        if whole[-1] > _INT32_MAX:
            raise BatchRefused(f"field {spec.name!r}: more than 2 GiB of values in one batch")
        data = laid.join(column.slot(_DATA))
        packed_nulls = _joined_mask(laid, column.slot(_NULLS), counts, _NULLS)
        if packed_nulls is not None:
            null = packed_nulls if null is None else null | packed_nulls
        if spec.dtype.packed is PackedKind.JSON:
            try:
                check_json(whole, memoryview(data), f"field {spec.name!r}")
            except DecodeError as exc:
                raise BatchRefused(str(exc)) from None
            texts = null_texts(np.frombuffer(data, np.uint8), whole, lengths)
            null = texts if null is None else null | texts
        null_count = 0 if null is None else int(null.sum())
        if null_count and not spec.nullable:
            raise BatchRefused(f"field {spec.name!r} holds nulls")
        validity = None
        if null is not None and null_count:
            validity = pa.py_buffer(np.packbits(~null, bitorder="little"))
        array = pa.Array.from_buffers(
            arrow_type,
            total,
            [validity, pa.py_buffer(whole.astype(np.int32)), pa.py_buffer(data)],
            null_count=null_count,
        )
        if spec.dtype.packed is PackedKind.TEXT:
            try:
                array.validate(full=True)  # every row's text is UTF-8 on its own
            except pa.ArrowInvalid as exc:
                raise BatchRefused(f"field {spec.name!r}: {exc}") from None
        return array


@dataclass(slots=True)
class _Laid:
    """The collected payloads, where their bodies end and their layouts: any buffer of
    every message, joined."""

    payloads: list[bytes]
    bases: npt.NDArray[np.int64]
    layout: npt.NDArray[np.int64]

    def join(self, slot: int) -> bytes:
        """The buffer whose offset is in ``slot`` (its size in the next), of every message."""
        return _join(self.payloads, self.bases + self.layout[:, slot], self.layout[:, slot + 1])

    def starts(self, slot: int) -> list[int]:
        """Where the optional buffer of ``slot`` starts in each payload (:data:`_NONE`:
        that message has none)."""
        offsets = self.layout[:, slot]
        found: list[int] = np.where(offsets == _NONE, _NONE, self.bases + offsets).tolist()
        return found


def _is_reference(ref: Any) -> bool:
    """A buffer reference ``{"o": offset, "n": size}`` (its numbers checked later)."""
    return type(ref) is dict and "o" in ref and "n" in ref


def _reference_paths(slot: int, where: Path) -> list[tuple[int, Path]]:
    """Where a buffer reference's numbers are, and their slots: the offset in ``slot``,
    the size in the next."""
    return [(slot, (*where, "o")), (slot + 1, (*where, "n"))]


def _number_at(body: Any, path: Path) -> int | None:
    """The number at ``path`` of a parsed body, if it is a non-negative integer (not a
    bool) small enough to be a size or an offset."""
    value = body
    for key in path:
        value = value[key]
    if type(value) is not int or not 0 <= value < _NUMBER_LIMIT:
        return None
    return value


def _index(names: dict[str, int], name: str) -> int:
    index = names.get(name)
    if index is None:
        index = names[name] = len(names)
    return index


def _lookup(names: dict[str, int], per_msg: list[int], counts: npt.NDArray[np.int64]) -> pa.Array:
    indices = np.repeat(np.array(per_msg, np.int32), counts)
    return text_array(list(names)).take(wrapped(indices))


def _joined_mask(
    laid: _Laid, slot: int, counts: npt.NDArray[np.int64], mask: Buffer
) -> npt.NDArray[np.bool_] | None:
    """The messages' byte masks in ``slot`` (one byte a row, an optional buffer) joined as
    one null mask (True = null): null masks as they are, validity masks (``null_when``
    False) inverted; a message without the mask has no nulls. None: no message has it."""
    starts = laid.starts(slot)
    if starts.count(_NONE) == len(starts):
        return None
    invert = mask.null_when is False
    filler = b"\x01" if invert else b"\x00"
    joined = b"".join(
        filler * n if at == _NONE else payload[at : at + n]  # bytes: see _join
        for payload, at, n in zip(laid.payloads, starts, counts.tolist(), strict=True)
    )
    raw = np.frombuffer(joined, np.uint8)
    found: npt.NDArray[np.bool_] = raw == 0 if invert else raw != 0
    return found
