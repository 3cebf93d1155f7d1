"""The driver-side micro-batcher: time-tick packs into Spark DataFrames, checkpointed.

A :class:`MicroBatcher` reads a :class:`~msgstream.TtMsgStream` (pursuit merging off, so
packs are one per tick advance) and cuts batches only at pack boundaries: when a batch
holds ``max_rows`` rows (the first batch of a run: ``first_batch_rows``), when
``max_interval_s`` passed since its first row, or at the end tick of the run. Each batch
becomes one Arrow table (column-wise), then a DataFrame over its record batches
(:class:`~bridge_spark.data.arrow_frames.ArrowFrames`), then ``fn(df, batch_id)``.

Exactly-once bookkeeping (see :mod:`msgstream.bridge_spark.data.checkpoint`): before ``fn`` runs,
the batch is recorded as *pending* (id and end tick); after it returned, as *committed* with
the positions after it. A restarted batcher resumes at the committed positions and first
redoes a pending batch -- same ``batch_id``, read up to the same end tick, so the same
rows when every channel carries the same ticks (a :class:`~msgstream.TimeTickEmitter`'s
way). Output keyed on ``batch_id`` that replaces an earlier attempt
(:class:`~bridge_spark.data.sink.ParquetSink`) therefore holds every row exactly once.

While Spark processes one batch (in a worker thread), the next one is read and its table
built in another (:class:`_Flights`: at most two batches are handed over at once). Until the
first batch is handed over, nothing overlaps the reading: that batch is smaller (a
quarter of ``max_rows`` by default), so Spark starts sooner: one more DataFrame a run,
and more rows/s (docs/benchmarks/spark.md). Packs are
read ahead in one task (:mod:`~bridge_spark.data.feed`), a run of ready ones taken at once.
Insert bodies are not decoded on arrival: the stream leaves them unchecked and
:class:`~bridge_spark.data.dml_rows.DmlRows` converts them in whole-batch passes, reporting a
bad one through the stream (``on_bad_message``, ``read_stats``) when the batch is built.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import time
from collections import deque
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from msgstream.configuration.config import Config
from msgstream.errors import CodecError
from msgstream.observability.logs import get_logger
from msgstream.observability.observe import BridgeProbe, Instruments, default_instruments
from msgstream.runtime.scope import cancel_and_wait, finish_in_thread
from msgstream.streams.factory import ttstream_options
from msgstream.streams.reader_access import ReaderClient
from msgstream.streams.ttstream import TtMsgStream
from msgstream.wire.messages import InsertMsg, MsgType, TsMsg
from msgstream.wire.pack import MsgPack
from msgstream.wire.position import MsgPosition, SubscriptionPosition
from msgstream.wire.schema import CollectionSchema

from ..errors import OptionError, SliceIncompleteError
from .arrow_frames import ArrowFrames
from .checkpoint import BatchMark, CheckpointState, check_matches, load_checkpoint, save_checkpoint
from .clients import open_reader, resolved_config
from .dml_rows import DmlRows
from .feed import PackFeed
from .frames import FrameKind, FrameSchema
from .offsets import EARLIEST, LATEST, SliceOffset, StartSpec, parse_start
from .options import parse_channels
from .planner import RowFilter, SlicePlanner

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

log = get_logger(__name__)

UserFunction = Callable[["DataFrame", int], object]
Until = Literal["available_now", "forever"] | int
"""When :meth:`MicroBatcher.run` stops: after the data available when it started, never,
or once packs reach this time tick."""


@dataclass(frozen=True)
class BatchInfo:
    """What one committed batch held."""

    batch_id: int
    insert_rows: int
    delete_rows: int
    packs: int
    begin_ts: int
    end_ts: int
    redo: bool
    seconds: float
    """Building its table, then Spark and ``fn`` to the commit (not the wait for the
    batch before it)."""

    @property
    def rows(self) -> int:
        return self.insert_rows + self.delete_rows


@dataclass
class BatcherProgress:
    """Live figures of a run, for progress bars."""

    start_ts: int = 0
    end_ts: int = 0
    """The end tick of the last pack read (read-ahead included)."""
    committed_ts: int = 0
    """The end tick of what is committed: where a restarted run would resume."""
    target_ts: int | None = None
    batches: int = 0
    insert_rows: int = 0
    delete_rows: int = 0
    packs: int = 0
    read_rows: int = 0
    """Rows read into batches, committed or not (``read_rows - rows`` are in flight)."""
    redone: int = 0
    last_batch_id: int | None = None
    stopped: str = ""
    started_at: float = dataclasses.field(default_factory=time.perf_counter)
    finished_at: float | None = None

    @property
    def rows(self) -> int:
        return self.insert_rows + self.delete_rows

    @property
    def seconds(self) -> float:
        end = self.finished_at if self.finished_at is not None else time.perf_counter()
        return end - self.started_at


@dataclass
class _Batch:
    rows: DmlRows[TsMsg]
    bad: list[tuple[TsMsg, CodecError]]
    """Messages found bad while collecting or building, not reported yet."""
    packs: int = 0
    begin_ts: int = 0
    last: MsgPack | None = None
    first_row_at: float | None = None


class MicroBatcher:
    """Reads ``channels`` (of ``config``) into DataFrames, one checkpointed batch at a time.

    ``schema`` (or the first ``CreateCollectionMsg`` of ``collection`` in the channels)
    decides the frame's columns; ``start`` (``"earliest"``, ``"latest"`` or a pack's
    ``end_positions``) applies only when ``checkpoint`` does not exist yet.
    ``first_batch_rows``: the row count that closes a run's first batch (default
    ``max_rows // 4``; ``max_rows`` makes every batch alike).
    ``local_relation``: let Spark convert a batch smaller than
    ``spark.sql.execution.arrow.localRelationThreshold`` to rows on the driver, as
    ``createDataFrame`` does; by default every batch's DataFrame stays Arrow record
    batches, converted by the executors (:mod:`~bridge_spark.data.arrow_frames`).
    """

    def __init__(
        self,
        spark: SparkSession,
        config: Config,
        channels: Sequence[str],
        checkpoint: str | os.PathLike[str],
        *,
        collection: str | None = None,
        schema: CollectionSchema | None = None,
        frame: FrameKind | str = FrameKind.CHANGES,
        max_rows: int = 100_000,
        first_batch_rows: int | None = None,
        max_interval_s: float = 1.0,
        start: str | Sequence[MsgPosition] | SliceOffset = EARLIEST,
        subscription: str = "msgstream-spark-batcher",
        on_batch: Callable[[BatchInfo], None] | None = None,
        pipeline: bool = True,
        local_relation: bool = False,
        instruments: Instruments | Literal["default"] | None = "default",
    ) -> None:
        if max_rows < 1:
            raise OptionError("max_rows", f"must be >= 1, got {max_rows}")
        if first_batch_rows is None:
            first_batch_rows = max(1, max_rows // 4)
        elif not 1 <= first_batch_rows <= max_rows:
            raise OptionError(
                "first_batch_rows",
                f"must be >= 1 and <= max_rows ({max_rows}), got {first_batch_rows}",
            )
        if not max_interval_s > 0:
            raise OptionError("max_interval_s", f"must be > 0, got {max_interval_s}")
        self.spark = spark
        self.config = resolved_config(config)
        self.channels = parse_channels(channels)
        self.checkpoint = os.fspath(checkpoint)
        self.collection = collection
        self.schema = schema
        self.kind = FrameKind.parse(frame)
        self.max_rows = max_rows
        self.first_batch_rows = first_batch_rows
        self.max_interval_s = max_interval_s
        self.start: StartSpec = parse_start(start, self.channels, "start")
        self.subscription = subscription
        self.on_batch = on_batch
        self.pipeline = pipeline
        self.local_relation = local_relation
        self.progress = BatcherProgress()
        self._state: CheckpointState | None = None
        self._spark_schema: StructType | None = None
        self._frames: ArrowFrames | None = None
        """Made by a run's first batch, in its thread (it calls the JVM); reads the
        session's Arrow settings then."""
        self._instruments = default_instruments() if instruments == "default" else instruments
        self._probe: BridgeProbe | None = (
            None if self._instruments is None else self._instruments.bridge(subscription)
        )

    # --- setup ------------------------------------------------------------------------------
    def _new_stream(self, reader: ReaderClient) -> TtMsgStream:
        options = ttstream_options(self.config.msgstream)
        # No pursuit merging: one pack per tick advance, the boundaries batches are cut at.
        # Insert bodies are checked where they are converted (DmlRows): in whole-batch
        # passes, instead of decoding each message in full on arrival.
        return TtMsgStream(
            reader.client,
            **{**options, "pursuit_lag_s": 0},
            instruments=self._instruments,
            unchecked_bodies={MsgType.INSERT},
        )

    def _resume_point(self, state: CheckpointState) -> list[MsgPosition] | None:
        if state.committed is not None:
            return list(state.committed.positions)
        if isinstance(self.start, SliceOffset):
            positions = self.start.to_positions(self.subscription)
            if positions is None and any(p is not None for p in self.start.positions.values()):
                raise OptionError("start", "give a position for every channel, or 'earliest'")
            return positions
        return None

    async def _subscribe(
        self, stream: TtMsgStream, resume: list[MsgPosition] | None, end: _RunEnd
    ) -> None:
        channels = list(self.channels)
        stop_at = None
        if end.stops is not None:
            parse = stream.client.message_id_from_bytes
            stop_at = {c: None if s is None else parse(s) for c, s in end.stops.items()}
        if self.start == LATEST and resume is None:
            await stream.as_consumer(
                channels, self.subscription, SubscriptionPosition.LATEST, stop_at=stop_at
            )
            return
        await stream.as_consumer(
            channels, self.subscription, SubscriptionPosition.UNKNOWN, stop_at=stop_at
        )
        if resume is None:
            # From the earliest message, whatever the subscription acknowledged in a run
            # whose checkpoint is gone (subscribing at EARLIEST would resume after that).
            earliest = stream.client.earliest_message_id().to_bytes()
            resume = [MsgPosition(c, earliest, self.subscription, 0) for c in channels]
        await stream.seek(resume)

    async def _end(
        self, until: Until, planner: SlicePlanner, reader: ReaderClient, start: SliceOffset
    ) -> _RunEnd:
        if until == "forever":
            return _RunEnd(None, None)
        if isinstance(until, int):
            return _RunEnd(until, None)
        if self.start == LATEST and self._state is not None and self._state.committed is None:
            # nothing existing is read: the data available now is none
            return _RunEnd(start.tick, None)
        # What is there now: the stream reads each channel up to its newest message and
        # ends, instead of scanning everything once more to find the end tick first.
        reader.refresh()
        stops = await planner.latest_ids()
        return _RunEnd(None, stops, await planner.stop_times(stops))

    # --- running ----------------------------------------------------------------------------
    async def run(
        self, fn: UserFunction, *, until: Until = "available_now", max_batches: int | None = None
    ) -> BatcherProgress:
        """Process batches until ``until`` (see :data:`Until`) or ``max_batches`` batches;
        return the run's figures. An exception of ``fn`` propagates, its batch stays
        pending in the checkpoint and is redone by the next run."""
        if until not in ("available_now", "forever") and not isinstance(until, int):
            raise OptionError("until", f"expected 'available_now', 'forever' or a tick: {until!r}")
        self.progress = progress = BatcherProgress()
        self._frames = None
        state = await asyncio.to_thread(load_checkpoint, self.checkpoint)
        plan_reader = open_reader(self.config)
        planner = SlicePlanner(
            plan_reader.client,
            self.channels,
            f"{self.subscription}-plan",
            RowFilter(self.collection or "", self.kind),
            timeout_s=self.config.msgstream.operation_timeout_s,
        )
        stream_reader: ReaderClient | None = None
        stream: TtMsgStream | None = None
        try:
            await planner.open()  # TopicNotFoundError names a missing channel
            schema = self.schema or await planner.find_schema(self.collection)
            frame = FrameSchema(schema, self.kind)
            self._spark_schema = frame.spark_schema()
            if state is None:
                state = CheckpointState(self.channels, schema.name)
            else:
                check_matches(state, self.checkpoint, self.channels, schema.name)
            self._state = state
            resume = self._resume_point(state)
            start = (
                SliceOffset.from_positions(resume, self.channels, "resume positions")
                if resume is not None
                else SliceOffset.earliest(self.channels)
            )
            progress.start_ts = progress.end_ts = progress.committed_ts = start.tick
            end = await self._end(until, planner, plan_reader, start)
            target = end.tick
            if state.pending is not None:
                target = None if target is None else max(target, state.pending.end_ts)
            progress.target_ts = target if end.stops is None else end.estimate
            if target is not None and target <= start.tick:
                progress.stopped = "nothing new"
                return progress
            stream_reader = open_reader(self.config)
            stream = self._new_stream(stream_reader)
            await self._subscribe(stream, resume, end)
            await self._loop(stream, frame, fn, target, max_batches)
            return progress
        finally:
            progress.finished_at = time.perf_counter()
            if stream is not None:
                await stream.close()
            elif stream_reader is not None:
                await stream_reader.client.close()
            await planner.close()
            await plan_reader.client.close()

    async def _loop(
        self,
        stream: TtMsgStream,
        frame: FrameSchema,
        fn: UserFunction,
        target: int | None,
        max_batches: int | None,
    ) -> None:
        progress = self.progress
        redo = self._require_state().pending
        batch = _new_batch(frame, progress.end_ts)
        flights = _Flights()
        feed = PackFeed(stream, self.config.msgstream.tt_channel_buffer_bytes)
        arrival: asyncio.Task[None] | None = None
        cut_batches = 0
        last_advance = time.monotonic()
        try:
            while True:
                pack, ended = _ready(feed)  # packs ready now are taken without waiting
                if pack is None and not ended:
                    if arrival is None:
                        arrival = asyncio.ensure_future(feed.wait())
                    waiting: set[asyncio.Future[object]] = {arrival}  # type: ignore[arg-type]
                    oldest = flights.oldest
                    if oldest is not None:
                        waiting.add(oldest)  # type: ignore[arg-type]
                    await asyncio.wait(
                        waiting, timeout=self._wait_s(batch), return_when=asyncio.FIRST_COMPLETED
                    )
                    if arrival.done():
                        arrival = None
                        pack, ended = _ready(feed)
                flights.reap()  # the user function's exception, if any
                if pack is not None:
                    self._add(batch, pack)
                    _report_bad(stream, batch)
                last = batch.last
                if last is None:
                    if ended:  # a bounded stream read to its stops
                        self._ended(redo, None)
                        break
                    continue
                reached = ended or (target is not None and last.end_ts >= target)
                if redo is not None:
                    if ended:
                        self._ended(redo, last)
                    cut = last.end_ts >= redo.end_ts
                else:
                    limit = self.max_rows if cut_batches else self.first_batch_rows
                    cut = reached or batch.rows.rows >= limit or self._interval_over(batch)
                if not cut:
                    continue
                if batch.rows.rows or redo is not None:
                    await flights.make_room()
                    flights.add(self._start(stream, fn, batch, redo, flights.newest))
                    if not self.pipeline:
                        await flights.drain()
                    redo = None
                    cut_batches += 1
                    batch = _new_batch(frame, last.end_ts)
                elif reached or time.monotonic() - last_advance >= self.max_interval_s:
                    await flights.drain()
                    await self._advance(last)
                    last_advance = time.monotonic()
                    batch = _new_batch(frame, last.end_ts)
                if reached:
                    progress.stopped = "reached end tick"
                    break
                if max_batches is not None and cut_batches >= max_batches:
                    progress.stopped = "max batches"
                    break
            await flights.drain()
        finally:
            await cancel_and_wait(arrival)
            await feed.close()
            await flights.settle()  # failing or cancelled: let Spark finish, keep it pending

    def _ended(self, redo: BatchMark | None, last: MsgPack | None) -> None:
        """The stream ended (read to its stops) with ``last`` the last pack not yet in a
        batch: a pending batch must be redone in full, else the run is over."""
        if redo is not None and (last is None or last.end_ts < redo.end_ts):
            reached = self.progress.end_ts if last is None else last.end_ts
            raise SliceIncompleteError(
                f"batch {redo.batch_id} is pending up to tick {redo.end_ts}, but the "
                f"channels now end at tick {reached}: messages it read are gone"
            )
        if last is None:
            self.progress.stopped = "reached end tick" if self.progress.packs else "nothing new"

    def _require_state(self) -> CheckpointState:
        if self._state is None:
            raise RuntimeError("the batcher is not running")
        return self._state

    def _wait_s(self, batch: _Batch) -> float:
        if batch.first_row_at is None:
            return self.max_interval_s
        return max(0.0, self.max_interval_s - (time.monotonic() - batch.first_row_at))

    def _interval_over(self, batch: _Batch) -> bool:
        started = batch.first_row_at
        return started is not None and time.monotonic() - started >= self.max_interval_s

    def _add(self, batch: _Batch, pack: MsgPack) -> None:
        rows = batch.rows
        before = rows.rows
        for msg in pack.msgs:
            lazy = msg.lazy_body
            if lazy is not None and type(msg) is InsertMsg:
                # A lazy message's payload was checked by the stream's reader; its lazy
                # body holds (plan, payload, MessageID, (channel, subscription)).
                rows.add_payload(msg, lazy[1], lazy[3][0], checksum_verified=True)
            else:
                position = msg.position
                rows.add_message(msg, position.channel if position is not None else "")
        if batch.first_row_at is None and rows.rows > before:
            batch.first_row_at = time.monotonic()
        batch.packs += 1
        batch.last = pack
        self.progress.packs += 1
        self.progress.read_rows += rows.rows - before
        self.progress.end_ts = pack.end_ts

    async def _advance(self, last: MsgPack) -> None:
        """Move the committed positions past packs without rows (no batch, no id)."""
        state = self._require_state()
        batch_id = -1 if state.committed is None else state.committed.batch_id
        mark = BatchMark(batch_id, last.end_ts, tuple(last.end_positions))
        self._state = dataclasses.replace(state, committed=mark)
        await self._save(self._state)
        self.progress.committed_ts = last.end_ts
        if self._probe is not None:
            self._probe.committed()

    async def _start(
        self,
        stream: TtMsgStream,
        fn: UserFunction,
        batch: _Batch,
        redo: BatchMark | None,
        before: asyncio.Future[None] | None,
    ) -> None:
        """Build the batch's table; once the batch ``before`` it is committed, mark this
        one pending, run Spark and ``fn``, commit, then acknowledge the packs (the
        checkpoint, not the subscription, is what resumes).

        Building and Spark run in threads. The table is built while the batch before is
        still in Spark: building is Python, Spark's part mostly its JVM, so the two
        overlap. (They did not while a DataFrame took 41 JVM calls, each waiting for the
        GIL behind the build; :class:`~bridge_spark.data.arrow_frames.ArrowFrames` makes five.)
        A message that does not
        fit the frame fails the run before anything of this batch is pending; a failing
        batch before fails this one with it."""
        last = batch.last
        assert last is not None
        started = time.perf_counter()
        rows = batch.rows
        table = await finish_in_thread(rows.build)
        _report_bad(stream, batch)
        if before is not None:
            built = time.perf_counter()
            await before
            started += time.perf_counter() - built  # the wait is the batch before's time
        batch_id = redo.batch_id if redo is not None else self._require_state().next_batch_id
        mark = BatchMark(batch_id, last.end_ts, tuple(last.end_positions))
        state = dataclasses.replace(self._require_state(), pending=mark)
        await self._save(state)
        self._state = state
        # Cancelled meanwhile, the run still waits for Spark and ``fn`` to return (the
        # batch stays pending): neither goes on unseen after the run has ended.
        await finish_in_thread(self._process, fn, table, batch_id)
        self._state = dataclasses.replace(state, committed=mark, pending=None)
        await self._save(self._state)
        if self._probe is not None:
            self._probe.committed()
        try:
            await stream.ack(last)
        except Exception as exc:  # the batch is committed; a lost ack only delays retention
            log.warning("acknowledging batch %d failed: %s", batch_id, exc)
        info = BatchInfo(
            batch_id=batch_id,
            insert_rows=rows.insert_rows,
            delete_rows=rows.delete_rows,
            packs=batch.packs,
            begin_ts=batch.begin_ts,
            end_ts=last.end_ts,
            redo=redo is not None,
            seconds=time.perf_counter() - started,
        )
        progress = self.progress
        progress.batches += 1
        progress.insert_rows += info.insert_rows
        progress.delete_rows += info.delete_rows
        progress.redone += int(redo is not None)
        progress.last_batch_id = batch_id
        progress.committed_ts = last.end_ts
        if self._probe is not None:
            self._probe.batch(info.rows, info.seconds, redone=info.redo)
        if self.on_batch is not None:
            self.on_batch(info)

    async def _save(self, state: CheckpointState) -> None:
        """Write the checkpoint in a worker thread: a durable write waits for two fsyncs,
        which on a busy disk take long enough to stall every task of the loop. A
        cancellation waits for the write to end, so a write of this run never lands
        after the next run's."""
        await finish_in_thread(save_checkpoint, self.checkpoint, state)

    def _process(self, fn: UserFunction, table: pa.Table, batch_id: int) -> None:
        assert self._spark_schema is not None
        if self._frames is None:
            self._frames = ArrowFrames(self.spark)
        df = self._frames.dataframe(table, self._spark_schema, local_relation=self.local_relation)
        fn(df, batch_id)


