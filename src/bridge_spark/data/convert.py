"""Insert and Delete messages to one Arrow table, column by column.

A :class:`FrameBuilder` collects messages (checking each against the collection schema as
it arrives) and :meth:`FrameBuilder.build` concatenates their columnar buffers: numeric
and vector columns with ``numpy.concatenate``, varchar, binary and JSON by joining their
packed buffers (:mod:`~bridge_spark.data.varlen`). Work is per message and per
column, never a Python loop per row.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from msgstream.wire.messages import DeleteMsg, InsertMsg, TsMsg
from msgstream.wire.pack import MsgPack
from msgstream.wire.packed import PackedValues
from msgstream.wire.schema import DataType, FieldData, FieldSchema

from ..errors import SchemaMismatchError
from .arrays import numeric_array, text_array, wrapped
from .frames import (
    CHANNEL,
    MSG_ID,
    OP,
    OP_DELETE,
    OP_INSERT,
    PARTITION,
    ROW_ID,
    TS,
    VECTOR_ARROW_TYPE,
    Column,
    FrameSchema,
)
from .varlen import packed_array

_INT64_MAX = np.uint64(2**63 - 1)


def _ops(index: int, rows: int) -> pa.Array:
    """``rows`` copies of ``_op`` value ``index`` (insert 0, delete 1)."""
    return text_array([OP_INSERT, OP_DELETE]).take(wrapped(np.full(rows, index, np.int8)))


@dataclass(slots=True)
class _Insert:
    msg: InsertMsg
    channel: int
    partition: int
    columns: dict[str, FieldData]


@dataclass(slots=True)
class _Delete:
    msg: DeleteMsg
    channel: int
    partition: int


def describe(msg: TsMsg, channel: str = "") -> str:
    """``InsertMsg(msg_id=3, collection='c') at MessageID ...``: where a message came from."""
    collection = getattr(msg, "collection_name", "")
    text = f"{type(msg).__name__}(msg_id={msg.msg_id}, collection={collection!r})"
    position = msg.position
    if position is not None and (not channel or position.channel == channel):
        text += f" at MessageID {position.msg_id.hex()}"
    return text


class FrameBuilder:
    """Accumulates the DML messages of one frame and turns them into an Arrow table.

    Messages of other collections are ignored (a channel may carry several), as are
    deletes in the ``inserts`` frame and inserts in the ``deletes`` frame. A message whose
    columns do not fit the schema raises :class:`SchemaMismatchError` naming the field,
    the message and the channel.
    """

    def __init__(self, frame: FrameSchema) -> None:
        self.frame = frame
        self._fields: dict[str, FieldSchema] = {f.name: f for f in frame.collection.fields}
        self._required = tuple(f for f in frame.collection.fields if not f.nullable)
        self._pk = frame.collection.primary_field
        self._channels: dict[str, int] = {}
        self._partitions: dict[str, int] = {}
        self._inserts: list[_Insert] = []
        self._deletes: list[_Delete] = []
        self.insert_rows = 0
        self.delete_rows = 0

    @property
    def rows(self) -> int:
        """Rows the built table will have."""
        return self.insert_rows + self.delete_rows

    def clear(self) -> None:
        self._inserts.clear()
        self._deletes.clear()
        self.insert_rows = self.delete_rows = 0

    # --- collecting -----------------------------------------------------------------------
    def add_pack(self, pack: MsgPack) -> None:
        """Add every message of a consumed pack (channel taken from its position)."""
        for msg in pack.msgs:
            position = msg.position
            self.add(msg, position.channel if position is not None else "")

    def add(self, msg: TsMsg, channel: str) -> int:
        """Add one message read from ``channel``; return the rows it contributes."""
        if isinstance(msg, InsertMsg):
            rows = self._wanted_rows(msg, self.frame.kind.has_inserts)
            if rows == 0:
                return 0
            columns = self._check_insert(msg, channel)
            self._inserts.append(
                _Insert(msg, self._index(self._channels, channel), self._partition(msg), columns)
            )
            self.insert_rows += rows
            return rows
        if isinstance(msg, DeleteMsg):
            rows = self._wanted_rows(msg, self.frame.kind.has_deletes)
            if rows == 0:
                return 0
            self._check_delete(msg, channel)
            self._deletes.append(
                _Delete(msg, self._index(self._channels, channel), self._partition(msg))
            )
            self.delete_rows += rows
            return rows
        return 0

    def _wanted_rows(self, msg: InsertMsg | DeleteMsg, kind_wanted: bool) -> int:
        """The rows ``msg`` brings to this frame: 0 unless the frame collects its kind
        and its collection."""
        if not kind_wanted or msg.collection_name != self.frame.name:
            return 0
        return msg.num_rows

    @staticmethod
    def _index(names: dict[str, int], name: str) -> int:
        index = names.get(name)
        if index is None:
            index = names[name] = len(names)
        return index

    def _partition(self, msg: InsertMsg | DeleteMsg) -> int:
        return self._index(self._partitions, msg.partition_name)

    def _check_insert(self, msg: InsertMsg, channel: str) -> dict[str, FieldData]:
        columns: dict[str, FieldData] = {}
        for column in msg.fields:
            name = column.name
            spec = self._fields.get(name)
            if spec is None:
                raise SchemaMismatchError(
                    name,
                    f"is not a field of collection {self.frame.name!r} "
                    f"(fields: {list(self._fields)})",
                    channel=channel,
                    where=describe(msg, channel),
                )
            if name in columns:
                raise SchemaMismatchError(
                    name, "appears twice", channel=channel, where=describe(msg, channel)
                )
            if column.dtype is not spec.dtype:
                raise SchemaMismatchError(
                    name,
                    f"has type {column.dtype.value}, but the collection schema says "
                    f"{spec.dtype.value}",
                    channel=channel,
                    where=describe(msg, channel),
                )
            if spec.dtype.is_vector and column.dim != spec.dim:
                raise SchemaMismatchError(
                    name,
                    f"has vectors of dim {column.dim}, but the collection schema says {spec.dim}",
                    channel=channel,
                    where=describe(msg, channel),
                )
            if not spec.nullable and _has_nulls(column):
                raise SchemaMismatchError(
                    name,
                    "holds nulls, but the field is not nullable",
                    channel=channel,
                    where=describe(msg, channel),
                )
            columns[name] = column
        for spec in self._required:
            if spec.name not in columns:
                raise SchemaMismatchError(
                    spec.name,
                    "is missing, and the field is not nullable",
                    channel=channel,
                    where=describe(msg, channel),
                )
        return columns

    def _check_delete(self, msg: DeleteMsg, channel: str) -> None:
        pk = self._pk
        assert pk is not None  # FrameSchema guarantees it for frames with deletes
        keys_are_int = isinstance(msg.primary_keys, np.ndarray)
        if keys_are_int != (pk.dtype is DataType.INT64):
            got = "int64" if keys_are_int else "varchar"
            raise SchemaMismatchError(
                pk.name,
                f"delete keys are {got}, but the primary key is {pk.dtype.value}",
                channel=channel,
                where=describe(msg, channel),
            )

    # --- building -------------------------------------------------------------------------
    def build(self) -> pa.Table:
        """One table holding every collected row: inserts first, then deletes, each in
        the order their messages were added (sort by ``_ts`` for time order)."""
        schema = self.frame.arrow_schema
        tables = []
        if self._inserts:
            tables.append(self._insert_table())
        if self._deletes:
            tables.append(self._delete_table())
        if not tables:
            return schema.empty_table()
        return tables[0] if len(tables) == 1 else pa.concat_tables(tables)

    def _lookup(self, names: dict[str, int]) -> pa.Array:
        return text_array(list(names))

    def _repeat(self, values: Iterable[int], counts: npt.NDArray[np.int64]) -> pa.Array:
        per_msg = np.fromiter(values, dtype=np.int64, count=len(counts))
        return wrapped(np.repeat(per_msg, counts))

    def _meta(
        self,
        column: Column,
        items: Sequence[_Insert] | Sequence[_Delete],
        counts: npt.NDArray[np.int64],
    ) -> pa.Array:
        name = column.name
        if name == TS:
            stamps = np.concatenate([it.msg.timestamps for it in items])
            if len(stamps) and stamps.max() > _INT64_MAX:
                raise SchemaMismatchError(TS, "a row timestamp does not fit a signed 64-bit long")
            return wrapped(stamps.view(np.int64))
        if name == CHANNEL:
            return self._lookup(self._channels).take(
                self._repeat((i.channel for i in items), counts)
            )
        if name == PARTITION:
            return self._lookup(self._partitions).take(
                self._repeat((i.partition for i in items), counts)
            )
        if name == MSG_ID:
            return self._repeat((i.msg.msg_id for i in items), counts)
        raise AssertionError(f"unexpected metadata column {name!r}")

    def _insert_table(self) -> pa.Table:
        items = self._inserts
        counts = np.fromiter((it.msg.num_rows for it in items), np.int64, len(items))
        total = int(counts.sum())
        arrays: list[pa.Array] = []
        for column in self.frame.columns:
            if column.dtype is not None:
                arrays.append(_field_array(column, self._fields[column.name], items, counts))
            elif column.name == OP:
                arrays.append(_ops(0, total))
            elif column.name == ROW_ID:
                arrays.append(wrapped(np.concatenate([it.msg.row_ids for it in items])))
            else:
                arrays.append(self._meta(column, items, counts))
        return pa.Table.from_arrays(arrays, schema=self.frame.arrow_schema)

    def _delete_table(self) -> pa.Table:
        items = self._deletes
        counts = np.fromiter((it.msg.num_rows for it in items), np.int64, len(items))
        total = int(counts.sum())
        pk = self._pk
        assert pk is not None
        arrays: list[pa.Array] = []
        for column in self.frame.columns:
            if column.name == pk.name:
                arrays.append(_delete_keys(pk, items))
            elif column.dtype is not None or column.name == ROW_ID:
                arrays.append(pa.nulls(total, column.type))
            elif column.name == OP:
                arrays.append(_ops(1, total))
            else:
                arrays.append(self._meta(column, items, counts))
        return pa.Table.from_arrays(arrays, schema=self.frame.arrow_schema)


def _has_nulls(column: FieldData) -> bool:
    if column.valid is not None and not bool(column.valid.all()):
        return True
    values = column.values
    if isinstance(values, PackedValues):
        return values.has_nulls()
    return isinstance(values, list) and None in values


def _delete_keys(pk: FieldSchema, items: Sequence[_Delete]) -> pa.Array:
    if pk.dtype is DataType.INT64:
        keys = np.concatenate([np.asarray(it.msg.primary_keys) for it in items])
        return numeric_array(keys, pa.int64(), None)
    return text_array(list(chain.from_iterable(it.msg.primary_keys for it in items)))


def _validity(
    pieces: Sequence[FieldData | None], counts: npt.NDArray[np.int64]
) -> npt.NDArray[np.bool_] | None:
    """The concatenated validity (False = null) of a column, or None when all are valid."""
    if all(p is not None and p.valid is None for p in pieces):
        return None
    parts = []
    for piece, rows in zip(pieces, counts.tolist(), strict=True):
        if piece is None:
            parts.append(np.zeros(rows, np.bool_))
        elif piece.valid is None:
            parts.append(np.ones(rows, np.bool_))
        else:
            parts.append(piece.valid)
    return np.concatenate(parts)


def _field_array(
    column: Column,
    spec: FieldSchema,
    items: Sequence[_Insert],
    counts: npt.NDArray[np.int64],
) -> pa.Array:
    dtype = spec.dtype
    pieces = [it.columns.get(column.name) for it in items]
    valid = _validity(pieces, counts)
    mask = None if valid is None else ~valid
    numpy_dtype = dtype.numpy_dtype
    if dtype.is_vector:
        dim = spec.dim or 0
        flat = np.concatenate(
            [
                np.zeros(n * dim, np.float32) if p is None else np.asarray(p.values).reshape(-1)
                for p, n in zip(pieces, counts.tolist(), strict=True)
            ]
        )
        rows = len(flat) // dim
        offsets = wrapped(np.arange(0, (rows + 1) * dim, dim, dtype=np.int32))
        return pa.ListArray.from_arrays(
            offsets,
            wrapped(flat),
            type=VECTOR_ARROW_TYPE,
            mask=None if mask is None else wrapped(mask),
        )
    if numpy_dtype is not None:
        values = np.concatenate(
            [
                np.zeros(n, numpy_dtype) if p is None else np.asarray(p.values)
                for p, n in zip(pieces, counts.tolist(), strict=True)
            ]
        )
        return numeric_array(values, column.type, mask)
    parts: list[Sequence[Any] | int] = []
    for piece, rows in zip(pieces, counts.tolist(), strict=True):
        if piece is None:
            parts.append(rows)
        else:
            assert not isinstance(piece.values, np.ndarray)  # numeric types are the arrays
            parts.append(piece.values)
    assert dtype.packed is not None  # the others are the arrays
    return packed_array(dtype.packed, column.type, parts, mask)


def table_from_packs(frame: FrameSchema, packs: Iterable[MsgPack]) -> pa.Table:
    """One table from consumed packs."""
    builder = FrameBuilder(frame)
    for pack in packs:
        builder.add_pack(pack)
    return builder.build()
