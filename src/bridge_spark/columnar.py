"""Insert payloads straight to Arrow columns, many messages at once.

A Spark task reads thousands of small Insert messages (tens of rows each). Decoding each
into an :class:`~msgstream.messages.InsertMsg` costs tens of numpy and Python calls per
message and column -- the per-message cost that dominated a slice read. An
:class:`InsertColumns` instead notes, per message, only where its buffers lie (one
``orjson`` parse of the small JSON body, a few integer checks), and :meth:`build` joins
each column's buffers of every message with one ``bytes.join`` and checks them in whole
numpy / Arrow passes: the row timestamps against the envelopes' time ranges, the packed
offsets, UTF-8 text (Arrow's full validation), JSON texts (one parse of all rows).

It is strict exactly where :func:`msgstream.codec.decode` is, by construction: a payload
that does not fit the fast path (another codec version or type, another collection, a
field missing or of another type, a bad checksum, a malformed reference) is refused by
:meth:`offer`, and a batch that fails any whole-batch check raises :class:`BatchRefused`;
the caller then decodes those payloads one by one, which reports the precise error (and
a :class:`~bridge_spark.errors.SchemaMismatchError` for a message that does not fit the
frame). The rows come out as :class:`~bridge_spark.convert.FrameBuilder` builds them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from operator import add, getitem
from typing import Any, cast

import numpy as np
import numpy.typing as npt
import orjson
import pyarrow as pa

from msgstream import envelope
from msgstream.codec import DEFAULT_MAX_MESSAGE_BYTES, VERSION, intact_envelope
from msgstream.errors import DecodeError
from msgstream.messages import MsgType
from msgstream.packed import check_json  # unpack()'s own JSON check, on many messages
from msgstream.schema import DataType, FieldSchema

from .arrays import numeric_array
from .frames import CHANNEL, MSG_ID, OP, OP_INSERT, PARTITION, ROW_ID, TS, FrameSchema
from .varlen import null_texts

_INSERT = int(MsgType.INSERT)
_SIZE = envelope.SIZE
(_VERSION, _TYPE, _MSG_ID, _TIMESTAMP, _BEGIN, _END) = map(
    envelope.index, ("version", "msg_type", "msg_id", "timestamp", "begin_ts", "end_ts")
)
_INT64_MAX = np.uint64(2**63 - 1)
_INT32_MAX = 2**31 - 1
_PACKED = (DataType.VARCHAR, DataType.JSON, DataType.BINARY)


class BatchRefused(Exception):
    """A whole-batch check failed: decode the batch's payloads one by one instead."""


_cut = cast(Callable[[bytes, slice], bytes], getitem)
"""``payload[a:b]``, for C-level maps."""
_NONE = -1
"""The start of a buffer a message does not have (an optional mask)."""


@dataclass(slots=True)
class _Spans:
    """One buffer of each message collected: where it starts in its payload and its size.

    Plain ints, no view per buffer: a batch holds tens of thousands of buffers until it
    is built, and that many long-lived objects would make the process's garbage
    collections slower (ints and lists of ints are not tracked).
    """

    starts: list[int] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)

    def add(self, start: int, size: int) -> None:
        self.starts.append(start)
        self.sizes.append(size)

    def clear(self) -> None:
        self.starts.clear()
        self.sizes.clear()

    def join(self, payloads: list[bytes]) -> bytes:
        """The buffers, one per payload, joined (``payloads`` in the order collected).

        Each buffer is cut as a bytes copy, not a memoryview: ``join`` holds every piece
        at once, and memoryviews are objects the garbage collector tracks (tens of
        thousands per batch set off 160-250 young collections per 200 k rows; bytes
        set off none), while copying a piece twice costs less."""
        slices = map(slice, self.starts, map(add, self.starts, self.sizes))
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

    def clear(self) -> None:
        for facts in (self.counts, self.msg_ids, self.begins, self.ends, self.channels,
                      self.partitions):  # fmt: skip
            facts.clear()


@dataclass(slots=True)
class _Column:
    """One schema field's buffers, message by message."""

    spec: FieldSchema
    item: np.dtype[Any] | None
    """The numpy type of a numeric or vector column; None for varchar, JSON, binary."""
    width: int
    """Bytes per row of a numeric or vector column."""
    dtype: str = ""
    """The schema's type as a body spells it (``DataType.value``, read once: an enum's
    ``value`` is a property lookup, four per message)."""
    taken: int = -1
    """The offer that last found this field in a body (a field named twice is refused)."""
    values: _Spans = field(default_factory=_Spans)
    """Numeric and vector: the values; packed: the data buffers."""
    offsets: _Spans = field(default_factory=_Spans)
    nulls: list[int] = field(default_factory=list)
    """Packed: where each message's null mask starts (one byte a row), or :data:`_NONE`."""
    valid: list[int] = field(default_factory=list)
    """Where each message's validity mask starts (one byte a row), or :data:`_NONE`."""

    def clear(self) -> None:
        self.values.clear()
        self.offsets.clear()
        self.nulls.clear()
        self.valid.clear()


