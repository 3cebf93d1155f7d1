"""The Insert and Delete bodies, declared once, as :mod:`msgstream.wire.envelope` declares the
envelope.

A body is a JSON object, its *JSON part*, followed by side buffers: the JSON part refers
to each buffer as ``{"o": offset, "n": size}`` (offsets from where the buffers start,
:mod:`msgstream.wire.buffers`), and the buffers follow one another in the order their
references appear in it. :data:`INSERT` and :data:`DELETE` (:class:`BodyLayout`) say, in
wire order, which strings, row count and per-row buffers a body holds, and its column
list (Insert) or primary keys (Delete); :data:`COLUMN` (:class:`ColumnLayout`) says the
same of each column of an Insert, whose values travel as its :class:`DataType` says:
fixed-width items (:data:`FIXED`) or variable-length values packed as offsets and bytes
(:data:`PACKED`). Each :class:`Buffer` says its items' numpy type, how many there are,
and, for a mask, which rows are null.

Everything else is derived from these declarations; no other module spells a body's key,
a buffer's type or size, or their order:

- the functions that write and read the JSON part of a message: :func:`body_encoder`,
  :func:`body_decoder`, and each data type's column encoder and :func:`column_decoder`
  (``InsertMsg``/``DeleteMsg.encode_body``/``decode_body``, ``FieldData.encode``/
  ``decode``);
- where each buffer of a body lies, for the decode plans (:func:`locate`,
  :mod:`msgstream.wire.plans`) and so for :func:`msgstream.wire.codec.decode_batch`;
- the order of the buffers after a body, for the batch encoder
  (:mod:`msgstream.wire.batch_encoder`);
- the numbers the Spark bridge's Arrow reader reads of each body and the sizes it checks
  (``bridge_spark.data.columnar``), and each data type's Arrow type (``bridge_spark.data.frames``).

So adding a body field, a column buffer or a data type is one edit here: the codec, the
plans, the batch encoder and the Arrow reader take it from the declaration
(``tests/test_body_layout.py`` adds a field and a data type to copies and checks that
they agree). A declaration is plain data; the functions above read any layout they are
given, which is how that test works on copies.

Why the per-message functions are generated: the JSON part of a one-row message is
written and read once per message, on the hot path, and walking the declaration there
(a loop and a call per entry) would cost a noticeable share of a small message's encode.
So :func:`body_encoder` and its kin walk the declaration once, when a message class is
made, and compile the function a hand would write for it, as :mod:`dataclasses` does for
``__init__``; :func:`source` shows it.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from itertools import count
from typing import Any, Self

import numpy as np

from ..errors import CodecError, DecodeError
from .buffers import BodyReader, BodyWriter
from .generated import Source, source
from .packed import OFFSETS_DTYPE, PackedKind, unpack, wire_parts

# --- buffers ------------------------------------------------------------------------------


class Count(enum.Enum):
    """How many items a buffer holds, for a body or column of ``rows`` rows (and vectors
    of ``dim`` items): each member's value is the formula, as generated code spells it."""

    ROWS = "rows"
    """One per row."""
    VALUES = "rows * (dim or 1)"
    """One per value: ``rows * dim`` for a vector column, else ``rows``."""
    OFFSETS = "rows + 1"
    """Where each row's bytes start, and where the last ends."""
    ANY = ""
    """Bytes of any length (cut into rows by offsets)."""

    def items(self, rows: Any, dim: int | None) -> Any:
        """The number of items (None for :attr:`ANY`); ``rows`` may be a numpy array."""
        formula = _FORMULAS.get(self._value_)  # by the text: an enum's hash is Python code
        return None if formula is None else formula(rows, dim)


_FORMULAS: dict[str, Callable[[Any, int | None], Any]] = {
    count.value: eval(f"lambda rows, dim: {count.value}") for count in Count if count.value
}

COLUMN_TYPE = "column"
"""A buffer ``dtype`` meaning: the numpy type of its column's data type."""


