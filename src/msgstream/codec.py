"""The wire format: a fixed binary envelope, an orjson body and raw side buffers.

Layout (little-endian)::

    magic "MS" | version u8 | flags u8 | msg_type u16 | msg_id i64 | timestamp u64 |
    source_id i64 | begin_ts u64 | end_ts u64 | json_len u32 | crc32 u32 |
    json body | side buffers

``begin_ts``/``end_ts`` (for Insert and Delete the min/max of their row timestamps) ride
in the envelope, as in the original's message header, so the time-tick barrier orders
messages without touching their bodies.

``crc32`` covers the envelope fields before it and everything after the envelope, so a
flipped bit in a header field or a vector column is caught, not delivered. Decoding is
strict: any inconsistency raises :class:`DecodeError`.
"""

from __future__ import annotations

import base64
import struct
import zlib
from typing import Any

import numpy as np
import orjson

from .buffers import BodyReader, BodyWriter
from .errors import CodecError, DecodeError, UnknownMessageTypeError
from .messages import BUILTIN_TYPES, USER_TYPE_MIN, DmlMsg, Header, TsMsg
from .schema import CollectionSchema, FieldData

MAGIC = b"MS"
VERSION = 2
_ENVELOPE = struct.Struct("<2sBBHqQqQQII")
ENVELOPE_SIZE = _ENVELOPE.size
_CRC_OFFSET = ENVELOPE_SIZE - 4  # the crc is the envelope's last field
DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024
_JSON_OPTIONS = orjson.OPT_SERIALIZE_NUMPY


class MessageRegistry:
    """Maps message type codes to classes."""

    def __init__(self, types: tuple[type[TsMsg], ...] = ()) -> None:
        self._by_code: dict[int, type[TsMsg]] = {}
        for cls in types:
            self._add(cls)

    def _add(self, cls: type[TsMsg]) -> None:
        self._by_code[cls.MSG_TYPE] = cls

    def register(self, cls: type[TsMsg]) -> type[TsMsg]:
        """Register a user message type (usable as a class decorator)."""
        code = cls.__dict__.get("MSG_TYPE")
        if not isinstance(code, int) or not USER_TYPE_MIN <= code <= 0xFFFF:
            raise ValueError(
                f"{cls.__name__}.MSG_TYPE must be an int in [{USER_TYPE_MIN}, 65535], got {code!r}"
            )
        existing = self._by_code.get(code)
        if existing is not None and existing is not cls:
            raise ValueError(
                f"message type code {code} is already registered to {existing.__name__}"
            )
        self._add(cls)
        return cls

    def unregister(self, cls: type[TsMsg]) -> None:
        if self._by_code.get(cls.MSG_TYPE) is cls:
            del self._by_code[cls.MSG_TYPE]

    def lookup(self, code: int) -> type[TsMsg] | None:
        return self._by_code.get(code)

    def knows(self, cls: type[TsMsg]) -> bool:
        return self._by_code.get(cls.MSG_TYPE) is cls


default_registry = MessageRegistry(BUILTIN_TYPES)


def register_message_type(cls: type[TsMsg]) -> type[TsMsg]:
    """Register a user message type in the default registry."""
    return default_registry.register(cls)


def encode(msg: TsMsg, registry: MessageRegistry = default_registry) -> bytes:
    """Serialise ``msg``; raise ``UnknownMessageTypeError`` for unregistered types."""
    if not registry.knows(type(msg)):
        raise UnknownMessageTypeError(
            type(msg).__name__, "not registered; call register_message_type"
        )
    writer = BodyWriter()
    try:
        body = orjson.dumps(msg.encode_body(writer), option=_JSON_OPTIONS)
    except orjson.JSONEncodeError as exc:
        raise CodecError(f"{_where(msg)}: body is not JSON-serialisable: {exc}") from exc
    chunks = writer.chunks()
    tail = b"".join([body, *chunks]) if chunks else body
    try:
        prefix = _ENVELOPE.pack(
            MAGIC,
            VERSION,
            0,
            msg.MSG_TYPE,
            msg.msg_id,
            msg.timestamp,
            msg.source_id,
            msg.begin_ts,
            msg.end_ts,
            len(body),
            0,
        )[:_CRC_OFFSET]
    except struct.error as exc:
        raise CodecError(
            f"{_where(msg)}: header out of range (msg_id must fit int64, timestamp uint64, "
            f"source_id int64; timestamp={msg.timestamp!r}, source_id={msg.source_id!r}): "
            f"{exc}"
        ) from exc
    crc = zlib.crc32(tail, zlib.crc32(prefix))
    data = b"".join([prefix, crc.to_bytes(4, "little"), tail])
    msg.size = len(data)
    return data