def _buffer(ref: Any, base: int, area: int, nbytes: int | None) -> int:
    """Where the bytes a buffer reference ``{"o": offset, "n": size}`` points at start in
    the payload, the buffer area starting at ``base`` (``area`` bytes long); exactly
    ``nbytes`` of them unless that is None. :data:`_NONE` if the reference is malformed
    or reaches outside the area."""
    if type(ref) is not dict:
        return _NONE
    offset, size = ref.get("o"), ref.get("n")
    if type(offset) is not int or type(size) is not int or offset < 0 or size < 0:
        return _NONE
    if (nbytes is not None and size != nbytes) or offset + size > area:
        return _NONE
    return base + offset


def _mask(spec: dict[str, Any], key: str, base: int, area: int, rows: int) -> int | None:
    """Where the optional byte mask ``key`` of a field spec starts: :data:`_NONE` if the
    spec has none, None if its reference is malformed."""
    if key not in spec:
        return _NONE
    start = _buffer(spec[key], base, area, rows)
    return None if start == _NONE else start


class InsertColumns:
    """Collects Insert payloads of one frame and builds their rows as one Arrow table."""

    def __init__(self, frame: FrameSchema, max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> None:
        self.frame = frame
        self.max_bytes = max_bytes
        self.enabled = frame.kind.has_inserts
        self._columns = {
            f.name: _Column(
                f,
                None if f.dtype.numpy_dtype is None else np.dtype(f.dtype.numpy_dtype),
                0 if f.dtype.numpy_dtype is None
                else np.dtype(f.dtype.numpy_dtype).itemsize * (f.dim or 1),
                f.dtype.value,
            )
            for f in frame.collection.fields
        }  # fmt: skip
        self._offers = 0
        self._payloads: list[bytes] = []
        self._row_ids = _Spans()
        self._stamps = _Spans()
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
        for column in self._columns.values():
            column.clear()
        for part in (self._payloads, self._row_ids, self._stamps, self._messages):
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
        try:
            body = orjson.loads(memoryview(payload)[_SIZE:base])
        except orjson.JSONDecodeError:
            return False
        taken = self._take(body, base, size - base)
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
        self.rows += rows
        return True

    def _take(self, body: Any, base: int, area: int) -> tuple[int, str] | None:
        """Note the buffers of one body (all or nothing); ``(rows, partition)``."""
        if type(body) is not dict or body.get("collection_name") != self.frame.name:
            return None
        rows, partition, fields = body.get("rows"), body.get("partition_name"), body.get("fields")
        if type(rows) is not int or rows <= 0 or type(partition) is not str:
            return None
        if type(fields) is not list or len(fields) != len(self._columns):
            return None
        row_ids = _buffer(body.get("row_ids"), base, area, rows * 8)
        stamps = _buffer(body.get("row_timestamps"), base, area, rows * 8)
        if row_ids == _NONE or stamps == _NONE:
            return None
        self._offers += 1
        found: list[tuple[_Column, int, int, int, int, int]] = []
        for spec in fields:
            noted = self._field(spec, rows, base, area)
            if noted is None:
                return None  # also a field named twice (and so another missing)
            found.append(noted)
        for column, values, size, offsets, nulls, valid in found:
            column.values.starts.append(values)
            column.values.sizes.append(size)
            if column.item is None:
                column.offsets.starts.append(offsets)
                column.offsets.sizes.append((rows + 1) * 8)
                column.nulls.append(nulls)
            column.valid.append(valid)
        self._row_ids.add(row_ids, rows * 8)
        self._stamps.add(stamps, rows * 8)
        return rows, partition

    def _field(
        self, spec: Any, rows: int, base: int, area: int
    ) -> tuple[_Column, int, int, int, int, int] | None:
        """``(column, values start, values size, offsets start, nulls start, valid
        start)`` of one field's spec (:data:`_NONE` where it has no such buffer)."""
        if type(spec) is not dict:
            return None
        name = spec.get("name")
        column = self._columns.get(name) if type(name) is str else None
        if column is None or column.taken == self._offers:
            return None
        column.taken = self._offers
        if spec.get("dtype") != column.dtype or spec.get("rows") != rows:
            return None
        if spec.get("dim") != column.spec.dim:
            return None
        valid = _mask(spec, "valid", base, area, rows)
        if valid is None:
            return None
        if column.item is not None:
            size = rows * column.width
            values = _buffer(spec.get("buf"), base, area, size)
            return None if values == _NONE else (column, values, size, _NONE, _NONE, valid)
        offs = _buffer(spec.get("offs"), base, area, (rows + 1) * 8)
        data = _buffer(spec.get("data"), base, area, None)
        if offs == _NONE or data == _NONE:
            return None
        nulls = _mask(spec, "nulls", base, area, rows)
        if nulls is None:
            return None
        return column, data, spec["data"]["n"], offs, nulls, valid

    # --- building -------------------------------------------------------------------------
    def build(self) -> pa.Table:
        """The collected rows (in the frame's schema); :class:`BatchRefused` if a
        whole-batch check fails."""
        messages = self._messages
        counts = np.array(messages.counts, np.int64)
        total = int(counts.sum())
        starts = np.zeros(len(counts), np.int64)
        np.cumsum(counts[:-1], out=starts[1:])
        stamps = np.frombuffer(self._stamps.join(self._payloads), "<u8")
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
                arrays.append(self._field_array(self._columns[name], column.type, counts, total))
            elif name == OP:
                arrays.append(pa.array([OP_INSERT], pa.string()).take(np.zeros(total, np.int8)))
            elif name == ROW_ID:
                arrays.append(pa.array(np.frombuffer(self._row_ids.join(self._payloads), "<i8")))
            elif name == TS:
                arrays.append(pa.array(stamps.view(np.int64)))
            elif name == MSG_ID:
                arrays.append(pa.array(np.repeat(np.array(messages.msg_ids, np.int64), counts)))
            elif name == CHANNEL:
                arrays.append(_lookup(self._channels, messages.channels, counts))
            elif name == PARTITION:
                arrays.append(_lookup(self._partitions, messages.partitions, counts))
            else:
                raise AssertionError(f"unexpected metadata column {name!r}")
        return pa.Table.from_arrays(arrays, schema=self.frame.arrow_schema)

    def _field_array(
        self, column: _Column, arrow_type: pa.DataType, counts: npt.NDArray[np.int64], total: int
    ) -> pa.Array:
        spec = column.spec
        null = _joined_mask(self._payloads, column.valid, counts, invert=True)
        if column.item is None:
            return self._packed_array(column, arrow_type, counts, total, null)
        if null is not None and not spec.nullable:
            raise BatchRefused(f"field {spec.name!r} holds nulls")
        values = np.frombuffer(column.values.join(self._payloads), column.item)
        mask = None if null is None else pa.array(null)
        if spec.dtype.is_vector:
            dim = spec.dim or 0
            offsets = pa.array(np.arange(0, (total + 1) * dim, dim, dtype=np.int32))
            return pa.ListArray.from_arrays(offsets, pa.array(values), type=arrow_type, mask=mask)
        return numeric_array(values, arrow_type, null)

    def _packed_array(
        self,
        column: _Column,
        arrow_type: pa.DataType,
        counts: npt.NDArray[np.int64],
        total: int,
        null: npt.NDArray[np.bool_] | None,
    ) -> pa.Array:
        """A varchar, JSON or binary column from every message's offsets and data,
        checked as :func:`msgstream.packed.unpack` checks each message's."""
        spec = column.spec
        offsets = np.frombuffer(column.offsets.join(self._payloads), "<i8")
        sizes = np.array(column.values.sizes, np.int64)
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
        data = column.values.join(self._payloads)
        packed_nulls = _joined_mask(self._payloads, column.nulls, counts, invert=False)
        if packed_nulls is not None:
            null = packed_nulls if null is None else null | packed_nulls
        if spec.dtype is DataType.JSON:
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
        if spec.dtype is DataType.VARCHAR:
            try:
                array.validate(full=True)  # every row's text is UTF-8 on its own
            except pa.ArrowInvalid as exc:
                raise BatchRefused(f"field {spec.name!r}: {exc}") from None
        return array


def _index(names: dict[str, int], name: str) -> int:
    index = names.get(name)
    if index is None:
        index = names[name] = len(names)
    return index


def _lookup(names: dict[str, int], per_msg: list[int], counts: npt.NDArray[np.int64]) -> pa.Array:
    indices = np.repeat(np.array(per_msg, np.int32), counts)
    return pa.array(list(names), pa.string()).take(indices)


def _joined_mask(
    payloads: list[bytes], starts: list[int], counts: npt.NDArray[np.int64], *, invert: bool
) -> npt.NDArray[np.bool_] | None:
    """The messages' byte masks (one byte a row, starting at ``starts`` in ``payloads``)
    joined as one null mask (True = null): null masks as they are, validity masks
    (``invert``: nonzero = valid) inverted; a message without a mask (:data:`_NONE`) has
    no nulls. None: no message has a mask."""
    if starts.count(_NONE) == len(starts):
        return None
    filler = b"\x01" if invert else b"\x00"
    joined = b"".join(
        filler * n if at == _NONE else payload[at : at + n]  # bytes: see _Spans.join
        for payload, at, n in zip(payloads, starts, counts.tolist(), strict=True)
    )
    raw = np.frombuffer(joined, np.uint8)
    mask: npt.NDArray[np.bool_] = raw == 0 if invert else raw != 0
    return mask