@dataclass(frozen=True, slots=True)
class Buffer:
    """A side buffer the JSON part refers to under ``key``."""

    key: str
    dtype: str | None
    """The numpy type of its items (little-endian); None: plain bytes; :data:`COLUMN_TYPE`."""
    count: Count = Count.ROWS
    attr: str = ""
    """The message or column attribute holding its values (default: ``key``)."""
    optional: bool = False
    """Written only when the values have it (a mask when some row is null)."""
    null_when: bool | None = None
    """For a mask: the value that marks a null row (True: a null mask; False: a validity
    mask, whose False rows are null)."""
    encoded: bool = False
    """Its values come as bytes already (written as they are, read by ``dtype``)."""

    @property
    def name(self) -> str:
        return self.attr or self.key

    @property
    def item_type(self) -> str:
        """The numpy type of its items, for a buffer that has one of its own."""
        assert self.dtype is not None and self.dtype != COLUMN_TYPE, self
        return self.dtype

    def itemsize(self, column_type: str | None = None) -> int:
        """Bytes per item (:data:`COLUMN_TYPE`: of ``column_type``); 1 for plain bytes."""
        dtype = column_type if self.dtype == COLUMN_TYPE else self.dtype
        return 1 if dtype is None else _itemsize(dtype)

    def nbytes(self, rows: Any, dim: int | None = None, column_type: str | None = None) -> Any:
        """Its exact size in bytes, for ``rows`` rows (a number or a numpy array); None
        when any size is right (:attr:`Count.ANY`)."""
        items = self.count.items(rows, dim)
        return None if items is None else items * self.itemsize(column_type)

    def per_row(
        self, dim: int | None = None, column_type: str | None = None
    ) -> tuple[int, int] | None:
        """Its size as ``rows * a + b`` bytes: ``(a, b)`` (every count grows with the rows
        by a fixed step), for a reader that computes it for many bodies at once; None
        when any size is right."""
        none, one = self.nbytes(0, dim, column_type), self.nbytes(1, dim, column_type)
        return None if none is None else (one - none, none)


@functools.cache
def _itemsize(dtype: str) -> int:
    return np.dtype(dtype).itemsize


# --- columns and data types ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Storage:
    """How the values of a column travel: the buffers after its head, in wire order, and
    the two functions that turn values into those buffers and back."""

    name: str
    buffers: tuple[Buffer, ...]
    split: Callable[[DeclaredTypes], Callable[[Any], Any]]
    """Of a data type: the function giving the buffers' contents of a column's values
    (the content alone for one buffer, else a tuple in buffer order)."""
    join: Callable[..., Any]
    """``join(dtype, rows, dim, name, *buffers)``: the values, from the buffers as read."""
    viewable: bool
    """Its buffers are valid whatever their bytes: a decode plan may view them unchecked
    (:func:`locate`); packed values are checked (offsets, UTF-8, JSON) on every read."""
    legacy: Callable[[dict[str, Any], DeclaredTypes, Any, BodyReader, str], Any] | None = None
    """``legacy(spec, dtype, rows, reader, name)`` reads a column of codec version 2,
    which lacks the first buffer; None: none."""

    @property
    def sized_by_values(self) -> bool:
        """Whether a buffer's size depends on the values, not only on the rows (so two
        columns of the same rows may have different JSON parts)."""
        return any(buffer.count is Count.ANY for buffer in self.buffers)


def _fixed_values(dtype: DeclaredTypes, rows: int, dim: int | None, name: str, values: Any) -> Any:
    return values if dim is None else values.reshape(rows, dim)


def _packed_values(
    dtype: DeclaredTypes,
    rows: int,
    dim: int | None,
    name: str,
    offsets: Any,
    data: Any,
    nulls: Any,
) -> Any:
    assert dtype.packed is not None
    return unpack(dtype.packed, offsets, data, nulls, f"field {name!r}")


def _packed_split(dtype: DeclaredTypes) -> Callable[[Any], Any]:
    kind = dtype.packed

    def split(values: Any) -> Any:
        return wire_parts(kind, values)  # type: ignore[arg-type]

    return split


V2_VALUES = "values"
"""Codec version 2 (read only): a varchar or JSON column's values, inline in the body."""
V2_LENGTHS = Buffer("lens", "<i8")
"""Codec version 2: a binary column's value lengths (its bytes in ``buf``, its None rows
listed in ``nulls``)."""
V2_BYTES = Buffer("buf", None, Count.ANY)
V2_NULLS = "nulls"
"""Codec version 2: the indexes of a binary column's None rows, inline in the body."""