def _where(msg: TsMsg) -> str:
    return f"{type(msg).__name__}(msg_id={msg.msg_id!r})"


def _unpack_envelope(data: bytes) -> tuple[Any, ...]:
    """The envelope fields after magic and version, which it checks."""
    if len(data) < ENVELOPE_SIZE:
        raise DecodeError(f"payload of {len(data)} bytes is shorter than the envelope")
    magic, version, *fields = _ENVELOPE.unpack_from(data)
    if magic != MAGIC:
        raise DecodeError(f"bad magic {magic!r} (not a msgstream payload)")
    if version != VERSION:
        raise DecodeError(f"unsupported codec version {version}")
    return tuple(fields)


def peek_header(data: bytes) -> tuple[int, int, int, int]:
    """``(msg_type, msg_id, timestamp, source_id)`` without decoding the body."""
    _, msg_type, msg_id, ts, source, *_ = _unpack_envelope(data)
    return msg_type, msg_id, ts, source


def decode(
    data: bytes,
    registry: MessageRegistry = default_registry,
    max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
) -> TsMsg:
    """Parse a payload; raise ``DecodeError`` or ``UnknownMessageTypeError``."""
    size = len(data)
    if size > max_bytes:
        raise DecodeError(f"payload of {size} bytes exceeds the limit of {max_bytes}")
    _, msg_type, msg_id, ts, source, begin_ts, end_ts, json_len, crc = _unpack_envelope(data)
    body_end = ENVELOPE_SIZE + json_len
    if body_end > size:
        raise DecodeError(
            f"body of {json_len} bytes announced, {size - ENVELOPE_SIZE} present (truncated)"
        )
    view = memoryview(data)
    if zlib.crc32(view[ENVELOPE_SIZE:], zlib.crc32(view[:_CRC_OFFSET])) != crc:
        raise DecodeError("checksum mismatch (corrupt or truncated payload)")
    cls = registry.lookup(msg_type)
    if cls is None:
        raise UnknownMessageTypeError(msg_type, f"msg_id={msg_id}")
    try:
        body = orjson.loads(view[ENVELOPE_SIZE:body_end])
    except orjson.JSONDecodeError as exc:
        raise DecodeError(f"{cls.__name__} body is not valid JSON: {exc}") from None
    header = Header(msg_id=msg_id, timestamp=ts, source_id=source)
    reader = BodyReader(data, body_end, cls.__name__)
    try:
        msg = cls.decode_body(header, body, reader)
    except DecodeError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, IndexError, OverflowError) as exc:
        raise DecodeError(f"{cls.__name__} body is malformed: {exc!r}") from None
    if isinstance(msg, DmlMsg):
        msg.adopt_ts_range(begin_ts, end_ts)
    msg.size = size
    return msg


def to_jsonable(msg: TsMsg) -> dict[str, Any]:
    """A JSON-friendly view of a message, for printing (vectors become lists)."""
    out: dict[str, Any] = {
        "type": type(msg).__name__,
        "msg_id": msg.msg_id,
        "timestamp": msg.timestamp,
        "source_id": msg.source_id,
    }
    body = msg.body_fields()
    for key, value in body.items():
        out[key] = _printable(value)
    if msg.position is not None:
        out["position"] = msg.position.to_dict()
    return out


def _printable(value: Any) -> Any:
    if isinstance(value, CollectionSchema):
        return value.to_dict()
    if isinstance(value, FieldData):
        return _printable(value.values)
    if isinstance(value, list):
        if value and isinstance(value[0], FieldData):
            return {c.name: _printable(c.values) for c in value}
        return [_printable(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    return value