class _Flights:
    """The batches handed over and not yet committed, oldest first: at most two, one in
    Spark and the next being built (:meth:`MicroBatcher._start`), so a run holds at
    most two built tables besides the rows it is reading."""

    LIMIT = 2

    def __init__(self) -> None:
        self._tasks: deque[asyncio.Task[None]] = deque()

    @property
    def oldest(self) -> asyncio.Task[None] | None:
        return self._tasks[0] if self._tasks else None

    @property
    def newest(self) -> asyncio.Task[None] | None:
        return self._tasks[-1] if self._tasks else None

    def add(self, start: Coroutine[object, object, None]) -> None:
        self._tasks.append(asyncio.ensure_future(start))

    def reap(self) -> None:
        """Forget the batches that are over, in order; raise the first one's error."""
        tasks = self._tasks
        while tasks and tasks[0].done():
            tasks.popleft().result()

    async def make_room(self) -> None:
        """Until fewer than :attr:`LIMIT` batches are in flight."""
        await self._down_to(self.LIMIT - 1)

    async def drain(self) -> None:
        """Until every batch is committed; raise the first error."""
        await self._down_to(0)

    async def _down_to(self, count: int) -> None:
        """Until at most ``count`` batches are in flight, oldest first; raise the first
        error."""
        while len(self._tasks) > count:
            await self._tasks[0]  # kept until it is over: a cancelled run settles it
            self._tasks.popleft()

    async def settle(self) -> None:
        """Until every batch has ended, whatever its outcome (the run is failing or
        cancelled: Spark and ``fn`` finish, their batches stay pending)."""
        tasks, self._tasks = list(self._tasks), deque()
        await asyncio.gather(*tasks, return_exceptions=True)