def _version_2_values(
    data: dict[str, Any], dtype: DeclaredTypes, rows: Any, reader: BodyReader, name: str
) -> Any:
    """A varchar, JSON or binary column as codec version 2 wrote it (values inline in
    the JSON body; binary as lengths and one buffer, None rows listed)."""
    if dtype.packed is not PackedKind.BINARY:
        values = data[V2_VALUES]
        if not isinstance(values, list) or len(values) != rows:
            raise DecodeError(f"field {name!r}: expected a list of {rows} values")
        return values
    lengths = reader.get_array(data[V2_LENGTHS.key], V2_LENGTHS.item_type, rows)
    blob = reader.get_bytes(data[V2_BYTES.key])
    sizes = lengths.tolist()
    if any(n < 0 for n in sizes) or sum(sizes) != len(blob):  # no int64 wrap-around
        raise DecodeError(f"binary field {name!r}: lengths do not match its buffer")
    ends = np.cumsum(lengths).tolist()
    starts = [0, *ends[:-1]]
    blobs: list[Any] = [blob[s:e] for s, e in zip(starts, ends, strict=True)]
    nulls = data.get(V2_NULLS, [])
    if not isinstance(nulls, list) or not all(type(i) is int and 0 <= i < rows for i in nulls):
        raise DecodeError(f"binary field {name!r}: bad null row indices {nulls!r}")
    for i in nulls:
        blobs[i] = None
    return blobs


FIXED_VALUES = Buffer("buf", COLUMN_TYPE, Count.VALUES)
OFFSETS = Buffer("offs", OFFSETS_DTYPE, Count.OFFSETS, encoded=True)
DATA = Buffer("data", None, Count.ANY, encoded=True)
NULLS = Buffer("nulls", "|b1", optional=True, null_when=True)

FIXED = Storage(
    "fixed",
    (FIXED_VALUES,),
    split=lambda dtype: np.asarray,
    join=_fixed_values,
    viewable=True,
)
"""Numbers, bools and vectors: one buffer of ``rows * dim`` items of the type's numpy
type. A null row (validity mask) holds a placeholder value."""

PACKED = Storage(
    "packed",
    (OFFSETS, DATA, NULLS),
    split=_packed_split,
    join=_packed_values,
    viewable=False,
    legacy=_version_2_values,
)
"""Varchar, JSON and binary (:mod:`msgstream.wire.packed`): ``rows + 1`` offsets into one
byte buffer, and a null mask when a value is None (a JSON value of ``null`` is null in
Arrow too)."""


@dataclass(frozen=True, slots=True)
class TypeSpec:
    """How a column of one data type travels (see :class:`DataType`)."""

    wire: str
    """Its name in a body (and a schema): the member's ``value``."""
    arrow: str
    """Its values' Arrow type (``pyarrow.type_for_alias``); a vector is a list of them."""
    numpy_dtype: str | None = None
    """Fixed-width values: the numpy type of one item."""
    packed: PackedKind | None = None
    """Variable-length values: how they are packed."""
    vector: bool = False
    """A vector of ``dim`` items per row."""


class DeclaredTypes(enum.Enum):
    """The base of :class:`DataType`: the attributes every data type has, from its
    :class:`TypeSpec`. Without members, so that a copy of the data types with one more
    can be declared (the readers take the types they are given)."""

    _value_: str
    numpy_dtype: str | None
    """Little-endian numpy dtype of a numeric or vector column; None for the others."""
    packed: PackedKind | None
    arrow: str
    is_vector: bool
    storage: Storage
    encode_column: Callable[[Any, BodyWriter], dict[str, Any]]
    """Writes a column of this type (its buffers to the writer), returning its JSON
    part: ``FieldData.encode``, generated per type (:func:`column_encoder`)."""

    # A member is its one instance, equal only to itself: hashed by identity, in C,
    # where Enum hashes its name in Python (a type is hashed per column on hot paths).
    __hash__ = object.__hash__

    def __new__(cls, spec: TypeSpec | str) -> Self:
        assert isinstance(spec, TypeSpec), "declare a data type with a TypeSpec"
        member = object.__new__(cls)
        member._value_ = spec.wire
        member.numpy_dtype = spec.numpy_dtype
        member.packed = spec.packed
        member.arrow = spec.arrow
        member.is_vector = spec.vector
        member.storage = FIXED if spec.packed is None else PACKED
        assert (spec.numpy_dtype is None) != (spec.packed is None), spec
        return member


