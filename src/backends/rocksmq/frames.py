"""The frames processes sharing a rocksmq store exchange over its socket, declared once.

A frame is a fixed header (:data:`HEADER_FIELDS`, little-endian), then its *control* (an
orjson array of the operation's fields) and its *blobs* (raw bytes: a ``u32`` length per
blob, then the blobs end to end)::

    size u32 | op u8 | request u32 | control_len u32 | blob_count u32 |
    control (control_len bytes) | lengths (blob_count x u32) | blobs

``size`` counts every byte after itself. Payloads travel as blobs, never inside JSON and
never pickled. :data:`LAYOUTS` declares, per operation, the fields of its request and of
its reply (name and the exact types allowed) and whether blobs follow; encoding,
decoding and validation are derived from it (:func:`encode`, :class:`FrameDecoder`,
:func:`checked`). A reply is a frame with op :attr:`Op.REPLY` (laid out as its request's
reply) or :attr:`Op.ERROR`, carrying the request's number.

Everything is bounded in bytes: a frame over the decoder's limit, a truncated or
inconsistent one, an unknown op or a control that is not the declared array is a
:class:`FrameError`; whoever reads it closes the connection and logs why.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum
from itertools import accumulate, product
from typing import Any, NamedTuple, cast

import orjson

from msgstream.configuration.limits import DEFAULT_MAX_MESSAGE_BYTES, MiB
from msgstream.errors import MsgStreamError

VERSION = 1
"""The protocol's version, exchanged in :attr:`Op.HELLO`: both sides must speak the same."""

HEADER_FIELDS: tuple[tuple[str, str], ...] = (
    ("size", "I"),
    ("op", "B"),
    ("request", "I"),
    ("control_len", "I"),
    ("blob_count", "I"),
)
"""(name, struct code) of each header field, in wire order."""
HEADER = struct.Struct("<" + "".join(code for _, code in HEADER_FIELDS))
SIZE_FIELD = struct.Struct("<" + HEADER_FIELDS[0][1])
AFTER_SIZE = HEADER.size - SIZE_FIELD.size
"""The header's bytes that ``size`` counts."""
_REST = struct.Struct("<" + "".join(code for _, code in HEADER_FIELDS[1:]))

MIN_FRAME_LIMIT = DEFAULT_MAX_MESSAGE_BYTES
"""The smallest frame limit an owner announces (it grows with ``max_message_bytes``)."""
FRAME_SLACK = MiB
"""Bytes a frame may hold beyond its payloads (control, lengths, properties)."""


class FrameError(MsgStreamError):
    """A frame that cannot be read: the connection it came on is closed."""


class Op(IntEnum):
    HELLO = 1
    ENSURE_CHANNEL = 2
    HAS_CHANNEL = 3
    LIST_CHANNELS = 4
    DELETE_CHANNEL = 5
    APPEND = 6
    READ = 7
    CANCEL_READ = 8
    SUBSCRIBE = 9
    CONSUMER_OPENED = 10
    CONSUMER_CLOSED = 11
    SEEK = 12
    ACK = 13
    LATEST = 14
    RETAINED = 15
    PEEK = 16
    LIST_SUBSCRIPTIONS = 17
    DELETE_SUBSCRIPTION = 18
    REPLY = 0x80
    ERROR = 0x81

    # Enum hashes a member by its name, in Python, on every dict lookup; an operation is
    # looked up several times a frame. Its int's hash is equal for equal values too.
    __hash__ = int.__hash__


_OPS = {int(op): op for op in Op}

Kind = tuple[type, ...]
"""The exact types a control field may hold (``bool`` is not an ``int`` here)."""
INT: Kind = (int,)
STR: Kind = (str,)
BOOL: Kind = (bool,)
OPT_INT: Kind = (int, type(None))
LIST: Kind = (list,)
OPT_MAP: Kind = (dict, type(None))
MAP: Kind = (dict,)

Fields = tuple[tuple[str, Kind], ...]


@dataclass(frozen=True, slots=True)
class Layout:
    """What one operation's request and reply carry."""

    request: Fields
    reply: Fields = ()
    request_blobs: bool = False
    reply_blobs: bool = False


_CHANNEL = ("channel", STR)
_SUB = ("subscription", STR)

