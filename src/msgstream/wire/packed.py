"""Varchar, JSON and binary columns packed as Arrow lays them out: offsets and bytes.

On the wire (codec version 3) such a column is ``rows + 1`` little-endian int64 offsets
into one byte buffer -- UTF-8 text for varchar, one compact JSON text per row for JSON,
raw bytes for binary -- plus an optional null mask (True = the row's value is None;
JSON's None is the text ``null``). Decoding makes no Python object per row: it checks
the offsets (and, for text, that the bytes are UTF-8 cut at character boundaries) and
wraps the buffers in a :class:`PackedValues`, a read-only sequence that makes its items
on first access. A reader that wants columns (the Spark bridge) takes the buffers as they
are: they are already an Arrow string or binary array's.

A JSON column's rows must each be one JSON value (:func:`check_json`): simdjson validates
each row without building its value (a column reader never needs it), and ``orjson``
decides on a column simdjson refuses.
"""

from __future__ import annotations

import enum
import itertools
import struct
import threading
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, overload

import numpy as np
import numpy.typing as npt
import orjson

from ..errors import DecodeError

if TYPE_CHECKING:
    import simdjson

_QUOTE, _BACKSLASH, _COMMA = ord('"'), ord("\\"), ord(",")
_SPECIAL = np.zeros(256, np.bool_)
_SPECIAL[[ord(c) for c in '"\\,[]{}']] = True
_DEPTH = np.zeros(256, np.int64)
_DEPTH[[ord("["), ord("{")]] = 1
_DEPTH[[ord("]"), ord("}")]] = -1
_NULL_TEXT = b"null"

I64Array = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

OFFSETS_DTYPE = "<i8"
"""The offsets' type on the wire (``q`` in :mod:`struct`'s terms)."""


class PackedKind(enum.Enum):
    TEXT = "text"
    JSON = "json"
    BINARY = "binary"


class PackedValues(Sequence[Any]):
    """The values of one varchar, JSON or binary column, packed (see the module doc).

    ``offsets`` (int64, ``len + 1``, from 0) cut ``data``; ``nulls`` marks None rows
    (None: no row is). Items are made once, on first access, and kept.
    """

    __slots__ = ("_items", "data", "kind", "nulls", "offsets")

    def __init__(
        self, kind: PackedKind, offsets: I64Array, data: bytes | memoryview, nulls: BoolArray | None
    ) -> None:
        self.kind = kind
        self.offsets = offsets
        self.data = data
        self.nulls = nulls
        self._items: list[Any] | None = None

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @overload
    def __getitem__(self, index: int) -> Any: ...

    @overload
    def __getitem__(self, index: slice) -> list[Any]: ...

    def __getitem__(self, index: int | slice) -> Any:
        return self.tolist()[index]

    def __iter__(self) -> Iterator[Any]:
        return iter(self.tolist())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PackedValues | list | tuple):
            return self.tolist() == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"PackedValues({self.kind.value}, {self.tolist()!r})"

    def has_nulls(self) -> bool:
        """Whether any value is None (for JSON also the text ``null``), without making
        the values."""
        if self.nulls is not None and bool(self.nulls.any()):
            return True
        if self.kind is not PackedKind.JSON:
            return False
        lengths = np.diff(self.offsets)
        starts = self.offsets[:-1][lengths == len(_NULL_TEXT)]
        if not len(starts):
            return False
        raw = np.frombuffer(self.data, np.uint8)
        four = raw[starts[:, None] + np.arange(len(_NULL_TEXT))]
        return bool((four == np.frombuffer(_NULL_TEXT, np.uint8)).all(axis=1).any())

    def tolist(self) -> list[Any]:
        items = self._items
        if items is None:
            items = self._items = self._make()
        return items

    def _make(self) -> list[Any]:
        raw = bytes(self.data)
        bounds = self.offsets.tolist()
        pieces: list[Any] = [raw[a:b] for a, b in itertools.pairwise(bounds)]
        items: list[Any]
        if self.kind is PackedKind.TEXT:
            items = [p.decode() for p in pieces]
        elif self.kind is PackedKind.JSON:
            items = list(map(orjson.loads, pieces))  # each checked by unpack()
        else:
            items = pieces
        if self.nulls is not None:
            for row in np.flatnonzero(self.nulls).tolist():
                items[row] = None
        return items


def _offsets(lengths: I64Array) -> I64Array:
    out = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=out[1:])
    return out