class DataType(DeclaredTypes):
    """A column's data type; each member declares how its values travel."""

    BOOL = TypeSpec("bool", "bool", numpy_dtype="|b1")
    INT8 = TypeSpec("int8", "int8", numpy_dtype="<i1")
    INT16 = TypeSpec("int16", "int16", numpy_dtype="<i2")
    INT32 = TypeSpec("int32", "int32", numpy_dtype="<i4")
    INT64 = TypeSpec("int64", "int64", numpy_dtype="<i8")
    FLOAT = TypeSpec("float", "float", numpy_dtype="<f4")
    DOUBLE = TypeSpec("double", "double", numpy_dtype="<f8")
    VARCHAR = TypeSpec("varchar", "string", packed=PackedKind.TEXT)
    JSON = TypeSpec("json", "string", packed=PackedKind.JSON)
    BINARY = TypeSpec("binary", "binary", packed=PackedKind.BINARY)
    FLOAT_VECTOR = TypeSpec("float_vector", "float", numpy_dtype="<f4", vector=True)


@dataclass(frozen=True, slots=True)
class ColumnLayout:
    """The JSON part of one column of an Insert, in wire order: its name, data type
    and rows, its ``dim`` when it has one (a vector), its storage's buffers, then its
    masks."""

    name: str = "name"
    dtype: str = "dtype"
    rows: str = "rows"
    """A column has as many rows as its body."""
    dim: str = "dim"
    masks: tuple[Buffer, ...] = (Buffer("valid", "|b1", optional=True, null_when=False),)
    storages: tuple[Storage, ...] = (FIXED, PACKED)

    def buffers(self, storage: Storage) -> tuple[Buffer, ...]:
        """Every buffer of a column of ``storage``, in wire order."""
        return storage.buffers + self.masks


COLUMN = ColumnLayout()
VALIDITY = COLUMN.masks[0]
"""A column's validity mask: False marks a null row (any storage)."""


# --- bodies -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Keys:
    """Delete's primary keys: int64 keys as a buffer, or strings inline in the body."""

    numbers: Buffer
    """The int64 keys (its ``attr``: the message attribute of either)."""
    texts: str
    """The key of the list of string keys."""


@dataclass(frozen=True, slots=True)
class BodyLayout:
    """The JSON part of a message body, in wire order: its strings, its row count, its
    per-row buffers, then its column list (Insert) or its primary keys (Delete)."""

    names: tuple[str, ...]
    """String fields (the message's attributes of those names)."""
    rows: str
    buffers: tuple[Buffer, ...]
    """One item per row each."""
    columns: str | None = None
    """The key (and message attribute) of the column list, each laid out as :data:`COLUMN`."""
    keys: Keys | None = None
    rows_of: str | None = None
    """The message attribute whose length is its number of rows; None: its ``num_rows``."""

    @property
    def attrs(self) -> tuple[str, ...]:
        """The message attributes a body holds, names first."""
        found = [*self.names, *(b.name for b in self.buffers)]
        if self.columns is not None:
            found.append(self.columns)
        if self.keys is not None:
            found.append(self.keys.numbers.name)
        return tuple(found)

    @property
    def viewed(self) -> tuple[str, ...]:
        """The message attributes made from its buffers and columns (not its names)."""
        return self.attrs[len(self.names) :]


COLLECTION = "collection_name"
PARTITION = "partition_name"
ROWS = "rows"
ROW_IDS = Buffer("row_ids", "<i8")
ROW_TIMESTAMPS = Buffer("row_timestamps", "<u8")
"""Each row's timestamp; the envelope's time range is their min and max."""

INSERT = BodyLayout((COLLECTION, PARTITION), ROWS, (ROW_IDS, ROW_TIMESTAMPS), columns="fields")
DELETE = BodyLayout(
    (COLLECTION, PARTITION),
    ROWS,
    (ROW_TIMESTAMPS,),
    keys=Keys(
        Buffer("int_keys", DataType.INT64.numpy_dtype, attr="primary_keys"), texts="str_keys"
    ),
    rows_of="primary_keys",
)


# --- generated per-message functions ------------------------------------------------------


def _attr(name: str) -> str:
    if not name.isidentifier():
        raise ValueError(f"{name!r} is no attribute name")
    return name


def _var(buffer: Buffer) -> str:
    return "b_" + _attr(buffer.key)


