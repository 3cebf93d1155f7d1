"""Planning time slices: from a slice offset, how far every channel can be read now.

The planner reads message headers only (type and time range, from the envelope): per
channel it notes the time ticks above the start tick and, for positions, the first
message above each candidate tick. The next offset is the largest common tick -- the
smallest of the channels' last ticks, which every channel has reached -- or, under a row
limit, the largest tick whose slice holds at most that many rows (never less than one
tick: slices are not split). Rows are counted only under a row limit, which needs the
Insert/Delete bodies decoded.
"""

from __future__ import annotations

import bisect
from collections.abc import AsyncGenerator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson

from msgstream.contract.backend import Client, ConsumedBatch, MessageID
from msgstream.errors import CodecError
from msgstream.observability.logs import get_logger
from msgstream.runtime.scope import concurrently
from msgstream.timetick.tick_rules import common_tick, resume_boundary
from msgstream.wire.bodies import COLLECTION, ROWS
from msgstream.wire.codec import (
    ENVELOPE_SIZE,
    decode,
    intact_envelope,
    peek_envelopes,
    peek_time_range,
)
from msgstream.wire.messages import DeleteMsg, InsertMsg, MsgType
from msgstream.wire.schema import CollectionSchema

from .cursor import (
    RawCursor,
    SkipStats,
    log_undecodable,
    messages,
    planner_subscription,
)
from .frames import FrameKind
from .offsets import SliceOffset
from .schema_lookup import schema_in_channels

log = get_logger(__name__)

_TICK = int(MsgType.TIME_TICK)
_INSERT = int(MsgType.INSERT)
_DELETE = int(MsgType.DELETE)

MAX_SCAN_MESSAGES = 1_000_000
"""Per channel and call, the planner stops at the first tick after this many messages
(bounding its memory); a slice then ends earlier and the next call continues."""


@dataclass(slots=True)
class _ChannelScan:
    ticks: list[int] = field(default_factory=list)
    """Tick values above the start tick, increasing."""
    tick_ids: list[bytes] = field(default_factory=list)
    tick_at: list[int] = field(default_factory=list)
    """Each of ``ticks``' MessageID and number in the scan: the first tick at or above
    ``e`` is the tick that closes a slice ending at ``e``."""
    record_ids: list[bytes] = field(default_factory=list)
    record_ts: list[int] = field(default_factory=list)
    record_at: list[int] = field(default_factory=list)
    """The messages where the running maximum of end timestamps (above the start tick)
    rises, and their numbers in the scan: the first message above a tick ``e`` is the
    first record above ``e``."""
    row_ts: list[int] = field(default_factory=list)
    row_counts: list[int] = field(default_factory=list)
    scanned: int = 0
    running: int = 0
    """The largest end timestamp above the start tick seen so far."""
    cut: bool = False
    """The scan stopped at :data:`MAX_SCAN_MESSAGES`, before the channel's end."""

    def boundary(self, end: int) -> tuple[bytes, int]:
        """Where the slice after ``end`` starts reading this channel, and how many
        messages from there on the slice ending at ``end`` reads (its share of them at or
        below ``end`` is delivered, so the next slice skips those): the rule of
        :func:`~msgstream.timetick.tick_rules.resume_boundary`, for a slice that reads up to the
        tick closing it and delivers all but the messages above ``end``."""
        closing = bisect.bisect_left(self.ticks, end)
        tick_at = self.tick_at[closing]
        index = bisect.bisect_right(self.record_ts, end)  # the first message above end
        above = index < len(self.record_ids) and self.record_at[index] < tick_at
        where, examined = resume_boundary(self.record_at[index] if above else None, tick_at)
        return (self.tick_ids[closing] if where == tick_at else self.record_ids[index]), examined


@dataclass
class RowFilter:
    """Which rows count against a row limit: those of one collection, in one frame.

    A row limit only sizes slices, so the planner takes a DML message's row count and
    collection from its small JSON body (after the checksum) instead of decoding its
    columns: an orjson parse, not a dozen numpy calls per column. A body that does not
    say them plainly is decoded in full, which raises what :func:`decode` raises; a
    message whose columns are broken despite a sound body is counted here and reported
    by the executor that reads it.
    """

    collection: str
    kind: FrameKind

    def rows(self, payload: bytes, msg_type: int) -> int:
        if msg_type == _INSERT and not self.kind.has_inserts:
            return 0
        if msg_type == _DELETE and not self.kind.has_deletes:
            return 0
        said = _body_rows(payload)
        if said is None:
            msg = decode(payload)
            if not isinstance(msg, InsertMsg | DeleteMsg):
                return 0
            said = msg.collection_name, msg.num_rows
        collection, rows = said
        return rows if collection == self.collection else 0