@dataclass(frozen=True)
class _RunEnd:
    """Where a run stops: at ``tick``, or when the stream has read every channel up to
    its MessageID in ``stops`` (bytes; None: the channel is empty); ``estimate`` is
    about where that is, for progress (see :meth:`SlicePlanner.stop_times`)."""

    tick: int | None
    stops: dict[str, bytes | None] | None
    estimate: int | None = None


def _ready(feed: PackFeed) -> tuple[MsgPack | None, bool]:
    """The next pack read, if one is ready, and whether the stream has ended (a bounded
    stream read to its stops)."""
    try:
        return feed.get_nowait(), False
    except StopAsyncIteration:
        return None, True


def _new_batch(frame: FrameSchema, begin_ts: int) -> _Batch:
    bad: list[tuple[TsMsg, CodecError]] = []
    rows = DmlRows(frame, _with_body, lambda msg, exc: bad.append((msg, exc)))
    return _Batch(rows, bad, begin_ts=begin_ts)


def _with_body(msg: TsMsg) -> TsMsg:
    """``msg`` with its body read: an unchecked Insert body is decoded here, and raises
    :class:`~msgstream.errors.DecodeError` if it is bad."""
    lazy = msg.lazy_body
    if lazy is not None:
        for name in lazy[0].deferred:
            getattr(msg, name)
    return msg


def _report_bad(stream: TtMsgStream, batch: _Batch) -> None:
    """Report the batch's bad messages as the stream reports one on arrival (they are
    skipped: one bad message never stops a run)."""
    for msg, exc in batch.bad:
        stream.report_bad(msg, exc)
    batch.bad.clear()