def body_encoder(
    layout: BodyLayout, writers: Mapping[str, str] | None = None
) -> Callable[[Any, BodyWriter], dict[str, Any]]:
    """``encode_body(msg, writer)``: the JSON part of ``msg``'s body (its buffers appended
    to ``writer``), as ``layout`` says. A buffer is ``writer.add_array`` of the message
    attribute, unless ``writers`` names a method of the message that writes it
    (``method(writer, rows)``: a faster way for values it knows more of)."""
    writers = writers or {}
    src = Source()
    keys = layout.keys
    with src.block("def encode_body(msg, writer):"):
        if keys is not None:
            src.line(f"keys = msg.{_attr(keys.numbers.name)}")
        rows_of = layout.rows_of
        if rows_of is None:
            src.line("rows = msg.num_rows")
        else:
            counted = (
                "keys"
                if keys is not None and rows_of == keys.numbers.name
                else f"msg.{_attr(rows_of)}"
            )
            src.line(f"rows = len({counted})")
        items = [f"{name!r}: msg.{_attr(name)}" for name in layout.names]
        items.append(f"{layout.rows!r}: rows")
        for buffer in layout.buffers:
            method = writers.get(buffer.key)
            value = (
                f"writer.add_array(msg.{_attr(buffer.name)}, {buffer.dtype!r}, rows)"
                if method is None
                else f"msg.{_attr(method)}(writer, rows)"
            )
            items.append(f"{buffer.key!r}: {value}")
        if layout.columns is not None:
            items.append(
                f"{layout.columns!r}: [column.dtype.encode_column(column, writer) "
                f"for column in msg.{_attr(layout.columns)}]"
            )
        if keys is None:
            src.line("return {" + ", ".join(items) + "}")
        else:
            src.line("out = {" + ", ".join(items) + "}")
            with src.block("if isinstance(keys, ndarray):"):
                numbers = keys.numbers
                src.line(f"out[{numbers.key!r}] = writer.add_array(keys, {numbers.dtype!r}, rows)")
            with src.block("else:"):
                src.line(f"out[{keys.texts!r}] = keys")
            src.line("return out")
    return src.compile("encode_body", {"ndarray": np.ndarray})


def _string_list(values: Any, rows: Any, owner: type) -> list[str]:
    """``values`` if it is a list of ``rows`` strings."""
    if (
        not isinstance(values, list)
        or len(values) != rows
        or not all(isinstance(value, str) for value in values)
    ):
        raise DecodeError(f"{owner.__name__}: expected {rows} string keys")
    return values


def body_decoder(
    layout: BodyLayout,
    *,
    check: Callable[[type, Any], None],
    build: Callable[[type, Any, dict[str, Any]], Any],
    column: Callable[[Any, BodyReader], Any] | None = None,
) -> Callable[[type, Any, Any, BodyReader], Any]:
    """``decode_body(cls, header, body, reader)``: the message of class ``cls`` a body
    laid out as ``layout`` holds: ``check(cls, body)`` first (its scalars' types), then
    its buffers and columns (``column(spec, reader)``, each with the body's rows), and
    ``build(cls, header, fields)`` of every attribute of the body."""
    src = Source()
    with src.block("def decode_body(cls, header, body, reader):"):
        src.line("check(cls, body)")
        src.line(f"rows = body[{layout.rows!r}]")
        values = {name: f"body[{name!r}]" for name in layout.names}
        for buffer in layout.buffers:
            ref = f"body[{buffer.key!r}]"
            src.line(f"{_var(buffer)} = reader.get_array({ref}, {buffer.dtype!r}, rows)")
            values[buffer.name] = _var(buffer)
        if layout.columns is not None:
            assert column is not None, "a layout with columns needs a column decoder"
            src.line(f"columns = [column(spec, reader) for spec in body[{layout.columns!r}]]")
            with src.block("for found in columns:"), src.block("if len(found) != rows:"):
                src.line(
                    "raise DecodeError(f'{cls.__name__}: field {found.name!r} has "
                    "{len(found)} of {rows} rows')"
                )
            values[layout.columns] = "columns"
        keys = layout.keys
        if keys is not None:
            numbers = keys.numbers
            with src.block(f"if {numbers.key!r} in body:"):
                src.line(f"keys = reader.get_array(body[{numbers.key!r}], {numbers.dtype!r}, rows)")
            with src.block("else:"):
                src.line(f"keys = string_list(body[{keys.texts!r}], rows, cls)")
            values[keys.numbers.name] = "keys"
        fields = ", ".join(f"{name!r}: {value}" for name, value in values.items())
        src.line(f"return build(cls, header, {{{fields}}})")
    scope = {
        "check": check,
        "build": build,
        "column": column,
        "string_list": _string_list,
        "DecodeError": DecodeError,
    }
    return src.compile("decode_body", scope)


