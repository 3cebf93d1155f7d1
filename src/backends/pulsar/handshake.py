"""Check credentials with one Pulsar ``CONNECT`` handshake, before the library tries.

The C++ library does not report a refused token: the broker answers the handshake with an
``AuthenticationError`` and closes the connection, and the library retries until its
operation timeout, then reports a timeout. One handshake of our own (a few hundred bytes,
once per client) turns that into an immediate :class:`AuthenticationError` with the
broker's reason. Anything inconclusive (the broker unreachable, an unexpected answer) is
left to the library, which reports it in its own way.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import struct
from urllib.parse import urlsplit

from msgstream.errors import AuthenticationError

_CONNECT, _CONNECTED, _ERROR = 2, 3, 14
_SERVER_AUTHENTICATION_ERROR, _SERVER_AUTHORIZATION_ERROR = 3, 4
_PROTOCOL_VERSION = 21
_MAX_FRAME = 1 << 20


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(number: int, payload: bytes | int) -> bytes:
    """One protobuf field: a varint (int) or a length-delimited value (bytes)."""
    if isinstance(payload, int):
        return _varint(number << 3) + _varint(payload)
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def connect_frame(token: str) -> bytes:
    """A framed ``BaseCommand{CONNECT}`` presenting ``token`` with auth method "token"."""
    connect = (
        _field(1, b"msgstream-credentials-check")
        + _field(5, b"token")
        + _field(3, token.encode())
        + _field(4, _PROTOCOL_VERSION)
    )
    command = _field(1, _CONNECT) + _field(2, connect)
    return struct.pack(">II", len(command) + 4, len(command)) + command


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def _fields(data: bytes) -> dict[int, int | bytes]:
    """The varint and length-delimited fields of one protobuf message (last one wins)."""
    found: dict[int, int | bytes] = {}
    pos = 0
    while pos < len(data):
        key, pos = _read_varint(data, pos)
        number, wire_type = key >> 3, key & 7
        if wire_type == 0:
            found[number], pos = _read_varint(data, pos)
        elif wire_type == 2:
            length, pos = _read_varint(data, pos)
            found[number], pos = data[pos : pos + length], pos + length
        elif wire_type in (1, 5):
            pos += 8 if wire_type == 1 else 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire_type}")
    return found


def refusal(command: bytes) -> str | None:
    """The broker's reason if ``command`` refuses the credentials, else None."""
    fields = _fields(command)
    if fields.get(1) != _ERROR or not isinstance(fields.get(14), bytes):
        return None
    error = _fields(fields[14])  # type: ignore[arg-type]
    if error.get(2) not in (_SERVER_AUTHENTICATION_ERROR, _SERVER_AUTHORIZATION_ERROR):
        return None
    message = error.get(3, b"")
    return message.decode("utf-8", "replace") if isinstance(message, bytes) else ""


async def check_token(
    service_url: str, token: str, tls: ssl.SSLContext | None, timeout_s: float
) -> None:
    """Raise :class:`AuthenticationError` if the broker refuses ``token``; else return."""
    parts = urlsplit(service_url.split(",")[0])
    if parts.scheme not in ("pulsar", "pulsar+ssl") or parts.hostname is None:
        return  # an HTTP lookup URL: nothing to shake hands with
    use_tls = tls if parts.scheme == "pulsar+ssl" else None
    port = parts.port or (6651 if use_tls else 6650)
    command = None
    with contextlib.suppress(OSError, TimeoutError, ValueError, IndexError, struct.error):
        async with asyncio.timeout(timeout_s):
            reader, writer = await asyncio.open_connection(parts.hostname, port, ssl=use_tls)
            try:
                writer.write(connect_frame(token))
                await writer.drain()
                total, size = struct.unpack(">II", await reader.readexactly(8))
                if size <= total - 4 <= _MAX_FRAME:
                    command = (await reader.readexactly(total - 4))[:size]
            finally:
                writer.close()
                with contextlib.suppress(OSError):
                    await writer.wait_closed()
    reason = refusal(command) if command is not None else None
    if reason is not None:
        raise AuthenticationError(
            f"pulsar at {service_url}: the broker refused the token (pulsar.auth_token): "
            f"authentication failed: {reason or 'no reason given'}"
        )
