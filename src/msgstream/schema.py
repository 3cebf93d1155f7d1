"""Collection schemas and columnar field data carried by Insert messages."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from .buffers import BodyReader, BodyWriter
from .errors import CodecError, DecodeError
from .packed import PackedKind, PackedValues, unpack, wire_parts


class DataType(enum.Enum):
    BOOL = "bool"
    INT8 = "int8"
    INT16 = "int16"
    INT32 = "int32"
    INT64 = "int64"
    FLOAT = "float"
    DOUBLE = "double"
    VARCHAR = "varchar"
    JSON = "json"
    BINARY = "binary"
    FLOAT_VECTOR = "float_vector"

    @property
    def numpy_dtype(self) -> str | None:
        """Little-endian numpy dtype of a numeric or vector column; None for the others."""
        return _NUMPY_DTYPES.get(self)

    @property
    def is_vector(self) -> bool:
        return self is DataType.FLOAT_VECTOR


_NUMPY_DTYPES: dict[DataType, str] = {
    DataType.BOOL: "|b1",
    DataType.INT8: "<i1",
    DataType.INT16: "<i2",
    DataType.INT32: "<i4",
    DataType.INT64: "<i8",
    DataType.FLOAT: "<f4",
    DataType.DOUBLE: "<f8",
    DataType.FLOAT_VECTOR: "<f4",
}

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
    numpy_dtype = dtype.numpy_dtype
    if numpy_dtype is None:
        out = list(values)
        for i, v in enumerate(out):
            if v is None:
                continue
            if dtype is DataType.VARCHAR and not isinstance(v, str):
                raise TypeError(f"field {name!r} row {i}: expected str, got {type(v).__name__}")
            if dtype is DataType.BINARY and not isinstance(v, bytes | bytearray | memoryview):
                raise TypeError(f"field {name!r} row {i}: expected bytes, got {type(v).__name__}")
        if dtype is DataType.BINARY:
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
    binary (a list when built; a :class:`~msgstream.packed.PackedValues` when decoded,
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
        dtype, values = self.dtype, self.values
        out: dict[str, Any] = {"name": self.name, "dtype": dtype._value_, "rows": len(values)}
        if self.dim is not None:
            out["dim"] = self.dim
        kind = _PACKED_KINDS.get(dtype)
        if kind is None:
            out["buf"] = writer.add_array(np.asarray(values), _NUMPY_DTYPES[dtype])
        else:
            assert not isinstance(values, np.ndarray)  # numeric types are the arrays
            try:
                offsets, data, nulls = wire_parts(kind, values)
            except (TypeError, ValueError) as exc:  # not UTF-8 encodable, not JSON-able
                raise CodecError(f"field {self.name!r}: {exc}") from exc
            out["offs"] = writer.add_bytes(offsets)
            out["data"] = writer.add_bytes(data)
            if nulls is not None:
                out["nulls"] = writer.add_array(nulls, "|b1")
        if self.valid is not None:
            out["valid"] = writer.add_array(self.valid, "|b1")
        return out

    @classmethod
    def decode(cls, data: dict[str, Any], reader: BodyReader) -> FieldData:
        if not isinstance(data["name"], str):
            raise DecodeError(f"field name must be a string, got {data['name']!r}")
        dtype = DataType(data["dtype"])
        rows: int = data["rows"]
        dim: int | None = data.get("dim")
        numpy_dtype = dtype.numpy_dtype
        values: ColumnValues
        if numpy_dtype is not None:
            count = rows * (dim or 1)
            values = reader.get_array(data["buf"], numpy_dtype, count)
            if dim is not None:
                values = values.reshape(rows, dim)
        elif "offs" in data:
            values = _decode_packed(data, dtype, rows, reader)
        else:
            values = _decode_inline(data, dtype, rows, reader)
        valid = None
        if "valid" in data:
            valid = reader.get_array(data["valid"], "|b1", rows)
        if isinstance(values, PackedValues):  # checked as it was unpacked: no normalising
            column = cls.__new__(cls)
            column.name, column.dtype, column.values, column.dim = data["name"], dtype, values, dim
            column.valid = valid
            return column
        return cls(data["name"], dtype, values, dim, valid)


_PACKED_KINDS = {
    DataType.VARCHAR: PackedKind.TEXT,
    DataType.JSON: PackedKind.JSON,
    DataType.BINARY: PackedKind.BINARY,
}


def _decode_packed(
    data: dict[str, Any], dtype: DataType, rows: int, reader: BodyReader
) -> PackedValues:
    """A varchar, JSON or binary column as codec version 3 writes it."""
    where = f"field {data['name']!r}"
    offsets = reader.get_array(data["offs"], "<i8", rows + 1)
    nulls = reader.get_array(data["nulls"], "|b1", rows) if "nulls" in data else None
    return unpack(_PACKED_KINDS[dtype], offsets, reader.get_view(data["data"]), nulls, where)


def _decode_inline(
    data: dict[str, Any], dtype: DataType, rows: int, reader: BodyReader
) -> list[Any]:
    """A varchar, JSON or binary column as codec version 2 wrote it (values inline in
    the JSON body; binary as lengths and one buffer, None rows listed)."""
    if dtype is not DataType.BINARY:
        values = data["values"]
        if not isinstance(values, list) or len(values) != rows:
            raise DecodeError(f"field {data['name']!r}: expected a list of {rows} values")
        return values
    lengths = reader.get_array(data["lens"], "<i8", rows)
    blob = reader.get_bytes(data["buf"])
    sizes = lengths.tolist()
    if any(n < 0 for n in sizes) or sum(sizes) != len(blob):  # no int64 wrap-around
        raise DecodeError(f"binary field {data['name']!r}: lengths do not match its buffer")
    ends = np.cumsum(lengths).tolist()
    starts = [0, *ends[:-1]]
    blobs: list[Any] = [blob[s:e] for s, e in zip(starts, ends, strict=True)]
    nulls = data.get("nulls", [])
    if not isinstance(nulls, list) or not all(type(i) is int and 0 <= i < rows for i in nulls):
        raise DecodeError(f"binary field {data['name']!r}: bad null row indices {nulls!r}")
    for i in nulls:
        blobs[i] = None
    return blobs


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