def _body_rows(payload: bytes) -> tuple[str, int] | None:
    """``(collection, rows)`` as a checksummed DML body says them; None if it does not."""
    intact = intact_envelope(payload)
    if intact is None:
        return None
    _, body_end = intact
    try:
        body = orjson.loads(memoryview(payload)[ENVELOPE_SIZE:body_end])
    except orjson.JSONDecodeError:
        return None
    if type(body) is not dict:
        return None
    collection, rows = body.get(COLLECTION), body.get(ROWS)
    if type(collection) is not str or type(rows) is not int or rows < 0:
        return None
    return collection, rows


class SlicePlanner:
    """Computes next slice offsets of ``channels`` through ``client`` (kept open)."""

    def __init__(
        self,
        client: Client,
        channels: Sequence[str],
        subscription: str,
        rows: RowFilter,
        *,
        max_scan: int = MAX_SCAN_MESSAGES,
        timeout_s: float = 30.0,
    ) -> None:
        self.channels = list(channels)
        self.rows = rows
        self.max_scan = max_scan
        self.skipped = SkipStats()
        self._client = client
        self._query = subscription
        self._timeout_s = timeout_s
        name = planner_subscription(subscription)
        self._cursors = [RawCursor(client, c, name, timeout_s) for c in channels]
        self._open = False
        self._count_rows = False
        self._settled: tuple[SliceOffset, dict[str, bytes | None]] | None = None
        """An offset from which nothing more is readable under these stop ids: the
        previous call read every channel up to its stop and ended at the common tick."""

    async def open(self) -> None:
        if not self._open:
            await concurrently(cursor.open() for cursor in self._cursors)
            self._open = True

    async def close(self) -> None:
        await concurrently(cursor.close() for cursor in self._cursors)
        self._open = False

    async def latest_ids(self) -> dict[str, bytes | None]:
        """Each channel's newest MessageID now (None: empty)."""
        await self.open()
        latest = await concurrently(cursor.latest() for cursor in self._cursors)
        return {
            cursor.channel: None if last is None else last.to_bytes()
            for cursor, last in zip(self._cursors, latest, strict=True)
        }

    async def stop_times(self, stops: Mapping[str, bytes | None]) -> int | None:
        """The smallest end timestamp of the messages at ``stops`` (a channel's stop is its
        last message to read), reading one batch per channel: at or above the last tick
        a reading bounded by ``stops`` reaches, unless a stop is a late message -- where
        such a run ends, for progress. None when a channel has no stop or its stop
        message is unreadable."""
        await self.open()
        at: list[tuple[RawCursor, bytes]] = []
        for cursor in self._cursors:
            stop = stops.get(cursor.channel)
            if stop is None:
                return None
            at.append((cursor, stop))
        times = await concurrently(_first_end(cursor, stop) for cursor, stop in at)
        known = [time for time in times if time is not None]
        return min(known, default=None) if len(known) == len(times) else None

    async def next_offset(
        self,
        start: SliceOffset,
        *,
        max_rows: int | None = None,
        stop_ids: Mapping[str, bytes | None] | None = None,
    ) -> SliceOffset:
        """The furthest offset after ``start`` readable now (``start`` itself if time
        has not advanced on every channel). ``stop_ids`` caps each channel's reading at a
        MessageID (Trigger.AvailableNow: what existed when the query started).

        Under ``stop_ids``, a call from the offset the previous call returned reads
        nothing when that call read every channel up to its stop and ended at the common
        tick: the channel that set that tick has none above it before its stop, so the
        answer is ``start`` again. That is the call ending a Trigger.AvailableNow query;
        on Kafka, re-reading a channel's tail costs a seek behind the fetch in flight."""
        stops = None if stop_ids is None else dict(stop_ids)
        if stops is not None and self._settled == (start, stops):
            return start
        await self.open()
        scans = [_ChannelScan(running=start.tick) for _ in self._cursors]
        self._count_rows = max_rows is not None
        complete = await self._scan_all(start, scans, max_rows, stop_ids)
        common = _common_tick(scans)
        end = common
        if end is not None and max_rows is not None:
            end = _limit_end(scans, end, max_rows)
        following = start
        if end is not None:
            positions: dict[str, bytes | None] = {}
            examined: dict[str, int] = {}
            for channel, scan in zip(self.channels, scans, strict=True):
                positions[channel], examined[channel] = scan.boundary(end)
            following = SliceOffset(end, positions, examined)
        settled = complete and end == common and not any(s.cut for s in scans)
        self._settled = (following, stops) if stops is not None and settled else None
        return following

    async def _scan_all(
        self,
        start: SliceOffset,
        scans: list[_ChannelScan],
        max_rows: int | None,
        stop_ids: Mapping[str, bytes | None] | None,
    ) -> bool:
        """Read the channels a batch at a time, all at once (on a broker, each round
        costs one fetch's wait, not one per channel). Under a row limit, stop as soon as
        the rows up to the common tick exceed it: a later tick only adds rows. True if
        every channel was read to its end (or stop)."""
        readers: list[tuple[_ChannelScan, RawCursor, AsyncGenerator[ConsumedBatch, None], Any]] = []
        for scan, cursor in zip(scans, self._cursors, strict=True):
            stop = None
            if stop_ids is not None:
                stop = stop_ids.get(cursor.channel)
                if stop is None:  # the channel was empty: nothing of it is due
                    continue
            stop_id = None if stop is None else cursor.client.message_id_from_bytes(stop)
            batches = cursor.read(start.positions[cursor.channel])
            readers.append((scan, cursor, batches, stop_id))
        try:
            while readers:
                got = await concurrently(anext(entry[2], None) for entry in readers)
                for entry, batch in zip(list(readers), got, strict=True):
                    scan, cursor, batches, stop_id = entry
                    if batch is None or not self._feed(cursor, scan, batch, start.tick, stop_id):
                        readers.remove(entry)
                        await batches.aclose()
                if max_rows is not None and _rows_due(scans) > max_rows:
                    return not readers
            return True
        finally:
            for _, _, batches, _ in readers:
                await batches.aclose()

    def _feed(
        self,
        cursor: RawCursor,
        scan: _ChannelScan,
        batch: ConsumedBatch,
        begin: int,
        stop_id: MessageID | None,
    ) -> bool:
        """Note the headers of ``batch``; False once the channel needs no more reading.

        The envelopes of a batch are read as one numpy record array and the ticks and
        records found with whole-array passes (:meth:`_feed_columns`); a batch with an
        unreadable envelope goes message by message (:meth:`_feed_each`), which logs it.
        Both note exactly the same."""
        more = True
        if stop_id is not None and len(batch):
            batch, reached = batch.upto(stop_id, cursor.client.message_id_from_bytes)
            more = not reached
        envelopes = peek_envelopes(batch.payloads)
        if envelopes is None:
            return self._feed_each(cursor, scan, batch, begin) and more
        return self._feed_columns(cursor, scan, batch, envelopes, begin) and more

    def _feed_columns(
        self,
        cursor: RawCursor,
        scan: _ChannelScan,
        batch: ConsumedBatch,
        envelopes: Any,
        begin: int,
    ) -> bool:
        """:meth:`_feed_each` for a batch whose envelopes are all readable."""
        count = len(batch)
        if not count:
            return True
        types, ends = envelopes["msg_type"], envelopes["end_ts"]
        at = np.arange(scan.scanned + 1, scan.scanned + count + 1)
        is_tick = types == _TICK
        above = ends > np.uint64(begin)
        more = True
        ticks = _rising(np.flatnonzero(is_tick & above), ends, scan.ticks[-1] if scan.ticks else 0)
        past = np.flatnonzero(at[ticks] >= self.max_scan)
        if len(past):  # stop at the first tick past the bound, as the message loop does
            ticks = ticks[: past[0] + 1]
            count = int(ticks[-1]) + 1
            scan.cut, more = True, False
        ids = batch.id_bytes
        scan.ticks.extend(ends[ticks].tolist())
        scan.tick_ids.extend(map(ids.__getitem__, ticks.tolist()))
        scan.tick_at.extend(at[ticks].tolist())
        data = np.flatnonzero(~is_tick[:count] & above[:count])
        records = _rising(data, ends, scan.running)
        if len(records):
            scan.record_ids.extend(map(ids.__getitem__, records.tolist()))
            scan.record_ts.extend(ends[records].tolist())
            scan.record_at.extend(at[records].tolist())
            scan.running = scan.record_ts[-1]
        scan.scanned += count
        if self._count_rows:
            dml = data[np.isin(types[data], (_INSERT, _DELETE))]
            for index, msg_type, end_ts in zip(
                dml.tolist(), types[dml].tolist(), ends[dml].tolist(), strict=True
            ):
                self._count(cursor, scan, batch, index, msg_type, end_ts)
        return more

    def _feed_each(
        self, cursor: RawCursor, scan: _ChannelScan, batch: ConsumedBatch, begin: int
    ) -> bool:
        """Note the headers of ``batch`` message by message; False once the channel needs
        no more reading (a scan cut at its bound)."""
        for index, raw in enumerate(messages(batch)):
            scan.scanned += 1
            msg_id = raw.msg_id.to_bytes()
            try:
                msg_type, _, end_ts = peek_time_range(raw.payload)
            except CodecError as exc:
                log_undecodable(cursor.channel, raw, exc, self.skipped)
                continue
            if msg_type == _TICK:
                if end_ts > begin and (not scan.ticks or end_ts > scan.ticks[-1]):
                    scan.ticks.append(end_ts)
                    scan.tick_ids.append(msg_id)
                    scan.tick_at.append(scan.scanned)
                    if scan.scanned >= self.max_scan:
                        scan.cut = True
                        return False
                continue
            if end_ts <= begin:
                continue
            if end_ts > scan.running:
                scan.running = end_ts
                scan.record_ids.append(msg_id)
                scan.record_ts.append(end_ts)
                scan.record_at.append(scan.scanned)
            if self._count_rows and msg_type in (_INSERT, _DELETE):
                self._count(cursor, scan, batch, index, msg_type, end_ts)
        return True

    def _count(
        self,
        cursor: RawCursor,
        scan: _ChannelScan,
        batch: ConsumedBatch,
        index: int,
        msg_type: int,
        end_ts: int,
    ) -> None:
        """Note the rows of DML message ``index`` of ``batch`` for a row limit (a bad body
        is logged)."""
        try:
            rows = self.rows.rows(batch.payloads[index], msg_type)
        except CodecError as exc:
            log_undecodable(cursor.channel, batch.message(index), exc, self.skipped)
            return
        if rows:
            scan.row_ts.append(end_ts)
            scan.row_counts.append(rows)

    async def find_schema(self, collection: str | None) -> CollectionSchema:
        """The schema of the first ``CreateCollectionMsg`` (of ``collection``, if given)
        in the channels, read from their beginning
        (:func:`~bridge_spark.data.schema_lookup.schema_in_channels`)."""
        return await schema_in_channels(
            self._client, self.channels, collection, query=self._query, timeout_s=self._timeout_s
        )