LAYOUTS: dict[Op, Layout] = {
    Op.HELLO: Layout(
        (("version", INT), ("pid", INT)),
        (("version", INT), ("pid", INT), ("frame_limit", INT)),
    ),
    Op.ENSURE_CHANNEL: Layout((_CHANNEL,)),
    Op.HAS_CHANNEL: Layout((_CHANNEL,), (("exists", BOOL),)),
    Op.LIST_CHANNELS: Layout((), (("channels", LIST),)),
    Op.DELETE_CHANNEL: Layout((_CHANNEL,)),
    # An idempotent append: (producer, seq) identifies it across retries (see
    # RocksStore.append_once); the reply is the first id, the rest follow one by one.
    Op.APPEND: Layout(
        (_CHANNEL, ("producer", INT), ("seq", INT), ("sync", BOOL), ("properties", OPT_MAP)),
        (("first_id", INT),),
        request_blobs=True,
    ),
    # Reads from ``from_id`` on; with nothing there yet, the owner answers once something
    # is appended or after ``wait_ms``. Reply blobs: the MessageIDs as their bytes (9
    # each: tag + big-endian id, end to end), then the payloads, then
    # (``with_properties``) each record's properties as JSON ("" for none). ``handle``
    # names the reading consumer (CANCEL_READ).
    Op.READ: Layout(
        (
            ("handle", INT),
            _CHANNEL,
            ("from_id", INT),
            ("limit", INT),
            ("max_bytes", INT),
            ("wait_ms", INT),
        ),
        (("next_read", INT), ("with_properties", BOOL)),
        reply_blobs=True,
    ),
    Op.CANCEL_READ: Layout((("handle", INT),)),
    Op.SUBSCRIBE: Layout((_CHANNEL, _SUB, ("position", STR)), (("start", OPT_INT),)),
    Op.CONSUMER_OPENED: Layout((_CHANNEL, _SUB, ("count", INT))),
    Op.CONSUMER_CLOSED: Layout((("handle", INT), _CHANNEL, _SUB)),
    Op.SEEK: Layout((_CHANNEL, _SUB, ("msg_id", INT), ("inclusive", BOOL)), (("next_read", INT),)),
    Op.ACK: Layout((_CHANNEL, _SUB, ("resume_at", INT))),
    Op.LATEST: Layout((_CHANNEL,), (("last_id", OPT_INT),)),
    Op.RETAINED: Layout((_CHANNEL,), (("first_id", OPT_INT), ("count", INT))),
    Op.PEEK: Layout((_CHANNEL, ("msg_id", INT)), (("found", BOOL),), reply_blobs=True),
    Op.LIST_SUBSCRIPTIONS: Layout((_CHANNEL,), (("end_id", INT), ("subscriptions", LIST))),
    Op.DELETE_SUBSCRIPTION: Layout((_CHANNEL, _SUB)),
}
ERROR_FIELDS: Fields = (("kind", STR), ("message", STR), ("attributes", MAP))
"""An :attr:`Op.ERROR` reply: the error's class name, its text, its attributes."""


class Frame(NamedTuple):
    op: Op
    request: int
    control: list[Any]
    blobs: list[bytes]


_LENGTH_STRUCTS = [struct.Struct(f"<{count}I") for count in range(17)]
"""The blob-lengths array of a frame with up to 16 blobs, compiled once (the common
frames: a send of one message, a read reply of a few)."""


def _lengths_struct(count: int) -> struct.Struct:
    if count < len(_LENGTH_STRUCTS):
        return _LENGTH_STRUCTS[count]
    return struct.Struct(f"<{count}I")


def encode(op: Op, request: int, control: Sequence[Any], blobs: Sequence[bytes] = ()) -> bytes:
    """One frame, ready to write."""
    body = orjson.dumps(control)
    count = len(blobs)
    if not count:
        return HEADER.pack(AFTER_SIZE + len(body), op, request, len(body), 0) + body
    if count == 1:  # a send of one message: no lengths array to build
        (blob,) = blobs
        head = HEADER.pack(AFTER_SIZE + len(body) + 4 + len(blob), op, request, len(body), 1)
        return b"".join((head, body, SIZE_FIELD.pack(len(blob)), blob))
    lengths = list(map(len, blobs))
    size = AFTER_SIZE + len(body) + 4 * count + sum(lengths)
    head = HEADER.pack(size, op, request, len(body), count)
    return b"".join((head, body, _lengths_struct(count).pack(*lengths), *blobs))


def checked(fields: Fields, control: Any, what: str) -> list[Any]:
    """``control`` if it is the array ``fields`` declares, else a :class:`FrameError`."""
    if type(control) is not list or len(control) != len(fields):
        raise FrameError(f"{what}: expected {len(fields)} control field(s), got {control!r:.200}")
    for value, (name, kind) in zip(control, fields, strict=True):
        if type(value) not in kind:
            raise FrameError(f"{what}: field {name!r} is {type(value).__name__}")
    return control


