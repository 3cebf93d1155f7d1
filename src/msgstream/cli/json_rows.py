"""JSON rows against a collection schema: inferring the schema, building the columns.

``msgstream produce`` reads one row per stdin line (:mod:`.row_lines`) and announces its
collection with a ``CreateCollectionMsg`` so that what it writes can be ingested; every
row it sends must then fit that schema, or the ingestion would stop at it.
:func:`infer_schema` derives a schema from sample rows (``msgstream schema --infer`` over
many, ``produce`` from the first), and :class:`RowColumns` turns a row into one-row
columns of the schema, widening where nothing is lost (an int into a double field) and
refusing with :class:`RowMismatch` what does not fit, naming the field.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from ..streams.routing import INT64_MAX, INT64_MIN
from ..wire.schema import PRIMARY_KEY_TYPES, CollectionSchema, DataType, FieldData, FieldSchema
from .common import CliError


class RowMismatch(ValueError):
    """A row that does not fit the collection schema (the message names the field)."""


def read_schema_file(path: str, option: str = "--schema") -> CollectionSchema:
    """A collection schema from a JSON file (``CollectionSchema.to_dict()``, what
    ``msgstream schema`` writes); a clear :class:`CliError` naming ``option`` if not."""
    try:
        data = orjson.loads(Path(path).expanduser().read_bytes())
    except OSError as exc:
        raise CliError(f"{option}: cannot read {path}: {exc.strerror or exc}") from None
    except orjson.JSONDecodeError as exc:
        raise CliError(f"{option}: {path} is not JSON: {exc}") from None
    try:
        if not isinstance(data, dict):
            raise TypeError(f"expected a JSON object, got {type(data).__name__}")
        return CollectionSchema.from_dict(data)
    except KeyError as exc:
        raise CliError(f"{option}: {path} is not a collection schema: no {exc} key") from None
    except (TypeError, ValueError) as exc:
        raise CliError(f"{option}: {path} is not a collection schema: {exc}") from None


def _is_int(value: Any) -> bool:
    return (
        isinstance(value, int) and not isinstance(value, bool) and INT64_MIN <= value <= INT64_MAX
    )


def _is_number(value: Any) -> bool:
    return _is_int(value) or isinstance(value, float)


def value_type(value: Any) -> tuple[DataType, int | None] | None:
    """The column type of one JSON value (and a vector's dim); None for null."""
    if value is None:
        return None
    if isinstance(value, bool):
        return DataType.BOOL, None
    if _is_int(value):
        return DataType.INT64, None
    if isinstance(value, float):
        return DataType.DOUBLE, None
    if isinstance(value, str):
        return DataType.VARCHAR, None
    if isinstance(value, list) and value and all(_is_number(v) for v in value):
        return DataType.FLOAT_VECTOR, len(value)
    return DataType.JSON, None


def _merge(
    a: tuple[DataType, int | None], b: tuple[DataType, int | None]
) -> tuple[DataType, int | None]:
    """One type holding both: equal types stay, int64 and double become double, anything
    else (vectors of two dims included) becomes JSON."""
    if a == b:
        return a
    if {a[0], b[0]} == {DataType.INT64, DataType.DOUBLE}:
        return DataType.DOUBLE, None
    return DataType.JSON, None


@dataclass
class _Seen:
    kind: tuple[DataType, int | None] | None = None
    rows: int = 0
    nulls: int = 0


def infer_schema(
    rows: Iterable[dict[str, Any]],
    name: str,
    primary_key: str | None = None,
    *,
    all_nullable: bool = False,
) -> CollectionSchema:
    """A schema every one of ``rows`` fits: fields in order of first appearance, types
    merged across rows (see :func:`_merge`), nullable unless present and non-null in every
    row (or every field but the primary key with ``all_nullable``: one sample row says
    nothing of which fields are optional). The primary key is ``primary_key`` if given
    (it must be an int64 or varchar in every row), else a field named ``id`` if it
    qualifies, else none."""
    seen: dict[str, _Seen] = {}
    count = 0
    for row in rows:
        count += 1
        for field_name, value in row.items():
            state = seen.setdefault(str(field_name), _Seen())
            state.rows += 1
            kind = value_type(value)
            if kind is None:
                state.nulls += 1
            else:
                state.kind = kind if state.kind is None else _merge(state.kind, kind)
    if count == 0:
        raise RowMismatch("no rows to infer a schema from")

    def qualifies(field_name: str) -> bool:
        state = seen.get(field_name)
        return (
            state is not None
            and state.rows == count
            and state.nulls == 0
            and state.kind is not None
            and state.kind[0] in PRIMARY_KEY_TYPES
        )

    if primary_key is not None and not qualifies(primary_key):
        raise RowMismatch(
            f"field {primary_key!r} cannot be the primary key: it must be an int or a string "
            "in every row"
        )
    primary = primary_key if primary_key is not None else ("id" if qualifies("id") else None)
    fields = []
    for field_name, state in seen.items():
        dtype, dim = state.kind or (DataType.JSON, None)
        fields.append(
            FieldSchema(
                field_name,
                dtype,
                is_primary=field_name == primary,
                dim=dim,
                nullable=field_name != primary
                and (all_nullable or state.rows < count or state.nulls > 0),
            )
        )
    return CollectionSchema(name, tuple(fields))


_NULL_FILL: dict[DataType, Any] = {
    DataType.BOOL: False,
    DataType.VARCHAR: None,
    DataType.JSON: None,
    DataType.BINARY: None,
}


class RowColumns:
    """One-row columns of ``schema`` from JSON rows."""

    def __init__(self, schema: CollectionSchema) -> None:
        self.schema = schema
        self._names = {f.name for f in schema.fields}

    def build(self, row: dict[str, Any]) -> list[FieldData]:
        """The row's columns, one per schema field; raises :class:`RowMismatch`."""
        extra = [str(name) for name in row if name not in self._names]
        if extra:
            raise RowMismatch(
                f"field {extra[0]!r} is not in collection {self.schema.name!r} "
                f"(fields: {sorted(self._names)})"
            )
        return [self._column(spec, row.get(spec.name)) for spec in self.schema.fields]

    def _column(self, spec: FieldSchema, value: Any) -> FieldData:
        if value is None:
            if not spec.nullable:
                raise RowMismatch(f"field {spec.name!r} is missing or null, and it is not nullable")
            return self._null(spec)
        return FieldData(spec.name, spec.dtype, [self._coerce(spec, value)], dim=spec.dim)

    @staticmethod
    def _null(spec: FieldSchema) -> FieldData:
        valid = np.zeros(1, dtype=np.bool_)
        if spec.dtype.is_vector:
            assert spec.dim is not None
            return FieldData(
                spec.name, spec.dtype, np.zeros((1, spec.dim), np.float32), spec.dim, valid
            )
        fill = _NULL_FILL.get(spec.dtype, 0)
        return FieldData(spec.name, spec.dtype, [fill], valid=valid)

    @staticmethod
    def _coerce(spec: FieldSchema, value: Any) -> Any:
        dtype = spec.dtype
        ok: bool
        if dtype is DataType.JSON:
            return value
        if dtype is DataType.BOOL:
            ok = isinstance(value, bool)
        elif dtype in (DataType.INT8, DataType.INT16, DataType.INT32, DataType.INT64):
            info = np.iinfo(np.dtype(dtype.numpy_dtype or "<i8"))
            ok = _is_int(value) and info.min <= value <= info.max
        elif dtype in (DataType.FLOAT, DataType.DOUBLE):
            ok = _is_number(value)
        elif dtype is DataType.VARCHAR:
            ok = isinstance(value, str)
        elif dtype is DataType.FLOAT_VECTOR:
            ok = (
                isinstance(value, list)
                and len(value) == spec.dim
                and all(_is_number(v) for v in value)
            )
        else:  # binary: JSON has no bytes
            ok = False
        if not ok:
            shown = orjson.dumps(value).decode()
            if len(shown) > 40:
                shown = shown[:37] + "..."
            want = f"{dtype.value}[{spec.dim}]" if dtype.is_vector else dtype.value
            raise RowMismatch(f"field {spec.name!r}: {shown} does not fit type {want}")
        return value