def column_encoder(
    dtype: DeclaredTypes, layout: ColumnLayout = COLUMN
) -> Callable[[Any, BodyWriter], dict[str, Any]]:
    """``encode_column(column, writer)`` for a column of ``dtype``: its JSON part, its
    buffers appended to ``writer``. Values that do not make the storage's buffers (text
    that is not UTF-8 encodable, values that are not JSON) raise :class:`CodecError`."""
    storage = dtype.storage
    buffers = storage.buffers
    src = Source()
    with src.block("def encode_column(column, writer):"):
        src.line("values = column.values")
        src.line(
            f"out = {{{layout.name!r}: column.name, {layout.dtype!r}: {dtype.value!r}, "
            f"{layout.rows!r}: len(values)}}"
        )
        with src.block("if column.dim is not None:"):
            src.line(f"out[{layout.dim!r}] = column.dim")
        with src.block("try:"):
            src.line(", ".join(_var(b) for b in buffers) + " = split(values)")
        with src.block("except (TypeError, ValueError) as exc:"):
            src.line("raise CodecError(f'field {column.name!r}: {exc}') from exc")
        for buffer in buffers:
            _write(src, buffer, _var(buffer), dtype.numpy_dtype)
        for mask in layout.masks:
            _write(src, mask, f"column.{_attr(mask.name)}", None)
        src.line("return out")
    return src.compile("encode_column", {"split": storage.split(dtype), "CodecError": CodecError})


def _write(src: Source, buffer: Buffer, value: str, column_type: str | None) -> None:
    """The line (or block) writing one buffer of a column."""
    dtype = column_type if buffer.dtype == COLUMN_TYPE else buffer.dtype
    call = (
        f"writer.add_bytes({value})"
        if buffer.encoded or dtype is None
        else f"writer.add_array({value}, {dtype!r})"
    )
    if buffer.optional:
        with src.block(f"if {value} is not None:"):
            src.line(f"out[{buffer.key!r}] = {call}")
    else:
        src.line(f"out[{buffer.key!r}] = {call}")


def column_decoder(
    types: type[DeclaredTypes],
    make: Callable[[str, Any, Any, int | None, Any], Any],
    layout: ColumnLayout = COLUMN,
) -> Callable[[Any, BodyReader], Any]:
    """``decode_column(spec, reader)``: the column whose JSON part is ``spec``, made by
    ``make(name, dtype, values, dim, valid)``; its data type is one of ``types``."""
    src = Source()
    scope: dict[str, Any] = {"types": types, "make": make, "DecodeError": DecodeError}
    with src.block("def decode_column(spec, reader):"):
        src.line(f"name = spec[{layout.name!r}]")
        with src.block("if not isinstance(name, str):"):
            src.line("raise DecodeError(f'field name must be a string, got {name!r}')")
        src.line(f"dtype = types(spec[{layout.dtype!r}])")
        src.line(f"rows = spec[{layout.rows!r}]")
        src.line(f"dim = spec.get({layout.dim!r})")
        src.line("storage = dtype.storage")
        for number, storage in enumerate(layout.storages):
            named = _attr(storage.name)
            scope[f"storage_{named}"] = storage
            scope[f"join_{named}"] = storage.join
            with src.block(f"{'if' if number == 0 else 'elif'} storage is storage_{named}:"):
                if storage.legacy is None:
                    _read_values(src, storage)
                else:
                    scope[f"version_2_{named}"] = storage.legacy
                    with src.block(f"if {storage.buffers[0].key!r} in spec:"):
                        _read_values(src, storage)
                    with src.block("else:"):
                        src.line(f"values = version_2_{named}(spec, dtype, rows, reader, name)")
        with src.block("else:"):
            src.line("raise DecodeError(f'field {name!r}: no storage for {dtype}')")
        for mask in layout.masks:
            _read(src, mask, _var(mask))
        masks = ", ".join(_var(mask) for mask in layout.masks)
        src.line(f"return make(name, dtype, values, dim, {masks})")
    return src.compile("decode_column", scope)