def _shapes(fields: Fields) -> frozenset[tuple[type, ...]]:
    """Every tuple of types a control laid out as ``fields`` may have: checking one is a
    set lookup (what :func:`checked` finds field by field, with the reason)."""
    return frozenset(product(*(kind for _, kind in fields)))


_REQUEST_SHAPES = {op: _shapes(layout.request) for op, layout in LAYOUTS.items()}
_REPLY_SHAPES = {op: _shapes(layout.reply) for op, layout in LAYOUTS.items()}
_ERROR_SHAPES = _shapes(ERROR_FIELDS)


def check_request(op: Op, control: Any, blobs: list[bytes]) -> None:
    """A request of ``op`` as its layout declares it, else a :class:`FrameError`."""
    layout = LAYOUTS[op]
    if _fits(control, _REQUEST_SHAPES[op]) and (layout.request_blobs or not blobs):
        return  # the usual request: no text is made for an error that is not there
    checked(layout.request, control, op.name)
    _check_blobs(layout.request_blobs, blobs, f"{op.name} frame")


def check_reply(asked: Op, control: Any, blobs: list[bytes]) -> None:
    """The reply to a request of ``asked`` as its layout declares it, else a
    :class:`FrameError`."""
    layout = LAYOUTS[asked]
    if _fits(control, _REPLY_SHAPES[asked]) and (layout.reply_blobs or not blobs):
        return
    checked(layout.reply, control, f"{asked.name} reply")
    _check_blobs(layout.reply_blobs, blobs, f"{asked.name} reply")


def _fits(control: Any, shapes: frozenset[tuple[type, ...]]) -> bool:
    """Whether ``control`` is an array of one of ``shapes`` (see :func:`_shapes`)."""
    return type(control) is list and tuple(map(type, control)) in shapes


def check_error(control: Any) -> list[Any]:
    """The control of an :attr:`Op.ERROR` frame, if it is laid out as one."""
    if _fits(control, _ERROR_SHAPES):
        return cast(list[Any], control)
    return checked(ERROR_FIELDS, control, "ERROR")


def _check_blobs(allowed: bool, blobs: list[bytes], what: str) -> None:
    if blobs and not allowed:
        raise FrameError(f"{what}: unexpected blobs")


READ_ROOM = 1024 * 1024
"""The least free room :meth:`FrameDecoder.get_buffer` offers a socket read (a busy
client reads once per turn of its event loop: a read may take a whole large reply)."""


