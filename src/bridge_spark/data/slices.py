"""Reading one channel's part of a time slice into Arrow (what a Spark task does).

A slice ``(begin, end]`` of channel ``c`` starts at the slice offset's position for ``c``
and ends at the first time tick of ``c`` at or above ``end``: every later message has a
larger timestamp (the tick's promise). Which messages in between belong to the slice is
decided by the time-tick barrier's own rules (:class:`msgstream.timetick.tick_rules.SliceCut`):
data at or below ``begin`` read before a tick above it was in an earlier slice, data
above ``end`` is a later slice's, late data is delivered with the slice it is read in,
and a repeated ``(source_id, msg_id)`` is a producer retry, dropped.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Iterator
from dataclasses import dataclass
from typing import TypedDict, Unpack

import pyarrow as pa

from msgstream.configuration.config import Config
from msgstream.contract.backend import Client, ConsumedMessage
from msgstream.errors import CodecError
from msgstream.observability.logs import fields, get_logger
from msgstream.timetick.tick_rules import SliceCut, Verdict
from msgstream.wire.codec import decode, peek_header, peek_time_range
from msgstream.wire.plans import KIND_DML, kind_of

from ..errors import SliceIncompleteError
from .clients import open_reader
from .cursor import (
    DEFAULT_TIMEOUT_S,
    RawCursor,
    SkipStats,
    log_undecodable,
    messages,
    reader_subscription,
)
from .dml_rows import DmlRows
from .frames import FrameSchema

log = get_logger(__name__)

BATCH_ROWS = 65536
"""Rows per Arrow record batch handed to Spark."""


@dataclass(frozen=True)
class ChannelSlice:
    channel: str
    start: bytes | None
    """First MessageID to read (inclusive); None: the channel's beginning."""
    begin: int
    end: int
    examined: int = 0
    """Messages from ``start`` on that the slice ending at ``begin`` had read (0: not
    known): only among them is data at or below ``begin`` an earlier slice's."""


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
    cursor = RawCursor(client, channel, reader_subscription(subscription), timeout_s)
    await cursor.open()
    rows: DmlRows[ConsumedMessage] = DmlRows(
        frame,
        lambda raw: decode(raw.payload),
        lambda raw, exc: log_undecodable(channel, raw, exc, stats),
    )
    cut = SliceCut(part.begin, part.end, part.examined)
    try:
        async for batch in cursor.read(part.start):
            for raw in messages(batch):
                try:
                    msg_type, msg_id, _, source_id = peek_header(raw.payload)
                    _, _, end_ts = peek_time_range(raw.payload)
                except CodecError as exc:
                    log_undecodable(channel, raw, exc, stats)
                    cut.unreadable()
                    continue
                kind = kind_of(msg_type)
                verdict = cut.take(kind, end_ts, source_id, msg_id)
                if verdict is Verdict.CLOSE:
                    break
                if verdict is Verdict.PASS or kind != KIND_DML:
                    continue
                if verdict is Verdict.KEEP_LATE:
                    stats.late += 1
                    log.warning(
                        "late message on channel %r at MessageID %r (end timestamp %d <= "
                        "time tick %s read before it); delivered in the slice (%d, %d]",
                        channel,
                        raw.msg_id,
                        end_ts,
                        cut.clock.last_tick,
                        part.begin,
                        part.end,
                        extra=fields(channel=channel),
                    )
                rows.add_payload(raw, raw.payload, channel)
                if rows.rows >= batch_rows:
                    yield _taken(rows)
            if cut.closed:
                break
        if not cut.closed:
            raise SliceIncompleteError(
                f"channel {channel!r}: no time tick at or above {part.end} after MessageID "
                f"{part.start.hex() if part.start else 'earliest'}; the slice "
                f"({part.begin}, {part.end}] cannot be completed (deleted by retention?)"
            )
        if rows.rows:
            yield _taken(rows)
    finally:
        await cursor.close()


def _taken(rows: DmlRows[ConsumedMessage]) -> pa.Table:
    """The rows kept so far as one table, then forgotten."""
    table = rows.build()
    rows.clear()
    return table


class SliceOptions(TypedDict, total=False):
    """The options :func:`iterate_slice` passes on to :func:`read_slice` (its defaults)."""

    batch_rows: int
    timeout_s: float


def iterate_slice(
    config: Config,
    part: ChannelSlice,
    frame: FrameSchema,
    subscription: str,
    **options: Unpack[SliceOptions],
) -> Iterator[pa.RecordBatch]:
    """:func:`read_slice` as a plain iterator of record batches, on a private event loop
    and a reader client of its own (Spark calls it from a worker process)."""
    loop = asyncio.new_event_loop()
    reader = open_reader(config)
    tables = read_slice(reader.client, part, frame, subscription, **options)
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
