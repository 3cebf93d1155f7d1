"""Frame schemas: which columns a collection's rows become, in Arrow and in Spark.

Three frames can be built from a collection schema:

- ``inserts``: the collection's fields, then ``_row_id``, ``_ts``, ``_channel``,
  ``_msg_id``, ``_partition``;
- ``deletes``: the primary key (named after the primary field), ``_ts``, ``_channel``,
  ``_msg_id``, ``_partition``;
- ``changes``: both in one frame, told apart by ``_op`` (``"insert"`` / ``"delete"``); a
  delete row carries only its primary key (every other field is null).

``_ts`` is the row's hybrid timestamp, ``_channel`` the channel it was read from,
``_msg_id`` the ``msg_id`` of the Insert/Delete message that carried it and
``_partition`` that message's partition name. Float vectors are ``array<float>``, JSON is
a string of JSON text. The Arrow schema is exactly what PySpark derives from the Spark
schema (``to_arrow_schema``), so Arrow batches pass Spark's schema check unchanged.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import pyarrow as pa

from msgstream.wire.schema import CollectionSchema, DataType, FieldSchema

from ..errors import OptionError, SchemaMismatchError

if TYPE_CHECKING:
    from pyspark.sql.types import DataType as SparkDataType
    from pyspark.sql.types import StructType

ROW_ID = "_row_id"
TS = "_ts"
CHANNEL = "_channel"
MSG_ID = "_msg_id"
PARTITION = "_partition"
OP = "_op"
META_COLUMNS = (OP, ROW_ID, TS, CHANNEL, MSG_ID, PARTITION)

OP_INSERT = "insert"
OP_DELETE = "delete"


def arrow_type(dtype: DataType) -> pa.DataType:
    """The Arrow type a column of ``dtype`` becomes, as the data type declares it
    (:mod:`msgstream.wire.bodies`): a vector is a list of non-null items, as Spark's
    ``ArrayType(FloatType(), False)``."""
    item = pa.type_for_alias(dtype.arrow)
    return pa.list_(pa.field("element", item, nullable=False)) if dtype.is_vector else item


VECTOR_ARROW_TYPE = arrow_type(DataType.FLOAT_VECTOR)
"""``array<float>`` with non-null elements."""


class FrameKind(enum.Enum):
    INSERTS = "inserts"
    DELETES = "deletes"
    CHANGES = "changes"

    @classmethod
    def parse(cls, value: str | FrameKind, option: str = "frame") -> FrameKind:
        if isinstance(value, FrameKind):
            return value
        try:
            return cls(value.strip().lower())
        except ValueError:
            known = ", ".join(k.value for k in cls)
            raise OptionError(option, f"unknown frame {value!r} (known: {known})") from None

    @property
    def has_inserts(self) -> bool:
        return self is not FrameKind.DELETES

    @property
    def has_deletes(self) -> bool:
        return self is not FrameKind.INSERTS


@dataclass(frozen=True, slots=True)
class Column:
    """One column of a frame. ``dtype`` is the collection field's type (None for the
    ``_``-prefixed metadata columns)."""

    name: str
    type: pa.DataType
    nullable: bool
    dtype: DataType | None = None


@dataclass(frozen=True)
class FrameSchema:
    """The columns of one frame of one collection."""

    collection: CollectionSchema
    kind: FrameKind

    def __post_init__(self) -> None:
        clash = sorted({f.name for f in self.collection.fields} & set(META_COLUMNS))
        if clash:
            raise SchemaMismatchError(
                clash[0],
                f"collection {self.collection.name!r} uses a name reserved for the bridge's "
                f"metadata columns {list(META_COLUMNS)}",
            )
        if self.kind.has_deletes and self.collection.primary_field is None:
            raise SchemaMismatchError(
                "<primary key>",
                f"collection {self.collection.name!r} has no primary key field; the "
                f"{self.kind.value!r} frame needs one to carry deletes (the 'inserts' frame "
                "does not)",
            )

    @property
    def name(self) -> str:
        return self.collection.name

    @property
    def primary(self) -> FieldSchema:
        primary = self.collection.primary_field
        if primary is None:
            raise SchemaMismatchError(
                "<primary key>", f"collection {self.collection.name!r} has no primary key field"
            )
        return primary

    @cached_property
    def columns(self) -> tuple[Column, ...]:
        meta = (
            Column(TS, pa.int64(), False),
            Column(CHANNEL, pa.string(), False),
            Column(MSG_ID, pa.int64(), False),
            Column(PARTITION, pa.string(), False),
        )
        if self.kind is FrameKind.DELETES:
            pk = self.primary
            return (Column(pk.name, arrow_type(pk.dtype), False, pk.dtype), *meta)
        changes = self.kind is FrameKind.CHANGES
        fields = tuple(
            Column(
                f.name,
                arrow_type(f.dtype),
                f.nullable or (changes and not f.is_primary),
                f.dtype,
            )
            for f in self.collection.fields
        )
        if changes:
            return (
                *fields,
                Column(OP, pa.string(), False),
                Column(ROW_ID, pa.int64(), True),
                *meta,
            )
        return (*fields, Column(ROW_ID, pa.int64(), False), *meta)

    @cached_property
    def arrow_schema(self) -> pa.Schema:
        return pa.schema([pa.field(c.name, c.type, nullable=c.nullable) for c in self.columns])

    def spark_schema(self) -> StructType:
        """The Spark schema of this frame (imports pyspark)."""
        from pyspark.sql.types import StructField, StructType

        return StructType(
            [StructField(c.name, _spark_type(c.type), nullable=c.nullable) for c in self.columns]
        )


def _spark_type(arrow: pa.DataType) -> SparkDataType:
    from pyspark.sql import types as st

    simple: dict[pa.DataType, st.DataType] = {
        pa.bool_(): st.BooleanType(),
        pa.int8(): st.ByteType(),
        pa.int16(): st.ShortType(),
        pa.int32(): st.IntegerType(),
        pa.int64(): st.LongType(),
        pa.float32(): st.FloatType(),
        pa.float64(): st.DoubleType(),
        pa.string(): st.StringType(),
        pa.binary(): st.BinaryType(),
    }
    if arrow == VECTOR_ARROW_TYPE:
        return st.ArrayType(st.FloatType(), containsNull=False)
    return simple[arrow]
