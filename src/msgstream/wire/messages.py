"""The message model: ``TsMsg`` and the built-in message types.

Every message carries a header (type, ``msg_id``, ``timestamp``, ``source_id``) and a body.
Built-in DML types keep their columns as numpy arrays so the codec can ship them as raw
buffers. User types subclass :class:`TsMsg`, set ``MSG_TYPE`` to a code >= 1000 and are
registered with :func:`msgstream.wire.codec.register_message_type`; their extra dataclass
fields must be JSON-serialisable unless they override ``encode_body``/``decode_body``.

A message a stream builds from a decode plan makes some fields on first use; each class
names those with :func:`msgstream.wire.lazy.deferred` (see :mod:`msgstream.wire.lazy`).
"""

from __future__ import annotations

import dataclasses
import enum
import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Required, Self, TypedDict, TypeVar, Unpack

import numpy as np
import numpy.typing as npt

from ..errors import CodecError, DecodeError, MissingTimestampError
from . import bodies, envelope
from .buffers import BodyReader, BodyWriter
from .lazy import (
    DeferredBody,
    DeferredEmptyList,
    DeferredPosition,
    DeferredSize,
    LazyBody,
    deferred,
)
from .position import MsgPosition
from .schema import CollectionSchema, FieldData, decode_column, values_equal


class MsgType(enum.IntEnum):
    TIME_TICK = 1
    INSERT = 2
    DELETE = 3
    CREATE_COLLECTION = 4
    DROP_COLLECTION = 5
    CREATE_PARTITION = 6
    DROP_PARTITION = 7


USER_TYPE_MIN = 1000
"""User message types use codes from here up to 65535."""


class Header(TypedDict):
    """The envelope fields every message has."""

    msg_id: int
    timestamp: int
    source_id: int


_HEADER_FIELDS = frozenset({"msg_id", "timestamp", "source_id", "hash_keys", "position", "size"})

# JSON scalar fields a decoded body is checked against (annotations are strings here).
_SCALAR_TYPES: dict[Any, tuple[type, ...]] = {
    "str": (str,),
    "int": (int,),
    "float": (int, float),
    "bool": (bool,),
    str: (str,),
    int: (int,),
    float: (int, float),
    bool: (bool,),
}


_BODY_FIELDS: dict[type, tuple[str, ...]] = {}


def _body_field_names(cls: type) -> tuple[str, ...]:
    names = _BODY_FIELDS.get(cls)
    if names is None:
        fields = dataclasses.fields(cls)
        names = _BODY_FIELDS[cls] = tuple(f.name for f in fields if f.name not in _HEADER_FIELDS)
    return names


@functools.cache
def _scalar_fields(cls: type) -> tuple[tuple[str, tuple[type, ...]], ...]:
    return tuple(
        (f.name, _SCALAR_TYPES[f.type])
        for f in dataclasses.fields(cls)
        if f.type in _SCALAR_TYPES and f.name not in _HEADER_FIELDS
    )


def _check_scalars(cls: type, body: dict[str, Any]) -> None:
    """Refuse a body whose plain ``str``/``int``/``float``/``bool`` fields have other types."""
    for name, expected in _scalar_fields(cls):
        if name not in body:
            continue
        value = body[name]
        if not isinstance(value, expected) or (isinstance(value, bool) and bool not in expected):
            raise DecodeError(
                f"{cls.__name__}: field {name!r} must be {expected[-1].__name__}, "
                f"got {type(value).__name__}"
            )


_STAMPS_DTYPE = bodies.ROW_TIMESTAMPS.item_type
_TIME_RANGE = envelope.fields_struct("begin_ts", "end_ts")
_TIME_RANGE_AT = envelope.offset("begin_ts")