def _null_mask(values: Sequence[Any]) -> BoolArray | None:
    if None not in values:
        return None
    return np.fromiter((v is None for v in values), np.bool_, len(values))


def _joined(
    kind: PackedKind, values: Sequence[Any]
) -> tuple[bytes, Iterator[int], BoolArray | None]:
    """A text or binary column's bytes joined, the byte length of each value (an
    iterator, in row order) and its null mask."""
    nulls = _null_mask(values)
    items: Sequence[Any] = values if nulls is None else [v or _EMPTY[kind] for v in values]
    if kind is PackedKind.TEXT:
        joined = "".join(items)
        data = joined.encode()
        if len(data) == len(joined):  # ASCII: a character is a byte
            return data, map(len, items), nulls
        return data, map(len, [s.encode() for s in items]), nulls
    return b"".join(items), map(len, items), nulls


def pack(kind: PackedKind, values: Sequence[Any]) -> PackedValues:
    """Pack a column's values (str, JSON-able or bytes, or None). Raises ``ValueError``
    for text that is not encodable as UTF-8 and ``TypeError`` for JSON-unable values."""
    if isinstance(values, PackedValues):
        return values
    if kind is PackedKind.JSON:
        return _pack_json(values)
    data, lengths, nulls = _joined(kind, values)
    return PackedValues(kind, _offsets(np.fromiter(lengths, np.int64, len(values))), data, nulls)


SMALL_COLUMN = 64
"""Below this many rows a column's offsets are packed without numpy: an array costs more
to make than a one-row message takes to encode."""

_OFFSET_STRUCTS: dict[int, struct.Struct] = {}
_PLAIN = (list, tuple)
ONE_VALUE_OFFSETS = struct.Struct("<2q")
"""The offsets of a column of one value of ``n`` bytes: ``pack(0, n)``."""


def wire_parts(
    kind: PackedKind, values: Sequence[Any]
) -> tuple[bytes | memoryview, bytes | memoryview, BoolArray | None]:
    """What the wire carries of a column (see the module doc): its offsets as
    little-endian int64 bytes, its data and its null mask. Same values and errors as
    :func:`pack`, without the arrays for a small column."""
    rows = len(values)
    # An exact type check, not isinstance: PackedValues is a Sequence, and isinstance
    # against an ABC costs ~0.2 us, a twentieth of a one-row message's whole encoding.
    if type(values) not in _PLAIN or kind is PackedKind.JSON or rows >= SMALL_COLUMN:
        packed = pack(kind, values)
        offsets = np.ascontiguousarray(packed.offsets, OFFSETS_DTYPE)
        return offsets.data.cast("B"), packed.data, packed.nulls
    data, lengths, nulls = _joined(kind, values)
    if rows == 1:
        return ONE_VALUE_OFFSETS.pack(0, len(data)), data, nulls  # ends where the data does
    layout = _OFFSET_STRUCTS.get(rows)
    if layout is None:
        layout = _OFFSET_STRUCTS[rows] = struct.Struct(f"<{rows + 1}q")
    return layout.pack(0, *itertools.accumulate(lengths)), data, nulls


_EMPTY = {PackedKind.TEXT: "", PackedKind.BINARY: b""}


def _pack_json(values: Sequence[Any]) -> PackedValues:
    """One compact JSON text per value, from one ``orjson.dumps`` of the whole list cut
    into its elements (no call per value)."""
    count = len(values)
    if not count:
        return PackedValues(PackedKind.JSON, np.zeros(1, np.int64), b"", None)
    whole = orjson.dumps(list(values), option=orjson.OPT_SERIALIZE_NUMPY)
    text = np.frombuffer(whole, np.uint8)[1:-1]  # inside the outer [ ]
    cuts = split_json_array(text)
    if len(cuts) != count - 1:
        raise ValueError(f"split {count} JSON values into {len(cuts) + 1} texts")
    keep = np.ones(len(text), np.bool_)
    keep[cuts] = False
    lengths = np.diff(np.concatenate(([-1], cuts, [len(text)]))) - 1
    return PackedValues(PackedKind.JSON, _offsets(lengths), text[keep].tobytes(), None)


