"""Collection schemas and columnar field data carried by Insert messages."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from .bodies import DataType, column_decoder
from .buffers import BodyReader, BodyWriter
from .packed import PackedKind, PackedValues

__all__ = [
    "PRIMARY_KEY_TYPES",
    "CollectionSchema",
    "ColumnValues",
    "DataType",
    "FieldData",
    "FieldSchema",
    "column_from_values",
    "values_equal",
]


PRIMARY_KEY_TYPES = (DataType.INT64, DataType.VARCHAR)


def _parse_dtype(value: Any, where: str) -> DataType:
    try:
        return DataType(value)
    except ValueError:
        known = ", ".join(t.value for t in DataType)
        raise ValueError(f"{where}: unknown data type {value!r} (known: {known})") from None


@dataclass(frozen=True, slots=True)
class FieldSchema:
    name: str
    dtype: DataType
    is_primary: bool = False
    dim: int | None = None
    nullable: bool = False
    description: str = ""

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("field name must not be empty")
        if self.dtype.is_vector:
            if self.dim is None or self.dim <= 0:
                raise ValueError(f"field {self.name!r}: a float_vector needs dim > 0")
        elif self.dim is not None:
            raise ValueError(f"field {self.name!r}: dim is only valid for vector fields")
        if self.is_primary and self.dtype not in PRIMARY_KEY_TYPES:
            raise ValueError(f"field {self.name!r}: a primary key must be int64 or varchar")

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "dtype": self.dtype.value,
            "is_primary": self.is_primary,
            "dim": self.dim,
            "nullable": self.nullable,
            "description": self.description,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FieldSchema:
        return cls(
            name=data["name"],
            dtype=_parse_dtype(data["dtype"], f"field {data.get('name')!r}"),
            is_primary=bool(data.get("is_primary", False)),
            dim=data.get("dim"),
            nullable=bool(data.get("nullable", False)),
            description=data.get("description", ""),
        )


@dataclass(frozen=True, slots=True)
class CollectionSchema:
    name: str
    fields: tuple[FieldSchema, ...]
    description: str = ""

    def __post_init__(self) -> None:
        names = [f.name for f in self.fields]
        dupes = {n for n in names if names.count(n) > 1}
        if dupes:
            raise ValueError(f"collection {self.name!r}: duplicate field names {sorted(dupes)}")
        if sum(f.is_primary for f in self.fields) > 1:
            raise ValueError(f"collection {self.name!r}: more than one primary key field")

    @property
    def primary_field(self) -> FieldSchema | None:
        return next((f for f in self.fields if f.is_primary), None)

    def field(self, name: str) -> FieldSchema:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(f"collection {self.name!r} has no field {name!r}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "fields": [f.to_dict() for f in self.fields],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CollectionSchema:
        return cls(
            name=data["name"],
            fields=tuple(FieldSchema.from_dict(f) for f in data["fields"]),
            description=data.get("description", ""),
        )


ColumnValues = npt.NDArray[Any] | list[Any] | PackedValues


def _normalise(name: str, dtype: DataType, values: Any, dim: int | None) -> ColumnValues:
    numpy_dtype, kind = dtype.numpy_dtype, dtype.packed
    if numpy_dtype is None:
        out = list(values)
        for i, v in enumerate(out):
            if v is None:
                continue
            if kind is PackedKind.TEXT and not isinstance(v, str):
                raise TypeError(f"field {name!r} row {i}: expected str, got {type(v).__name__}")
            if kind is PackedKind.BINARY and not isinstance(v, bytes | bytearray | memoryview):
                raise TypeError(f"field {name!r} row {i}: expected bytes, got {type(v).__name__}")
        if kind is PackedKind.BINARY:
            out = [None if v is None else bytes(v) for v in out]
        return out
    try:
        array = np.asarray(values, dtype=np.dtype(numpy_dtype))
    except (TypeError, ValueError) as exc:
        raise TypeError(f"field {name!r}: values do not convert to {dtype.value}: {exc}") from None
    if dtype.is_vector:
        if dim is None or dim <= 0:
            raise ValueError(f"field {name!r}: a float_vector needs dim > 0")
        if array.size == 0:
            array = array.reshape(0, dim)
        if array.ndim != 2 or array.shape[1] != dim:
            raise ValueError(
                f"field {name!r}: expected vectors of shape (rows, {dim}), got {array.shape}"
            )
    elif array.ndim != 1:
        raise ValueError(f"field {name!r}: expected a 1-d column, got shape {array.shape}")
    return array


@dataclass(eq=False, slots=True)
class FieldData:
    """One column of an Insert: ``values`` is a numpy array for numeric, bool and vector
    types (vectors as ``(rows, dim)`` float32) and a sequence for varchar, JSON and
    binary (a list when built; a :class:`~msgstream.wire.packed.PackedValues` when decoded,
    which equals the list it was made from). ``valid`` optionally marks null rows
    (False = null)."""

    name: str
    dtype: DataType
    values: ColumnValues
    dim: int | None = None
    valid: npt.NDArray[np.bool_] | None = None

    def __post_init__(self) -> None:
        self.values = _normalise(self.name, self.dtype, self.values, self.dim)
        if self.valid is not None:
            self.valid = np.asarray(self.valid, dtype=np.bool_)
            if self.valid.shape != (len(self.values),):
                raise ValueError(
                    f"field {self.name!r}: valid mask has {self.valid.shape[0]} entries for "
                    f"{len(self.values)} rows"
                )

    def __len__(self) -> int:
        return len(self.values)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FieldData):
            return NotImplemented
        return (
            self.name == other.name
            and self.dtype == other.dtype
            and self.dim == other.dim
            and values_equal(self.values, other.values)
            and values_equal(self.valid, other.valid)
        )

    __hash__ = None  # type: ignore[assignment]

    def take(self, rows: npt.NDArray[np.intp]) -> FieldData:
        """The rows at the given indices, in that order."""
        if isinstance(self.values, np.ndarray):
            values: ColumnValues = self.values[rows]
        else:
            values = [self.values[i] for i in rows.tolist()]
        # Slices of a valid column are valid: skip __init__'s normalisation (hot path).
        column = FieldData.__new__(FieldData)
        column.name, column.dtype, column.values, column.dim = (
            self.name,
            self.dtype,
            values,
            self.dim,
        )
        column.valid = None if self.valid is None else self.valid[rows]
        return column

    def encode(self, writer: BodyWriter) -> dict[str, Any]:
        """Append the column's buffers to ``writer``; its JSON part (as
        :data:`msgstream.wire.bodies.COLUMN` lays it out)."""
        return self.dtype.encode_column(self, writer)

    @classmethod
    def decode(cls, data: dict[str, Any], reader: BodyReader) -> FieldData:
        """The column whose JSON part is ``data``, its buffers read from ``reader``."""
        column: FieldData = decode_column(data, reader)
        return column


def _decoded(
    name: str,
    dtype: DataType,
    values: ColumnValues,
    dim: int | None,
    valid: npt.NDArray[np.bool_] | None,
) -> FieldData:
    if isinstance(values, PackedValues):  # checked as it was unpacked: no normalising
        column = FieldData.__new__(FieldData)
        column.name, column.dtype, column.values, column.dim = name, dtype, values, dim
        column.valid = valid
        return column
    return FieldData(name, dtype, values, dim, valid)


decode_column = column_decoder(DataType, _decoded)
"""``decode_column(data, reader)``: :meth:`FieldData.decode`, without the call through it."""


def values_equal(a: Any, b: Any) -> bool:
    """Equality that treats numpy arrays by value (and None as None)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        if a is None or b is None:
            return False
        return bool(np.array_equal(np.asarray(a), np.asarray(b)))
    return bool(a == b)


def column_from_values(name: str, dtype: DataType, values: Sequence[Any]) -> FieldData:
    """Build a column, inferring ``dim`` for vectors from the first row."""
    dim = None
    if dtype.is_vector:
        dim = len(values[0]) if len(values) else None
        if dim is None:
            raise ValueError(f"field {name!r}: cannot infer the vector dim of an empty column")
    column: ColumnValues = list(values) if dtype.numpy_dtype is None else np.asarray(values)
    return FieldData(name, dtype, column, dim)