@deferred(hash_keys=DeferredEmptyList(), position=DeferredPosition(None), size=DeferredSize(0))
@dataclass(kw_only=True, eq=False)
class TsMsg:
    """Base of every message.

    ``hash_keys`` only steer routing and are not serialised; ``position`` is set on
    consume; ``size`` is the encoded size (set by the codec).
    """

    MSG_TYPE: ClassVar[int] = 0

    lazy_body: ClassVar[LazyBody | None] = None
    """What a message built by a decode plan builds its deferred fields from (see
    :mod:`msgstream.wire.lazy`); None on every other message. Not a dataclass field: no part of
    equality, repr or ``replace``, and a copied or pickled message has none."""

    msg_id: int = 0
    timestamp: int = 0
    source_id: int = 0
    hash_keys: list[int] = field(default_factory=list)
    position: MsgPosition | None = None
    size: int = 0

    def adopt_body(self, fields: dict[str, Any], payload: bytes) -> None:
        """Take the deferred body ``fields`` built from ``payload`` by the message's plan,
        except those set meanwhile."""
        state = self.__dict__
        for name, value in fields.items():
            state.setdefault(name, value)

    def __getstate__(self) -> dict[str, Any]:
        """A copied or pickled message is a plain one: deferred fields built, no lazy body."""
        state = self.__dict__
        lazy = state.get("lazy_body")
        if lazy is None:
            return state
        for name in ("hash_keys", "position", "size", *lazy[0].deferred, *lazy[0].shared):
            getattr(self, name)
        return {name: value for name, value in state.items() if name != "lazy_body"}

    @property
    def msg_type(self) -> int:
        return self.MSG_TYPE

    def header(self) -> Header:
        return Header(msg_id=self.msg_id, timestamp=self.timestamp, source_id=self.source_id)

    @property
    def begin_ts(self) -> int:
        return self.timestamp

    @property
    def end_ts(self) -> int:
        return self.timestamp

    def time_range(self) -> tuple[int, int]:
        """``(begin_ts, end_ts)`` in one call (what the codec writes to the envelope)."""
        return self.begin_ts, self.end_ts

    @property
    def is_dml(self) -> bool:
        return False

    def body_fields(self) -> dict[str, Any]:
        """The dataclass fields that form the body (everything but the header)."""
        return {name: getattr(self, name) for name in _body_field_names(type(self))}

    def encode_body(self, writer: BodyWriter) -> dict[str, Any]:
        """Return the JSON part of the body; large buffers may go to ``writer``."""
        return self.body_fields()

    @classmethod
    def decode_body(cls, header: Header, body: Any, reader: BodyReader) -> Self:
        if not isinstance(body, dict):
            raise DecodeError(f"{cls.__name__}: body must be a JSON object")
        smuggled = _HEADER_FIELDS.intersection(body)
        if smuggled:
            raise DecodeError(f"{cls.__name__}: body holds header fields {sorted(smuggled)}")
        _check_scalars(cls, body)
        try:
            return cls(**header, **body)
        except TypeError as exc:
            raise DecodeError(f"{cls.__name__}: body does not match the type: {exc}") from None

    def _header_equal(self, other: TsMsg) -> bool:
        return (
            type(self) is type(other)
            and self.msg_id == other.msg_id
            and self.timestamp == other.timestamp
            and self.source_id == other.source_id
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TsMsg):
            return NotImplemented
        if not self._header_equal(other):
            return False
        mine, theirs = self.body_fields(), other.body_fields()
        return mine.keys() == theirs.keys() and all(values_equal(mine[k], theirs[k]) for k in mine)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(self._repr_fields())})"

    def _repr_fields(self) -> list[str]:
        """What ``repr`` shows: the header, and the channel of a consumed message (never
        the body, which may be large)."""
        shown = [f"msg_id={self.msg_id}", f"timestamp={self.timestamp}"]
        shown.append(f"source_id={self.source_id}")
        position = self.position
        if position is not None:
            shown.append(f"channel={position.channel!r}")
        return shown


@dataclass(kw_only=True, eq=False, repr=False)
class TimeTickMsg(TsMsg):
    """A promise that no later message on this channel has a timestamp <= ``timestamp``."""

    MSG_TYPE: ClassVar[int] = MsgType.TIME_TICK


_M = TypeVar("_M", bound="TsMsg")
U64Array = npt.NDArray[np.uint64]
_U64_LIMIT = 1 << 64
I64Array = npt.NDArray[np.int64]


def _row_timestamps(values: Any, rows: int, default: int, where: str) -> U64Array:
    if values is None or (len(values) == 0 and rows > 0):
        return np.full(rows, default, dtype=np.uint64)
    array = np.asarray(values, dtype=np.uint64)
    if array.shape != (rows,):
        raise ValueError(f"{where}: {array.shape[0]} row timestamps for {rows} rows")
    return array