def _real_quotes(
    positions: npt.NDArray[np.intp], chars: npt.NDArray[np.uint8]
) -> npt.NDArray[np.bool_]:
    """Which of the special characters are unescaped quotes."""
    quote: npt.NDArray[np.bool_] = chars == _QUOTE
    backslash: npt.NDArray[np.bool_] = chars == _BACKSLASH
    if not backslash.any():
        return quote
    index = np.arange(len(chars))
    follows = np.concatenate(([False], (positions[1:] == positions[:-1] + 1) & backslash[:-1]))
    run_start = np.maximum.accumulate(np.where(backslash & ~follows, index, 0))
    escaper = backslash & ((index - run_start) % 2 == 0)
    escaped = np.concatenate(([False], escaper[:-1] & (positions[1:] == positions[:-1] + 1)))
    real: npt.NDArray[np.bool_] = quote & ~escaped
    return real


def split_json_array(text: npt.NDArray[np.uint8]) -> npt.NDArray[np.intp]:
    """Where the commas separating the elements of a compact JSON array's inside are.

    A quote delimits a string unless an odd run of backslashes precedes it; brackets and
    braces outside strings give the nesting depth; the commas outside strings at depth
    zero separate the elements. Only those few characters are looked at, with numpy.
    """
    positions = np.flatnonzero(_SPECIAL[text])
    chars = text[positions]
    quote = _real_quotes(positions, chars)
    in_string = (np.cumsum(quote) % 2).astype(np.bool_) | quote
    depth = np.cumsum(np.where(in_string, 0, _DEPTH[chars]))
    cuts: npt.NDArray[np.intp] = positions[(chars == _COMMA) & ~in_string & (depth == 0)]
    return cuts


def unpack(
    kind: PackedKind,
    offsets: I64Array,
    data: memoryview,
    nulls: BoolArray | None,
    where: str,
) -> PackedValues:
    """Check a decoded column's layout; raise :class:`DecodeError` naming ``where``."""
    size = len(data)
    if len(offsets) == 0 or offsets[0] != 0 or offsets[-1] != size:
        raise DecodeError(f"{where}: offsets do not span its {size}-byte buffer")
    if len(offsets) > 1 and bool((np.diff(offsets) < 0).any()):
        raise DecodeError(f"{where}: offsets decrease")
    if kind is PackedKind.TEXT and size:
        try:
            str(data, "utf-8")
        except UnicodeDecodeError as exc:
            raise DecodeError(f"{where}: text is not UTF-8: {exc}") from None
        raw = np.frombuffer(data, np.uint8)
        starts = offsets[:-1]
        starts = starts[starts < size]
        if bool(((raw[starts] & 0xC0) == 0x80).any()):
            raise DecodeError(f"{where}: an offset cuts a UTF-8 character")
    elif kind is PackedKind.JSON and len(offsets) > 1:
        check_json(offsets, data, where)
    return PackedValues(kind, offsets, data, nulls)


def check_json(offsets: I64Array, data: memoryview, where: str) -> None:
    """Every row's text is one JSON value, as ``orjson.loads`` would take it on its own.

    simdjson validates the rows without building Python values, as ``orjson`` would: row
    by row, or, where rows are short and plain (:func:`_joined_pays`), a run of rows at a
    time (:func:`_runs_valid`); docs/benchmarks/spark.md has the figures. Whatever
    simdjson takes, ``orjson`` takes, but for a leading byte order mark; a column where
    simdjson refuses a row (not JSON, or an integer beyond 64 bits, which ``orjson``
    takes as a float), or holding a byte order mark, is parsed by ``orjson``, which gives
    the verdict and the message.

    On failure, the texts joined by commas tell which error it is: not JSON at all, or
    JSON cut at other places than the offsets."""
    raw = bytes(data)
    if _BOM not in raw and (
        _runs_valid(raw, offsets)
        if _joined_pays(raw, len(offsets) - 1)
        else _rows_valid(raw, offsets.tolist())
    ):
        return
    bounds = offsets.tolist()
    pieces = list(map(raw.__getitem__, map(slice, bounds[:-1], bounds[1:])))
    try:
        for _ in map(orjson.loads, pieces):
            pass
    except orjson.JSONDecodeError:
        try:
            orjson.loads(b"[" + b",".join(pieces) + b"]")
        except orjson.JSONDecodeError as exc:
            raise DecodeError(f"{where}: the rows are not JSON texts: {exc}") from None
        raise DecodeError(f"{where}: the offsets do not cut one JSON text per row") from None