async def _first_end(cursor: RawCursor, stop: bytes) -> int | None:
    """The end timestamp of the message at ``stop``; None if it cannot be read."""
    reading = cursor.read(stop)
    try:
        batch = await anext(reading, None)
    finally:
        await reading.aclose()
    if batch is None or not len(batch):
        return None
    try:
        return peek_time_range(batch.payloads[0])[2]
    except CodecError:
        return None


def _rising(candidates: Any, values: Any, floor: int) -> Any:
    """The ``candidates`` (indexes into ``values``, increasing) whose value is above
    ``floor`` and above every earlier candidate's: where a running maximum rises."""
    found = values[candidates]
    before = np.maximum.accumulate(np.concatenate(([np.uint64(floor)], found)))[:-1]
    return candidates[found > before]


def _common_tick(scans: Sequence[_ChannelScan]) -> int | None:
    """The time every channel has reached in what was scanned (above the start tick)."""
    return common_tick(s.ticks[-1] if s.ticks else None for s in scans)


def _rows_due(scans: Sequence[_ChannelScan]) -> int:
    """Rows up to the common tick (the smallest last tick) of what was scanned so far."""
    end = _common_tick(scans)
    if end is None:
        return 0
    return sum(n for s in scans for t, n in zip(s.row_ts, s.row_counts, strict=True) if t <= end)


def _limit_end(scans: Sequence[_ChannelScan], end: int, max_rows: int) -> int:
    """The largest tick ``<= end`` whose slice holds at most ``max_rows`` rows, or the
    smallest tick if even that one holds more (a slice is never split)."""
    candidates = np.unique(np.array([t for s in scans for t in s.ticks if t <= end], np.uint64))
    row_ts = np.array([t for s in scans for t in s.row_ts], np.uint64)
    counts = np.array([n for s in scans for n in s.row_counts], np.int64)
    order = np.argsort(row_ts, kind="stable")
    row_ts, cumulative = row_ts[order], np.cumsum(counts[order])
    rows_at = np.zeros(len(candidates), np.int64)
    if len(cumulative):
        upto = np.searchsorted(row_ts, candidates, side="right")
        rows_at = np.where(upto > 0, cumulative[np.maximum(upto - 1, 0)], 0)
    fitting = candidates[rows_at <= max_rows]
    return int(fitting[-1]) if len(fitting) else int(candidates[0])