@deferred(
    collection_name=DeferredBody(),
    partition_name=DeferredBody("_default"),
    row_timestamps=DeferredBody(None),
)
@dataclass(kw_only=True, eq=False, repr=False)
class DmlMsg(TsMsg):
    """Rows with one timestamp each (Insert, Delete).

    ``row_timestamps`` defaults to the message timestamp for every row; ``begin_ts`` /
    ``end_ts`` are their min / max. Decoded messages take that range from the envelope;
    built ones compute it once per ``row_timestamps`` array (replace the array, do not
    modify it in place, to change it).
    """

    collection_name: str
    partition_name: str = "_default"
    row_timestamps: U64Array | None = None

    @property
    def num_rows(self) -> int:
        raise NotImplementedError

    @property
    def timestamps(self) -> U64Array:
        assert self.row_timestamps is not None
        return self.row_timestamps

    def _init_row_timestamps(self, rows: int, where: str) -> None:
        """Fill ``row_timestamps`` from the message timestamp where not given; a message
        with no timestamp takes the latest of its row timestamps, and one with neither
        is refused (never a 0, which every time tick would pass as late)."""
        given = self.row_timestamps
        if self.timestamp == 0:
            latest = int(np.max(given)) if given is not None and len(given) else 0
            if latest == 0:
                raise MissingTimestampError(where)
            self.timestamp = latest
        stamps = _row_timestamps(given, rows, self.timestamp, where)
        self.row_timestamps = stamps
        if given is None or len(given) == 0:
            # Defaulted: every row has the message timestamp, so the range is known
            # without reducing the array.
            self.__dict__["_ts_span"] = (stamps, self.timestamp, self.timestamp)

    @property
    def is_dml(self) -> bool:
        return True

    def _repr_fields(self) -> list[str]:
        try:
            rows = str(self.num_rows)
        except CodecError:  # an unchecked body that does not decode: reading it reports it
            rows = "?"
        return [*super()._repr_fields(), f"rows={rows}"]

    def _take_rows(self, cls: type[_M], rows: npt.NDArray[np.intp], sliced: dict[str, Any]) -> _M:
        """A ``cls`` holding only the given rows: this header, collection and partition,
        these rows of the row timestamps and hash keys, and ``sliced`` (the kind's own
        columns, already cut to ``rows``)."""
        indices = rows.tolist()
        return _assemble(
            cls,
            self.header(),
            {
                "collection_name": self.collection_name,
                "partition_name": self.partition_name,
                "row_timestamps": self.timestamps[rows],
                **sliced,
            },
            [self.hash_keys[i] for i in indices] if self.hash_keys else [],
        )

    # The range is cached in ``_ts_span`` with the array it was computed from (replacing
    # the array invalidates it). Both are read through ``__dict__``: a lazily decoded
    # message answers from its envelope without building its arrays.

    def _ts_range(self) -> tuple[int, int]:
        state = self.__dict__
        span = state.get("_ts_span")
        stamps = state.get("row_timestamps")
        if span is not None and span[0] is stamps:
            return span[1], span[2]
        lazy = self.lazy_body
        if lazy is not None and stamps is None:  # arrays not built: the envelope knows
            begin, end = _TIME_RANGE.unpack_from(lazy[1], _TIME_RANGE_AT)
            state["_ts_span"] = (None, begin, end)
            return begin, end
        stamps = self.timestamps
        rows = len(stamps)
        if rows == 1:  # the common small message: no array reductions
            begin = end = int(stamps[0])
        elif rows:
            begin, end = int(stamps.min()), int(stamps.max())
        else:
            begin = end = self.timestamp
        state["_ts_span"] = (stamps, begin, end)
        return begin, end

    def time_range(self) -> tuple[int, int]:
        return self._ts_range()

    def _add_row_timestamps(self, writer: BodyWriter, rows: int) -> dict[str, int]:
        """Append the row timestamps to ``writer``. A small message whose rows share one
        timestamp (the default, and any one-row message) writes it without the array."""
        state = self.__dict__
        span = state.get("_ts_span")
        if rows < 64 and span is not None and span[0] is state.get("row_timestamps"):
            _, begin, end = span
            if begin == end and type(begin) is int and 0 <= begin < _U64_LIMIT:
                return writer.add_bytes(begin.to_bytes(8, "little") * rows)
        return writer.add_array(self.timestamps, _STAMPS_DTYPE, rows)

    def adopt_ts_range(self, begin_ts: int, end_ts: int) -> None:
        """Take ``begin_ts``/``end_ts`` from a trusted source (the decoded envelope)."""
        state = self.__dict__
        state["_ts_span"] = (state.get("row_timestamps"), begin_ts, end_ts)

    def adopt_body(self, fields: dict[str, Any], payload: bytes) -> None:
        state = self.__dict__
        if "row_timestamps" not in state:  # they come from the payload: so does the range
            begin, end = _TIME_RANGE.unpack_from(payload, _TIME_RANGE_AT)
            state["_ts_span"] = (fields["row_timestamps"], begin, end)
        for name, value in fields.items():
            state.setdefault(name, value)

    @property
    def begin_ts(self) -> int:
        return self._ts_range()[0]

    @property
    def end_ts(self) -> int:
        return self._ts_range()[1]


