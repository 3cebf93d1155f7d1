"""Reading one channel's part of a time slice into Arrow (what a Spark task does).

A slice ``(begin, end]`` of channel ``c`` starts at the slice offset's position for ``c``
and ends at the first time tick of ``c`` at or above ``end``: every later message has a
larger timestamp (the tick's promise). In between, the Insert/Delete messages whose end
timestamp lies in ``(begin, end]`` belong to the slice; messages at or below ``begin``
were in an earlier slice. Within a slice, a message repeating an earlier
``(source_id, msg_id)`` is a producer retry and is dropped, as a time-tick stream does.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Iterator
from dataclasses import dataclass

import pyarrow as pa

from msgstream.backend import Client
from msgstream.codec import decode, peek_time_range
from msgstream.config import Config
from msgstream.errors import CodecError
from msgstream.messages import MsgType

from .clients import open_reader
from .convert import FrameBuilder
from .cursor import DEFAULT_TIMEOUT_S, RawCursor, SkipStats, log_undecodable
from .errors import SliceIncompleteError
from .frames import FrameSchema

log = logging.getLogger(__name__)

_TICK = int(MsgType.TIME_TICK)
_DML = frozenset({int(MsgType.INSERT), int(MsgType.DELETE)})
BATCH_ROWS = 65536
"""Rows per Arrow record batch handed to Spark."""


@dataclass(frozen=True)
class ChannelSlice:
    channel: str
    start: bytes | None
    """First MessageID to read (inclusive); None: the channel's beginning."""
    begin: int
    end: int


async def read_slice(
    client: Client,
    part: ChannelSlice,
    frame: FrameSchema,
    subscription: str,
    *,
    batch_rows: int = BATCH_ROWS,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    stats: SkipStats | None = None,
) -> AsyncGenerator[pa.Table, None]:
    """Tables of at most about ``batch_rows`` rows holding the slice's rows of one channel."""
    stats = stats if stats is not None else SkipStats()
    channel = part.channel
    cursor = RawCursor(client, channel, subscription, timeout_s)
    await cursor.open()
    builder = FrameBuilder(frame)
    seen: set[tuple[int, int]] = set()
    last_tick: int | None = None
    closed = False
    try:
        async for raws in cursor.read(part.start):
            for raw in raws:
                try:
                    msg_type, _, end_ts = peek_time_range(raw.payload)
                except CodecError as exc:
                    log_undecodable(channel, raw, exc, stats)
                    continue
                if msg_type == _TICK:
                    if end_ts >= part.end:
                        closed = True
                        break
                    last_tick = end_ts if last_tick is None else max(last_tick, end_ts)
                    continue
                if msg_type not in _DML:
                    continue
                if not part.begin < end_ts <= part.end:
                    if end_ts <= part.begin and last_tick is not None and end_ts <= last_tick:
                        stats.late += 1
                        log.warning(
                            "late message on channel %r at MessageID %r (end timestamp %d <= "
                            "time tick %d read before it) belongs to a slice already read; "
                            "skipped",
                            channel,
                            raw.msg_id,
                            end_ts,
                            last_tick,
                        )
                    continue
                try:
                    msg = decode(raw.payload)
                except CodecError as exc:
                    log_undecodable(channel, raw, exc, stats)
                    continue
                key = (msg.source_id, msg.msg_id)
                if key in seen:
                    continue
                seen.add(key)
                builder.add(msg, channel)
                if builder.rows >= batch_rows:
                    yield builder.build()
                    builder.clear()
            if closed:
                break
        if not closed:
            raise SliceIncompleteError(
                f"channel {channel!r}: no time tick at or above {part.end} after MessageID "
                f"{part.start.hex() if part.start else 'earliest'}; the slice "
                f"({part.begin}, {part.end}] cannot be completed (deleted by retention?)"
            )
        if builder.rows:
            yield builder.build()
    finally:
        await cursor.close()


def iterate_slice(
    config: Config,
    part: ChannelSlice,
    frame: FrameSchema,
    subscription: str,
    *,
    batch_rows: int = BATCH_ROWS,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> Iterator[pa.RecordBatch]:
    """:func:`read_slice` as a plain iterator of record batches, on a private event loop
    and a reader client of its own (Spark calls it from a worker process)."""
    loop = asyncio.new_event_loop()
    reader = open_reader(config)
    tables = read_slice(
        reader.client, part, frame, subscription, batch_rows=batch_rows, timeout_s=timeout_s
    )
    try:
        while True:
            try:
                table = loop.run_until_complete(anext(tables))
            except StopAsyncIteration:
                break
            yield from table.to_batches()
    finally:
        try:
            loop.run_until_complete(tables.aclose())
            loop.run_until_complete(reader.client.close())
        finally:
            loop.close()