def _read_values(src: Source, storage: Storage) -> None:
    for buffer in storage.buffers:
        _read(src, buffer, _var(buffer))
    parts = ", ".join(_var(b) for b in storage.buffers)
    src.line(f"values = join_{storage.name}(dtype, rows, dim, name, {parts})")


def _read(src: Source, buffer: Buffer, target: str) -> None:
    ref = f"spec[{buffer.key!r}]"
    if buffer.count is Count.ANY:
        call = f"reader.get_view({ref})"
    else:
        dtype = "dtype.numpy_dtype" if buffer.dtype == COLUMN_TYPE else repr(buffer.dtype)
        call = f"reader.get_array({ref}, {dtype}, {buffer.count.value})"
    if buffer.optional:
        src.line(f"{target} = {call} if {buffer.key!r} in spec else None")
    else:
        src.line(f"{target} = {call}")


for _type in DataType:
    _type.encode_column = column_encoder(_type)


# --- where the buffers of a body lie ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PlacedColumn:
    """A fixed-width column of a body :func:`locate` found: each buffer it has, with
    its offset in the payload."""

    name: str
    dtype: Any
    dim: int | None
    buffers: tuple[tuple[Buffer, int], ...]


@dataclass(frozen=True, slots=True)
class Placed:
    """A body whose every buffer has a size its JSON part fixes, and where they lie."""

    names: tuple[str, ...]
    rows: int
    buffers: tuple[tuple[Buffer, int], ...]
    """Each row buffer (and int64 primary keys) with its offset in the payload."""
    columns: tuple[PlacedColumn, ...] = ()

    def at(self, buffer: Buffer) -> int:
        return next(at for found, at in self.buffers if found is buffer)

    @property
    def end(self) -> int:
        """Where its last buffer ends in the payload."""
        ends = [at + (b.nbytes(self.rows) or 0) for b, at in self.buffers]
        for column in self.columns:
            ends += [
                at + (b.nbytes(self.rows, column.dim, column.dtype.numpy_dtype) or 0)
                for b, at in column.buffers
            ]
        return max(ends)


def _ref(value: Any, base: int, nbytes: int) -> int | None:
    """The offset in the payload of a buffer reference holding exactly ``nbytes`` (> 0)
    bytes, if ``value`` is one."""
    if type(value) is not dict or nbytes <= 0:
        return None
    offset, size = value.get("o"), value.get("n")
    if type(offset) is not int or type(size) is not int or offset < 0 or size != nbytes:
        return None
    return base + offset


def locate(
    layout: BodyLayout,
    body: Any,
    base: int,
    types: type[DeclaredTypes] = DataType,
    column_layout: ColumnLayout = COLUMN,
) -> Placed | None:
    """Where the buffers of ``body`` (the parsed JSON part of a payload
    :func:`msgstream.wire.codec.decode` accepted, its buffers from ``base`` on) lie, if it has
    rows and its every buffer is one whose size the JSON part fixes and whose bytes need
    no check (int64 keys, fixed-width columns): what a decode plan views. None: decode
    each payload with this body in full."""
    if type(body) is not dict:
        return None
    rows = body.get(layout.rows)
    if type(rows) is not int or rows <= 0:
        return None
    names = tuple(body.get(name) for name in layout.names)
    if any(type(name) is not str for name in names):
        return None
    placed = []
    for buffer in placed_buffers(layout):
        at = _ref(body.get(buffer.key), base, buffer.nbytes(rows))
        if at is None:
            return None
        placed.append((buffer, at))
    columns: list[PlacedColumn] = []
    if layout.columns is not None:
        specs = body.get(layout.columns)
        if type(specs) is not list:
            return None
        for spec in specs:
            column = _locate_column(spec, rows, base, types, column_layout)
            if column is None:
                return None
            columns.append(column)
    return Placed(names, rows, tuple(placed), tuple(columns))  # type: ignore[arg-type]