_BOM = b"\xef\xbb\xbf"
_STRUCTURAL = (b'"', b",", b"[", b"{")
_SAMPLE_BYTES = 1 << 16
JOINED_NS = (45.0, 5.0)
"""What :func:`_runs_valid` costs per quote, comma or opening bracket (its scan) and per
byte (copying, parsing, scanning), in nanoseconds, measured on this project's benchmark
machine; only the ratios to :data:`ROWS_NS` matter."""
ROWS_NS = (500.0, 1.5)
"""What :func:`_rows_valid` costs per row (a Python call) and per byte, likewise."""
RUN_BYTES = 1 << 20
"""About how many bytes of rows :func:`_runs_valid` hands simdjson at once: few calls,
and a parser (kept per thread) that grows no larger than this, or than the largest row."""


def _joined_pays(raw: bytes, rows: int) -> bool:
    """Whether :func:`_runs_valid` should cost less than a call per row: it pays for
    short rows with few quotes, commas and brackets (counted in the first
    :data:`_SAMPLE_BYTES`), not for long rows or rich ones: numbers and two-field objects
    go joined; 1 KB strings, dozen-field objects and arrays of 20 numbers row by row
    (docs/benchmarks/code-notes.md)."""
    if rows < 2 or not raw:
        return False
    sample = raw[:_SAMPLE_BYTES]
    structural = sum(map(sample.count, _STRUCTURAL)) * len(raw) / len(sample)
    joined = JOINED_NS[0] * structural + JOINED_NS[1] * len(raw)
    return joined < ROWS_NS[0] * rows + ROWS_NS[1] * len(raw)


def _runs_valid(raw: bytes, offsets: I64Array) -> bool:
    """Whether simdjson takes every row (``raw[offsets[i]:offsets[i + 1]]``) of a column
    without a byte order mark (simdjson skips a leading one, ``orjson`` refuses it), in
    runs of about :data:`RUN_BYTES` (:func:`_run_valid`); a run it refuses is tried row
    by row (:func:`_rows_valid`), where a row at the deepest nesting allowed still
    passes. False says nothing of the rows: ``orjson`` decides."""
    rows = len(offsets) - 1
    # a run starts at row 0 and at each row holding a multiple of RUN_BYTES
    marks = np.arange(RUN_BYTES, int(offsets[-1]), RUN_BYTES)
    starts = np.searchsorted(offsets[:-1], marks, "right") - 1
    firsts = [*np.unique(np.concatenate(([0], starts))).tolist(), rows]
    for first, last in itertools.pairwise(firsts):
        run = offsets[first : last + 1] - offsets[first]
        piece = raw[int(offsets[first]) : int(offsets[last])]
        if not (_run_valid(piece, run) or _rows_valid(piece, run.tolist())):
            return False
    return True


def _run_valid(raw: bytes, offsets: I64Array) -> bool:
    """Whether simdjson takes the rows joined by commas as one array whose elements end
    exactly where the rows do: then it takes each row on its own. A run of one row is
    left to :func:`_rows_valid` (``[ ]`` is an array, an empty row no value)."""
    commas = offsets[1:-1]
    if not len(commas):
        return False
    inner = np.insert(np.frombuffer(raw, np.uint8), commas, _COMMA)
    try:
        _simdjson_parser().parse(b"[" + inner.tobytes() + b"]")
    except Exception:  # any refusal (invalid, too deep, a big integer): ask row by row
        return False
    cuts = split_json_array(inner)  # exact on valid JSON
    return len(cuts) == len(commas) and bool((cuts == commas + np.arange(len(commas))).all())


def _rows_valid(raw: bytes, bounds: list[int]) -> bool:
    """Whether simdjson takes every row, one call per row. False says nothing of the
    rows: ``orjson`` decides."""
    parse = _simdjson_parser().parse
    try:
        # Each row is cut and dropped in turn (no list of them all): the parser is
        # reused, and a list of cut rows took as long as parsing them.
        for row in map(slice, bounds[:-1], bounds[1:]):
            parse(raw[row])
    except Exception:  # any refusal (invalid, too deep, a big integer): orjson decides
        return False
    return True


_parsers = threading.local()


def _simdjson_parser() -> simdjson.Parser:
    """This thread's parser: a parser reuses its buffers, and is not shared between
    threads (the Spark bridge builds columns in worker threads). simdjson is imported
    on first use, which a process reading no JSON column does not pay for."""
    parser: simdjson.Parser | None = getattr(_parsers, "parser", None)
    if parser is None:
        import simdjson

        parser = _parsers.parser = simdjson.Parser()
    return parser