_BUFFER_WRITERS = {bodies.ROW_TIMESTAMPS.key: "_add_row_timestamps"}
"""Insert and Delete write their row timestamps with :meth:`DmlMsg._add_row_timestamps`."""


def _assemble(
    cls: type[_M], header: Header, fields: dict[str, Any], hash_keys: list[int] | None = None
) -> _M:
    """Build a message from parts already known to be consistent (decoded and checked,
    or sliced from a valid message) without re-running construction-time validation:
    decoding and repacking are on the hot path."""
    msg = cls.__new__(cls)
    state = msg.__dict__
    state.update(header)
    state.update(hash_keys=hash_keys or [], position=None, size=0)
    state.update(fields)
    return msg


class DmlHeader(TypedDict, total=False):
    """The keyword arguments every Insert and Delete takes besides its rows (for type
    checkers: the constructors' signatures)."""

    msg_id: int
    timestamp: int
    source_id: int
    hash_keys: list[int]
    position: MsgPosition | None
    size: int
    collection_name: Required[str]
    partition_name: str
    row_timestamps: U64Array | Sequence[int] | None


@deferred(row_ids=DeferredBody(), fields=DeferredBody())
@dataclass(kw_only=True, eq=False, repr=False)
class InsertMsg(DmlMsg):
    """Rows of one collection partition, column by column."""

    MSG_TYPE: ClassVar[int] = MsgType.INSERT
    BODY: ClassVar[bodies.BodyLayout] = bodies.INSERT

    row_ids: I64Array = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    fields: list[FieldData] = field(default_factory=list)

    if TYPE_CHECKING:
        # The signature type checkers see: ``row_ids`` takes what users have (a list of
        # ints, any integer array) and is stored as an int64 array by __post_init__. At
        # run time the dataclass generates __init__ from the fields above.
        def __init__(
            self,
            *,
            row_ids: Sequence[int] | npt.NDArray[np.integer[Any]] = ...,
            fields: list[FieldData] = ...,
            **header: Unpack[DmlHeader],
        ) -> None: ...

    def __post_init__(self) -> None:
        where = f"InsertMsg(msg_id={self.msg_id}, collection={self.collection_name!r})"
        self.row_ids = np.asarray(self.row_ids, dtype=np.int64)
        rows = self.row_ids.shape[0]
        self._init_row_timestamps(rows, where)
        for column in self.fields:
            if len(column) != rows:
                raise ValueError(
                    f"{where}: field {column.name!r} has {len(column)} rows, not {rows}"
                )

    @property
    def num_rows(self) -> int:
        return len(self.row_ids)

    def field(self, name: str) -> FieldData:
        for column in self.fields:
            if column.name == name:
                return column
        raise KeyError(f"InsertMsg(msg_id={self.msg_id}) has no field {name!r}")

    def take(self, rows: npt.NDArray[np.intp]) -> InsertMsg:
        """A copy holding only the given rows (header kept, hash keys sliced)."""
        return self._take_rows(
            InsertMsg,
            rows,
            {"row_ids": self.row_ids[rows], "fields": [c.take(rows) for c in self.fields]},
        )

    # Generated from the body layout (mypy sees callables, not the methods they are).
    encode_body = bodies.body_encoder(BODY, _BUFFER_WRITERS)  # type: ignore[assignment]
    decode_body = classmethod(  # type: ignore[assignment,var-annotated]
        bodies.body_decoder(BODY, check=_check_scalars, build=_assemble, column=decode_column)
    )