def _locate_column(
    spec: Any, rows: int, base: int, types: type[DeclaredTypes], layout: ColumnLayout
) -> PlacedColumn | None:
    if type(spec) is not dict or type(spec.get(layout.name)) is not str:
        return None
    wire = spec.get(layout.dtype)
    if not isinstance(wire, str):
        return None
    try:
        dtype = types(wire)
    except ValueError:
        return None
    dim = spec.get(layout.dim)
    if not dtype.storage.viewable or (dim is not None and (type(dim) is not int or dim <= 0)):
        return None
    if dtype.is_vector != (dim is not None):
        return None
    placed = []
    for buffer in layout.buffers(dtype.storage):
        if buffer.optional and buffer.key not in spec:
            continue
        at = _ref(spec.get(buffer.key), base, buffer.nbytes(rows, dim, dtype.numpy_dtype))
        if at is None:
            return None
        placed.append((buffer, at))
    return PlacedColumn(spec[layout.name], dtype, dim, tuple(placed))


def placed_buffers(layout: BodyLayout) -> tuple[Buffer, ...]:
    """The buffers of a body :func:`locate` places, in :attr:`Placed.buffers` order: the
    per-row ones, then int64 keys."""
    return layout.buffers + (() if layout.keys is None else (layout.keys.numbers,))


def body_viewer(layout: BodyLayout) -> Callable[[Any, bytes], dict[str, Any]]:
    """``view(plan, payload)``: the attributes of a body laid out as ``layout``, its
    buffers as numpy views of ``payload``, for a decode plan made from :func:`locate`'s
    :class:`Placed` (what :meth:`msgstream.wire.plans.Plan.build_body` returns). The plan has
    ``rows`` (the arrays' shape), ``offsets`` (of :func:`placed_buffers`, in order) and,
    with columns, ``columns`` (each building its column from the payload)."""
    src = Source()
    scope: dict[str, Any] = {"ndarray": np.ndarray}
    with src.block("def view(plan, payload):"):
        src.line("rows = plan.rows")
        src.line("at = plan.offsets")
        items = []
        for number, buffer in enumerate(placed_buffers(layout)):
            scope[f"item_{number}"] = np.dtype(buffer.item_type)
            items.append(f"{buffer.name!r}: ndarray(rows, item_{number}, payload, at[{number}])")
        if layout.columns is not None:
            items.append(f"{layout.columns!r}: [column.build(payload) for column in plan.columns]")
        src.line("return {" + ", ".join(items) + "}")
    return src.compile("view", scope)


@dataclass(frozen=True, slots=True)
class Slots:
    """Where each number of a body's JSON part goes in a row of numbers (a message's
    *layout*, for readers that read many bodies' numbers as one array: the Spark
    bridge's Arrow reader): the row count, then for each buffer the offset and, in the
    next slot, the size, then a block per column (its rows, its dim, its buffers')."""

    rows: int
    buffers: dict[str, int]
    columns: tuple[ColumnSlots, ...]
    width: int


@dataclass(frozen=True, slots=True)
class ColumnSlots:
    rows: int
    dim: int
    buffers: dict[str, int]
    """The offset slot of each of its buffers (the size is in the next)."""


def slots(
    layout: BodyLayout, storages: list[Storage], column_layout: ColumnLayout = COLUMN
) -> Slots:
    """The slots of an Insert body whose columns are of ``storages`` (in body order)."""
    at = count()
    rows = next(at)
    buffers = {b.key: _pair(at) for b in layout.buffers}
    columns = tuple(
        ColumnSlots(next(at), next(at), {b.key: _pair(at) for b in column_layout.buffers(s)})
        for s in storages
    )
    return Slots(rows, buffers, columns, next(at))


def _pair(at: Iterator[int]) -> int:
    first = next(at)
    next(at)
    return first


__all__ = [
    "COLLECTION",
    "COLUMN",
    "COLUMN_TYPE",
    "DATA",
    "DELETE",
    "FIXED",
    "FIXED_VALUES",
    "INSERT",
    "NULLS",
    "OFFSETS",
    "PACKED",
    "PARTITION",
    "ROWS",
    "ROW_IDS",
    "ROW_TIMESTAMPS",
    "VALIDITY",
    "Buffer",
    "BodyLayout",
    "ColumnLayout",
    "ColumnSlots",
    "Count",
    "DataType",
    "DeclaredTypes",
    "Keys",
    "Placed",
    "PlacedColumn",
    "Slots",
    "Storage",
    "TypeSpec",
    "body_decoder",
    "body_encoder",
    "body_viewer",
    "column_decoder",
    "column_encoder",
    "locate",
    "placed_buffers",
    "slots",
    "source",
]