class FrameDecoder:
    """Cuts a byte stream into frames, refusing any over ``limit`` bytes.

    Bytes come in through :meth:`feed`, or are read straight into the decoder's buffer
    (:meth:`get_buffer`, then :meth:`buffer_updated`: what an
    :class:`asyncio.BufferedProtocol` does). The buffer is kept and reused: a socket read
    neither allocates a new bytes object nor copies it once more (with large replies,
    fresh allocations were page faults on every read)."""

    __slots__ = ("_buffer", "_end", "_start", "_whole", "limit")

    def __init__(self, limit: int) -> None:
        self._buffer = bytearray(READ_ROOM)
        self._start = 0
        """Where the first byte not yet cut into a frame is."""
        self._end = 0
        """Where the bytes read so far end."""
        self._whole: memoryview | None = None
        """A view of the whole buffer, sliced for every read that starts at its front (the
        usual read: the last one ended on a frame's end); released before the buffer is
        resized, which a view forbids."""
        self.limit = limit

    @property
    def buffered(self) -> int:
        return self._end - self._start

    def get_buffer(self, sizehint: int = -1) -> memoryview:
        """Free room at the end of the buffer for the next read: at least
        :data:`READ_ROOM` bytes, more for the rest of a large frame, but never more than
        what has arrived of it (a header alone does not make the buffer grow to the size
        it claims). Nothing may hold a view of the buffer when this is called (a read's
        view is gone by then)."""
        buffer, start, end = self._buffer, self._start, self._end
        if not end and len(buffer) <= 2 * READ_ROOM:  # nothing unfinished: the front
            whole = self._whole
            if whole is None:
                whole = self._whole = memoryview(buffer)
            return whole[:]  # the reader may release its view: not this one
        need = READ_ROOM
        if end - start >= SIZE_FIELD.size:
            (size,) = SIZE_FIELD.unpack_from(buffer, start)
            if size <= self.limit:  # a size over it is refused once its bytes are cut
                rest = start + SIZE_FIELD.size + size - end
                need = max(need, min(rest, end - start))
        if len(buffer) - end < need and start:  # move what is unfinished to the front
            buffer[: end - start] = buffer[start:end]
            end -= start
            self._start, self._end = 0, end
        if len(buffer) - end < need:
            self._release_whole()
            buffer.extend(bytes(need - (len(buffer) - end)))
        elif len(buffer) > 2 * READ_ROOM and end + need < len(buffer) // 4:
            self._release_whole()
            del buffer[max(end + need, READ_ROOM) :]  # a large frame has passed: shrink
        return memoryview(buffer)[end:]

    def _release_whole(self) -> None:
        whole, self._whole = self._whole, None
        if whole is not None:
            whole.release()

    def buffer_updated(self, nbytes: int) -> list[Frame]:
        """The frames that the ``nbytes`` just read into :meth:`get_buffer`'s room
        complete."""
        self._end += nbytes
        return self._cut()

    def feed(self, data: bytes) -> list[Frame]:
        """The frames ``data`` completes (bytes of an unfinished one are kept)."""
        frames: list[Frame] = []
        view = memoryview(data)
        while view:
            room = self.get_buffer()
            n = min(len(room), len(view))
            room[:n] = view[:n]
            room.release()
            view = view[n:]
            frames.extend(self.buffer_updated(n))
        return frames

    def _cut(self) -> list[Frame]:
        buffer, start, end_of_data = self._buffer, self._start, self._end
        frames: list[Frame] = []
        while end_of_data - start >= SIZE_FIELD.size:
            (size,) = SIZE_FIELD.unpack_from(buffer, start)
            if size < AFTER_SIZE or size > self.limit:
                raise FrameError(
                    f"frame of {size} bytes (the limit is {self.limit}, the header alone "
                    f"{AFTER_SIZE})"
                )
            end = start + SIZE_FIELD.size + size
            if end > end_of_data:
                break
            frames.append(_frame(buffer, start, end))
            start = end
        if start == end_of_data:
            self._start = self._end = 0  # all cut: the next read starts at the front
        else:
            self._start = start
        return frames


_new_frame = tuple.__new__
"""Builds a :class:`Frame` from a tuple without the Python-level ``__new__`` a NamedTuple
adds (the fields are in order already)."""


def _frame(buffer: bytearray, start: int, end: int) -> Frame:
    _, raw_op, request, control_len, count = HEADER.unpack_from(buffer, start)
    op = _OPS.get(raw_op)
    if op is None:
        raise FrameError(f"unknown operation {raw_op:#x}")
    at = start + HEADER.size
    if control_len > end - at or 4 * count > end - at - control_len:
        raise FrameError(
            f"{op.name} frame: control of {control_len} bytes and {count} blob(s) do not "
            f"fit its {end - start} bytes"
        )
    try:  # a small control is cheaper copied out than viewed
        control = orjson.loads(buffer[at : at + control_len])
    except orjson.JSONDecodeError as exc:
        raise FrameError(f"{op.name} frame: control is not JSON ({exc})") from None
    at += control_len
    if not count:
        if at != end:
            raise FrameError(f"{op.name} frame: {end - at} byte(s) after its control")
        return _new_frame(Frame, (op, request, control, []))
    if count == 1:  # a send of one message: no lengths array to sum
        (length,) = SIZE_FIELD.unpack_from(buffer, at)
        at += SIZE_FIELD.size
        if length != end - at:
            raise FrameError(
                f"{op.name} frame: blobs of {length} bytes declared, {end - at} present"
            )
        return _new_frame(Frame, (op, request, control, [bytes(memoryview(buffer)[at:end])]))
    lengths = _lengths_struct(count).unpack_from(buffer, at)
    at += 4 * count
    if sum(lengths) != end - at:
        raise FrameError(
            f"{op.name} frame: blobs of {sum(lengths)} bytes declared, {end - at} present"
        )
    data = bytes(memoryview(buffer)[at:end])  # one copy (a bytearray slice makes two)
    if count == 2:  # a read reply of one record: no running sums to build
        first = lengths[0]
        blobs = [data[:first], data[first:]]
    else:
        ends = list(accumulate(lengths))
        starts = [0, *ends[:-1]]
        blobs = list(map(data.__getitem__, map(slice, starts, ends)))
    return _new_frame(Frame, (op, request, control, blobs))