PrimaryKeys = I64Array | list[str]


@deferred(primary_keys=DeferredBody())
@dataclass(kw_only=True, eq=False, repr=False)
class DeleteMsg(DmlMsg):
    """Deletes by primary key (int64 array or list of str), one timestamp per key."""

    MSG_TYPE: ClassVar[int] = MsgType.DELETE
    BODY: ClassVar[bodies.BodyLayout] = bodies.DELETE

    primary_keys: PrimaryKeys = field(default_factory=lambda: np.empty(0, dtype=np.int64))

    if TYPE_CHECKING:
        # As InsertMsg's: keys may be given as a list of ints or strs, or an integer array.
        def __init__(
            self,
            *,
            primary_keys: Sequence[int] | Sequence[str] | npt.NDArray[np.integer[Any]] = ...,
            **header: Unpack[DmlHeader],
        ) -> None: ...

    def __post_init__(self) -> None:
        where = f"DeleteMsg(msg_id={self.msg_id}, collection={self.collection_name!r})"
        keys = self.primary_keys
        if isinstance(keys, list) and keys and all(isinstance(k, str) for k in keys):
            self.primary_keys = list(keys)
        elif isinstance(keys, list) and any(isinstance(k, str) for k in keys):
            raise TypeError(f"{where}: primary keys mix str and non-str values")
        else:
            self.primary_keys = np.asarray(keys, dtype=np.int64)
        self._init_row_timestamps(len(self.primary_keys), where)

    @property
    def num_rows(self) -> int:
        return len(self.primary_keys)

    def take(self, rows: npt.NDArray[np.intp]) -> DeleteMsg:
        keys: PrimaryKeys
        if isinstance(self.primary_keys, np.ndarray):
            keys = self.primary_keys[rows]
        else:
            keys = [self.primary_keys[i] for i in rows.tolist()]
        return self._take_rows(DeleteMsg, rows, {"primary_keys": keys})

    # Generated from the body layout (mypy sees callables, not the methods they are).
    encode_body = bodies.body_encoder(BODY, _BUFFER_WRITERS)  # type: ignore[assignment]
    decode_body = classmethod(  # type: ignore[assignment,var-annotated]
        bodies.body_decoder(BODY, check=_check_scalars, build=_assemble)
    )


@dataclass(kw_only=True, eq=False, repr=False)
class CreateCollectionMsg(TsMsg):
    MSG_TYPE: ClassVar[int] = MsgType.CREATE_COLLECTION

    collection_name: str
    schema: CollectionSchema
    collection_id: int = 0

    def encode_body(self, writer: BodyWriter) -> dict[str, Any]:
        return {
            "collection_name": self.collection_name,
            "collection_id": self.collection_id,
            "schema": self.schema.to_dict(),
        }

    @classmethod
    def decode_body(cls, header: Header, body: Any, reader: BodyReader) -> Self:
        _check_scalars(cls, body)
        return cls(
            **header,
            collection_name=body["collection_name"],
            collection_id=body["collection_id"],
            schema=CollectionSchema.from_dict(body["schema"]),
        )


@dataclass(kw_only=True, eq=False, repr=False)
class DropCollectionMsg(TsMsg):
    MSG_TYPE: ClassVar[int] = MsgType.DROP_COLLECTION

    collection_name: str
    collection_id: int = 0


@dataclass(kw_only=True, eq=False, repr=False)
class CreatePartitionMsg(TsMsg):
    MSG_TYPE: ClassVar[int] = MsgType.CREATE_PARTITION

    collection_name: str
    partition_name: str


@dataclass(kw_only=True, eq=False, repr=False)
class DropPartitionMsg(TsMsg):
    MSG_TYPE: ClassVar[int] = MsgType.DROP_PARTITION

    collection_name: str
    partition_name: str


BUILTIN_TYPES: tuple[type[TsMsg], ...] = (
    TimeTickMsg,
    InsertMsg,
    DeleteMsg,
    CreateCollectionMsg,
    DropCollectionMsg,
    CreatePartitionMsg,
    DropPartitionMsg,
)
