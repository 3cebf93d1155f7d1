"""The driver-side micro-batcher with a real local Spark session."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import stat
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest
from prometheus_client import CollectorRegistry

import msgstream.bridge_spark.data.batcher as batcher_module
from msgstream import (
    DataType,
    FieldData,
    InsertMsg,
    MsgPack,
    SubscriptionPosition,
    TimeTickMsg,
    TopicNotFoundError,
    TsMsg,
    encode,
    new_client,
    new_msgstream,
    new_ttmsgstream,
)
from msgstream.bridge_spark import (
    BatchInfo,
    CheckpointError,
    CheckpointState,
    MicroBatcher,
    OptionError,
    ParquetSink,
    SchemaMismatchError,
    SliceIncompleteError,
    load_checkpoint,
    save_checkpoint,
)
from msgstream.bridge_spark.data.arrow_frames import LOCAL_RELATION_THRESHOLD
from msgstream.bridge_spark.data.dml_rows import DmlRows
from msgstream.bridge_spark.data.workload import Produced, SampleProducer, sample_schema
from msgstream.observability.metrics import PrometheusInstruments
from spark.data import channel_names, memory_config, produce_sample, rocksmq_config

from .test_columnar import edit_buffer

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

pytestmark = pytest.mark.spark


class Collect:
    """A user function keeping each batch's (op, pk) rows."""

    def __init__(self) -> None:
        self.batches: dict[int, list[tuple[str, int]]] = {}

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        if "_op" not in df.columns:  # the inserts frame
            df = df.selectExpr("'insert' AS _op", "pk")
        self.batches[batch_id] = [(r["_op"], r["pk"]) for r in df.select("_op", "pk").collect()]


def every_row(produced: Produced) -> Counter[tuple[str, int]]:
    """Each (op, pk) row the producer sent, counted."""
    return Counter(
        [("insert", int(k)) for k in produced.inserted]
        + [("delete", int(k)) for k in produced.deleted]
    )


async def tick_packs(
    config: object, channels: list[str]
) -> list[tuple[int, int, set[tuple[str, int]]]]:
    """(begin_ts, end_ts, rows) of every pack a TtMsgStream cuts, read to the end (the
    channels' newest messages now)."""
    out = []
    async with new_ttmsgstream(config, pursuit_lag_s=0) as stream:  # type: ignore[arg-type]
        latest = {c: await stream.get_latest_msg_id(c) for c in channels}
        await stream.as_consumer(
            channels, "reference", SubscriptionPosition.EARLIEST, stop_at=latest
        )
        async with asyncio.timeout(30):
            async for pack in stream:
                rows = set()
                for msg in pack.msgs:
                    if isinstance(msg, InsertMsg):
                        rows.update(("insert", int(k)) for k in msg.row_ids)
                    elif msg.msg_type == 3:
                        rows.update(("delete", int(k)) for k in msg.primary_keys)  # type: ignore[attr-defined]
                out.append((pack.begin_ts, pack.end_ts, rows))
    return out


async def test_batches_are_cut_only_at_pack_boundaries(spark: SparkSession, tmp_path: Path) -> None:
    config = rocksmq_config(tmp_path / "store")
    channels = channel_names("cut", 3)
    produced = await produce_sample(config, channels, 300, msgs_per_tick=6)
    packs = await tick_packs(config, channels)
    data_packs = [p for p in packs if p[2]]
    assert len(data_packs) > 5

    infos: list[BatchInfo] = []
    collect = Collect()
    batcher = MicroBatcher(
        spark, config, channels, tmp_path / "ck.json", max_rows=1, on_batch=infos.append
    )
    progress = await batcher.run(collect)
    # max_rows=1: every batch is exactly one pack with rows (plus empty packs before it)
    assert len(infos) == len(data_packs) == progress.batches
    ends = {p[1]: p[2] for p in packs}
    for info in infos:
        assert set(collect.batches[info.batch_id]) == ends[info.end_ts]
        assert len(collect.batches[info.batch_id]) == info.rows
    assert progress.insert_rows == len(produced.inserted)
    assert progress.delete_rows == len(produced.deleted)
    assert progress.stopped == "reached end tick"

    # larger batches: each one is a run of whole packs, (begin_ts, end_ts] on pack ends,
    # closed by the pack that brings it to its row count: a quarter of max_rows for the
    # first batch of a run (Spark starts sooner), max_rows after it
    for first_rows, check in ((None, 30), (120, 120), (7, 7)):
        infos.clear()
        bigger = Collect()
        batcher = MicroBatcher(
            spark,
            config,
            channels,
            tmp_path / f"ck-{first_rows}.json",
            max_rows=120,
            first_batch_rows=first_rows,
            max_interval_s=600,
            on_batch=infos.append,
        )
        await batcher.run(bigger)
        assert 2 <= len(infos) < len(data_packs)
        for info in infos:
            covered = [p[2] for p in packs if info.begin_ts < p[1] <= info.end_ts]
            assert info.end_ts in ends
            assert Counter(bigger.batches[info.batch_id]) == Counter(
                r for rows in covered for r in rows
            )
        for info in infos[:-1]:  # the last one ends with the channels
            limit = check if info.batch_id == 0 else 120
            assert info.rows - len(ends[info.end_ts]) < limit <= info.rows, (info, limit)
        assert [i.batch_id for i in infos] == list(range(len(infos)))


class CrashAfterWrite:
    """The Parquet sink, but batch ``crash_at`` dies after its files were written."""

    def __init__(self, sink: ParquetSink, crash_at: int) -> None:
        self.sink = sink
        self.crash_at = crash_at

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        self.sink(df, batch_id)
        if batch_id == self.crash_at:
            raise RuntimeError(f"simulated crash in batch {batch_id}")


async def test_a_failing_batch_is_redone_with_its_id_and_every_row_lands_once(
    spark: SparkSession, tmp_path: Path
) -> None:
    config = rocksmq_config(tmp_path / "store")
    channels = channel_names("redo", 4)
    produced = await produce_sample(config, channels, 800, msgs_per_tick=4)
    out = str(tmp_path / "out")
    checkpoint = tmp_path / "state" / "ck.json"
    sink = ParquetSink(out)
    first: list[BatchInfo] = []
    batcher = MicroBatcher(spark, config, channels, checkpoint, max_rows=150, on_batch=first.append)
    with pytest.raises(RuntimeError, match="simulated crash in batch 2"):
        await batcher.run(CrashAfterWrite(sink, crash_at=2))
    assert [i.batch_id for i in first] == [0, 1]
    state = load_checkpoint(checkpoint)
    assert state is not None and state.pending is not None and state.committed is not None
    assert (state.committed.batch_id, state.pending.batch_id) == (1, 2)
    crashed = spark.read.parquet(sink.batch_path(2)).select("_op", "pk").collect()
    assert crashed  # the failed attempt did write its files

    second: list[BatchInfo] = []
    registry = CollectorRegistry()
    batcher = MicroBatcher(
        spark,
        config,
        channels,
        checkpoint,
        max_rows=150,
        on_batch=second.append,
        instruments=PrometheusInstruments(registry),
    )
    await batcher.run(sink)
    source = {"source": "msgstream-spark-batcher"}
    assert registry.get_sample_value("msgstream_spark_batches_total", source) == len(second)
    assert registry.get_sample_value("msgstream_spark_redone_batches_total", source) == 1
    rows_total = registry.get_sample_value("msgstream_spark_rows_total", source)
    assert rows_total == sum(i.rows for i in second)
    commits = registry.get_sample_value("msgstream_spark_checkpoint_commits_total", source)
    assert commits is not None and commits >= len(second)
    assert second[0].batch_id == 2 and second[0].redo
    assert second[0].end_ts == state.pending.end_ts
    assert [i.batch_id for i in second] == list(range(2, 2 + len(second)))
    assert all(not i.redo for i in second[1:])
    redone = spark.read.parquet(sink.batch_path(2)).select("_op", "pk").collect()
    assert Counter(map(tuple, redone)) == Counter(map(tuple, crashed))  # the same slice

    rows = spark.read.parquet(out).select("_op", "pk", "batch_id").collect()
    inserted = Counter(r["pk"] for r in rows if r["_op"] == "insert")
    deleted = Counter(r["pk"] for r in rows if r["_op"] == "delete")
    assert inserted == Counter(produced.inserted)  # every row once: none lost, none twice
    assert deleted == Counter(produced.deleted)
    assert sorted({r["batch_id"] for r in rows}) == list(range(2 + len(second)))
    final = load_checkpoint(checkpoint)
    assert final is not None and final.pending is None
    assert final.committed is not None and final.committed.batch_id == 1 + len(second)
    assert [p.name for p in checkpoint.parent.iterdir()] == ["ck.json"]  # no temp files left

    again: list[BatchInfo] = []
    progress = await MicroBatcher(spark, config, channels, checkpoint, on_batch=again.append).run(
        sink
    )
    assert again == [] and progress.stopped == "nothing new"


async def test_available_now_reads_what_existed_when_the_run_started(
    spark: SparkSession, tmp_path: Path
) -> None:
    config = rocksmq_config(tmp_path / "store")
    channels = channel_names("now", 3)
    first = await produce_sample(config, channels, 300, msgs_per_tick=4)
    last_tick = max(p[1] for p in await tick_packs(config, channels))
    infos: list[BatchInfo] = []
    committed = asyncio.Event()

    def on_batch(info: BatchInfo) -> None:
        infos.append(info)
        committed.set()

    collect = Collect()
    batcher = MicroBatcher(
        spark, config, channels, tmp_path / "ck.json", max_rows=60, on_batch=on_batch
    )
    running = asyncio.create_task(batcher.run(collect))
    async with asyncio.timeout(60):
        await committed.wait()  # the run is reading: produce past its end
        second = await produce_sample(config, channels, 200, seed=7, create=False)
        progress = await running
    assert progress.stopped == "reached end tick"
    assert progress.committed_ts == progress.end_ts == last_tick
    assert progress.target_ts == last_tick  # the channels end with a tick: exact
    got = Counter(pk for rows in collect.batches.values() for op, pk in rows if op == "insert")
    assert got == Counter(first.inserted)
    assert len(infos) >= 3

    # The next run reads the rows produced during the first, and only those.
    rest = Collect()
    progress = await MicroBatcher(spark, config, channels, tmp_path / "ck.json").run(rest)
    later = Counter(pk for rows in rest.batches.values() for op, pk in rows if op == "insert")
    assert later == Counter(second.inserted) and sum(later.values()) == 200
    assert progress.stopped == "reached end tick" and progress.end_ts > last_tick


async def test_without_its_checkpoint_a_run_starts_at_the_earliest_message_again(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The runs acknowledge what they commit; a new checkpoint still means ``start``
    (earliest), not where the subscription's acknowledgements stand (the memory backend
    keeps them; the batcher reads rocksmq read-only, where they are not stored)."""
    config = memory_config(str(tmp_path))
    channels = channel_names("fresh", 2)
    produced = await produce_sample(config, channels, 150, msgs_per_tick=4)
    for checkpoint in ("first.json", "second.json"):
        collect = Collect()
        async with asyncio.timeout(60):
            progress = await MicroBatcher(
                spark, config, channels, tmp_path / checkpoint, max_rows=40
            ).run(collect)
        got = Counter(pk for rows in collect.batches.values() for op, pk in rows if op == "insert")
        assert got == Counter(produced.inserted), checkpoint
        assert progress.stopped == "reached end tick" and progress.batches >= 3


async def test_a_pending_batch_beyond_the_channels_end_is_an_error_not_a_wait(
    spark: SparkSession, tmp_path: Path
) -> None:
    config = rocksmq_config(tmp_path / "store")
    channels = channel_names("gone", 2)
    await produce_sample(config, channels, 200, msgs_per_tick=4)
    checkpoint = tmp_path / "ck.json"
    sink = ParquetSink(str(tmp_path / "out"))
    batcher = MicroBatcher(spark, config, channels, checkpoint, max_rows=50)
    with pytest.raises(RuntimeError, match="simulated crash in batch 1"):
        await batcher.run(CrashAfterWrite(sink, crash_at=1))
    state = load_checkpoint(checkpoint)
    assert state is not None and state.pending is not None
    # As if the messages of the pending batch's end were deleted: it ends past them.
    beyond = dataclasses.replace(state.pending, end_ts=state.pending.end_ts + (1 << 40))
    save_checkpoint(checkpoint, dataclasses.replace(state, pending=beyond))
    with pytest.raises(SliceIncompleteError) as gone:
        async with asyncio.timeout(60):
            await MicroBatcher(spark, config, channels, checkpoint, max_rows=50).run(sink)
    assert str(gone.value).startswith(
        f"batch 1 is pending up to tick {beyond.end_ts}, but the channels now end at tick "
    )
    assert str(gone.value).endswith(": messages it read are gone")


async def test_concurrent_producer_on_the_memory_backend(
    spark: SparkSession, tmp_path: Path
) -> None:
    config = memory_config(str(tmp_path))
    channels = channel_names("live", 2)
    collect = Collect()
    committed = asyncio.Event()
    async with new_msgstream(config) as stream:
        await stream.as_producer(channels)
        producer = SampleProducer(stream, seed=3, msgs_per_tick=3)
        await producer.create_collection()
        batcher = MicroBatcher(
            spark,
            config,
            channels,
            tmp_path / "ck.json",
            frame="inserts",
            max_rows=10_000,
            max_interval_s=0.3,
            schema=sample_schema(),
            on_batch=lambda info: committed.set(),
        )

        async def produce() -> None:
            for _ in range(10):
                await producer.produce_rows(30)
                await asyncio.sleep(0.05)
            await producer.finish()

        producing = asyncio.create_task(produce())
        running = asyncio.create_task(batcher.run(collect, until="forever"))
        running.add_done_callback(lambda _: committed.set())
        await producing
        expected = len(producer.produced.inserted)
        async with asyncio.timeout(60):
            while batcher.progress.insert_rows < expected and not running.done():
                committed.clear()
                await committed.wait()
        assert not running.done(), running.exception()
        running.cancel()
        assert await asyncio.gather(running, return_exceptions=True) != [None]
    rows = [pk for batch in collect.batches.values() for op, pk in batch]
    assert all(op == "insert" for batch in collect.batches.values() for op, _ in batch)
    assert sorted(rows) == sorted(producer.produced.inserted)
    assert len(collect.batches) >= 2  # cut by max_interval while production went on


async def test_bad_input_is_named(spark: SparkSession, tmp_path: Path) -> None:
    config = rocksmq_config(tmp_path / "store")
    channels = channel_names("bad", 2)
    await produce_sample(config, channels, 40)

    with pytest.raises(TopicNotFoundError) as missing:
        await MicroBatcher(spark, config, [*channels, "bad-nope"], tmp_path / "a.json").run(
            Collect()
        )
    assert str(missing.value) == (
        "channel 'bad-nope' does not exist on backend 'rocksmq'; did you mean 'bad-1' or 'bad-0'?"
    )

    for rows in (0, 41):
        with pytest.raises(OptionError) as refused:
            MicroBatcher(
                spark, config, channels, tmp_path / "a.json", max_rows=40, first_batch_rows=rows
            )
        assert str(refused.value) == (
            f"option 'first_batch_rows': must be >= 1 and <= max_rows (40), got {rows}"
        )

    garbage = tmp_path / "garbage.json"
    garbage.write_text("{not json", encoding="utf-8")
    with pytest.raises(CheckpointError) as caught:
        await MicroBatcher(spark, config, channels, garbage).run(Collect())
    assert str(caught.value).startswith(f"checkpoint {garbage}: is not valid JSON (")
    assert caught.value.path == str(garbage)

    foreign = tmp_path / "foreign.json"
    foreign.write_text('{"format": "something-else"}', encoding="utf-8")
    with pytest.raises(CheckpointError) as caught:
        await MicroBatcher(spark, config, channels, foreign).run(Collect())
    assert str(caught.value) == f"checkpoint {foreign}: is not a msgstream-spark-batcher checkpoint"

    done = tmp_path / "done.json"
    await MicroBatcher(spark, config, channels, done).run(Collect())
    with pytest.raises(CheckpointError) as caught:
        await MicroBatcher(spark, config, channels[:1], done).run(Collect())
    assert str(caught.value) == (
        f"checkpoint {done}: was written for channels {channels}, not {channels[:1]}"
    )

    if os.geteuid() != 0:  # root reads anything
        locked = tmp_path / "locked.json"
        locked.write_text("{}", encoding="utf-8")
        locked.chmod(0)
        try:
            with pytest.raises(CheckpointError) as caught:
                await MicroBatcher(spark, config, channels, locked).run(Collect())
            assert str(caught.value) == f"checkpoint {locked}: cannot be read: Permission denied"
        finally:
            locked.chmod(stat.S_IRUSR | stat.S_IWUSR)


async def test_an_insert_with_a_field_of_the_wrong_type_stops_the_run(
    spark: SparkSession, tmp_path: Path
) -> None:
    config = rocksmq_config(tmp_path / "store")
    channels = channel_names("wrong", 2)
    await produce_sample(config, channels, 30)
    async with new_msgstream(config) as stream:
        await stream.as_producer(channels)
        producer = SampleProducer(stream)
        bad = InsertMsg(
            msg_id=999,
            timestamp=producer.emitter.allocator.allocate(),
            collection_name="demo",
            row_ids=[10_001],
            hash_keys=[1],
            fields=[
                FieldData("pk", DataType.INT64, [10_001]),
                FieldData("vec", DataType.FLOAT_VECTOR, np.zeros((1, 8)), dim=8),
                FieldData("text", DataType.INT32, [7]),
                FieldData("meta", DataType.JSON, [None]),
            ],
        )
        await stream.produce(MsgPack.of(bad))
        await producer.finish()
    checkpoint = tmp_path / "ck.json"
    with pytest.raises(SchemaMismatchError) as caught:
        await MicroBatcher(spark, config, channels, checkpoint, max_rows=10**6).run(Collect())
    assert caught.value.field == "text"
    assert caught.value.channel == "wrong-1"
    assert str(caught.value).startswith(
        "field 'text' in InsertMsg(msg_id=999, collection='demo') at MessageID "
    )
    assert str(caught.value).endswith(
        " on channel 'wrong-1': has type int32, but the collection schema says varchar"
    )
    assert load_checkpoint(checkpoint) is None  # nothing was processed


async def test_an_insert_with_a_bad_body_is_skipped_logged_and_counted(
    spark: SparkSession, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The batcher's stream leaves Insert bodies unchecked; a text that is not UTF-8
    (sound envelope and checksum) makes the batch's columnar build refuse, the batch is
    decoded message by message, and only the bad Insert is skipped and reported."""
    config = rocksmq_config(tmp_path / "store")
    channels = channel_names("badbody", 2)
    produced = await produce_sample(config, channels, 30)
    ts = produced.last_tick + 10

    def insert(msg_id: int, pk: int, text: str) -> bytes:
        return encode(
            InsertMsg(
                msg_id=msg_id,
                timestamp=ts,
                collection_name="demo",
                row_ids=[pk],
                fields=[
                    FieldData("pk", DataType.INT64, [pk]),
                    FieldData("vec", DataType.FLOAT_VECTOR, np.zeros((1, 8)), dim=8),
                    FieldData("text", DataType.VARCHAR, [text]),
                    FieldData("meta", DataType.JSON, [None]),
                ],
            )
        )

    bad = edit_buffer(insert(901, 10_002, "ok"), "text", "data", b"h\xff")
    client = new_client(config)
    raw = {c: await client.create_producer(c) for c in channels}
    bad_id = (await raw[channels[0]].send_many([insert(900, 10_001, "fine"), bad]))[1]
    for c in channels:
        await raw[c].send(encode(TimeTickMsg(msg_id=1, timestamp=ts + 1)))
    await client.close()
    collect = Collect()
    with caplog.at_level(logging.WARNING):
        progress = await MicroBatcher(
            spark, config, channels, tmp_path / "ck.json", max_rows=10**6
        ).run(collect)
    rows = [row for batch in collect.batches.values() for row in batch]
    expected = [("insert", pk) for pk in [*produced.inserted, 10_001]]
    expected += [("delete", pk) for pk in produced.deleted]
    assert sorted(rows) == sorted(expected)
    assert progress.insert_rows == len(produced.inserted) + 1
    warnings = [r.getMessage() for r in caplog.records if "undecodable" in r.getMessage()]
    assert len(warnings) == 1
    assert warnings[0].startswith(
        f"skipping undecodable message on channel {channels[0]!r} at MessageID {bad_id!r}: "
    )
    assert "UTF-8" in warnings[0]


class PlanKinds(Collect):
    """:class:`Collect`, also noting the kind of each batch's logical plan."""

    def __init__(self) -> None:
        super().__init__()
        self.kinds: set[str] = set()

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        self.kinds.add(df._jdf.queryExecution().logical().getClass().getSimpleName())
        super().__call__(df, batch_id)


async def test_batches_stay_arrow_record_batches_and_the_session_keeps_its_setting(
    spark: SparkSession, tmp_path: Path
) -> None:
    config = rocksmq_config(tmp_path / "store")
    channels = channel_names("arrow", 2)
    produced = await produce_sample(config, channels, 240)
    expected = every_row(produced)
    spark.conf.set(LOCAL_RELATION_THRESHOLD, "7654321")  # the user's own setting
    try:
        kept = PlanKinds()
        await MicroBatcher(spark, config, channels, tmp_path / "a.json", max_rows=100).run(kept)
        # a small batch would be a LocalRelation (rows converted on the driver); it stays
        # Arrow record batches in an RDD, and the session's setting is back as it was
        assert kept.kinds == {"LogicalRDD"}
        assert spark.conf.get(LOCAL_RELATION_THRESHOLD) == "7654321"
        assert Counter(r for rows in kept.batches.values() for r in rows) == expected

        spark_own = PlanKinds()
        await MicroBatcher(
            spark, config, channels, tmp_path / "b.json", max_rows=100, local_relation=True
        ).run(spark_own)
        assert spark_own.kinds == {"LocalRelation"}
        assert spark_own.batches == kept.batches
        assert spark.conf.get(LOCAL_RELATION_THRESHOLD) == "7654321"
    finally:
        spark.conf.unset(LOCAL_RELATION_THRESHOLD)


def _writes_recorded(
    monkeypatch: pytest.MonkeyPatch, before_write: Callable[[], None] = lambda: None
) -> list[tuple[bool, CheckpointState]]:
    """Every checkpoint write of a batcher, as (whether it ran on a thread with a running
    event loop, the state written); ``before_write`` runs first, in the writing thread."""
    writes: list[tuple[bool, CheckpointState]] = []

    def recording(path: str | os.PathLike[str], state: CheckpointState) -> None:
        try:
            asyncio.get_running_loop()
            on_loop = True
        except RuntimeError:
            on_loop = False
        before_write()
        save_checkpoint(path, state)
        writes.append((on_loop, state))

    monkeypatch.setattr(batcher_module, "save_checkpoint", recording)
    return writes


async def cancel_while_held(
    run: asyncio.Future[object], entered: threading.Event, release: threading.Event, what: str
) -> None:
    """Once ``what`` (held until ``release``) has ``entered``, cancel ``run``: it must not
    end while ``what`` is held, and ends cancelled once released."""
    try:
        assert await asyncio.to_thread(entered.wait, 60), f"the run never reached {what}"
        run.cancel()
        await asyncio.sleep(0.3)
        assert not run.done(), f"the cancelled run ended with {what} still going on"
    finally:
        release.set()
    with pytest.raises(asyncio.CancelledError):
        await run


async def test_checkpoints_are_written_off_the_event_loop(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A durable write waits for two fsyncs: it runs in a worker thread, never on the loop
    (each batch writes its pending mark, then its committed one)."""
    writes = _writes_recorded(monkeypatch)
    config = rocksmq_config(tmp_path / "store")
    channels = channel_names("offloop", 2)
    await produce_sample(config, channels, 120, msgs_per_tick=4)
    checkpoint = tmp_path / "ck.json"
    async with asyncio.timeout(60):
        progress = await MicroBatcher(spark, config, channels, checkpoint, max_rows=40).run(
            Collect()
        )
    assert progress.batches >= 3
    assert [on_loop for on_loop, _ in writes] == [False] * (2 * progress.batches)
    assert [state.pending is not None for _, state in writes] == [True, False] * progress.batches
    assert load_checkpoint(checkpoint) == writes[-1][1]


async def test_a_cancelled_run_ends_only_after_its_checkpoint_write(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cancelled while writing its checkpoint, a run waits for the write to end before it
    ends: a write left running could land after the next run's writes and take the
    checkpoint back. Channels holding only time ticks make the run commit past them with
    no batch, from the loop itself."""
    started, release = threading.Event(), threading.Event()
    writes = _writes_recorded(monkeypatch, lambda: (started.set(), release.wait(30)))
    config = rocksmq_config(tmp_path / "store")
    channels = channel_names("ticksonly", 2)
    client = new_client(config)
    producers = [await client.create_producer(c) for c in channels]
    for tick in (100, 200, 300):
        for producer in producers:
            await producer.send(encode(TimeTickMsg(msg_id=tick, timestamp=tick)))
    await client.close()
    checkpoint = tmp_path / "ck.json"
    run = asyncio.ensure_future(
        MicroBatcher(
            spark, config, channels, checkpoint, collection="demo", schema=sample_schema()
        ).run(Collect())
    )
    await cancel_while_held(run, started, release, "its checkpoint write")
    [(on_loop, state)] = writes
    assert not on_loop and state.pending is None and state.committed is not None
    assert state.committed.batch_id == -1 and state.committed.end_ts == 300
    assert load_checkpoint(checkpoint) == state


async def test_a_cancelled_run_ends_only_after_the_batch_in_flight(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Cancelled while Spark and the user function run a batch, a run ends once they have
    returned, and the batch stays pending: no Spark job or user function goes on after
    the run has ended, and the next run redoes the batch with its id."""
    config = rocksmq_config(tmp_path / "store")
    channels = channel_names("inflight", 2)
    produced = await produce_sample(config, channels, 60)
    entered, release = threading.Event(), threading.Event()
    calls: list[int] = []

    def held(df: DataFrame, batch_id: int) -> None:
        entered.set()
        release.wait(30)
        calls.append(df.count())

    checkpoint = tmp_path / "ck.json"
    run = asyncio.ensure_future(
        MicroBatcher(spark, config, channels, checkpoint, max_rows=10**6).run(held)
    )
    await cancel_while_held(run, entered, release, "the Spark job and user function")
    rows = len(produced.inserted) + len(produced.deleted)
    assert calls == [rows]  # the function ran once, to its end
    state = load_checkpoint(checkpoint)
    assert state is not None and state.committed is None
    assert state.pending is not None and state.pending.batch_id == 0
    collect = Collect()
    async with asyncio.timeout(60):
        await MicroBatcher(spark, config, channels, checkpoint, max_rows=10**6).run(collect)
    assert list(collect.batches) == [0]
    assert sorted(pk for _, pk in collect.batches[0]) == sorted(
        [*produced.inserted, *produced.deleted]
    )


def _mark(state: CheckpointState) -> tuple[int, str]:
    """The batch a checkpoint write marks, and whether it is pending or done."""
    if state.pending is not None:
        return state.pending.batch_id, "pending"
    assert state.committed is not None
    return state.committed.batch_id, "done"


def _builds_counted(monkeypatch: pytest.MonkeyPatch, fail_at: int | None = None) -> threading.Event:
    """Counts the batches' table builds; the event is set once a second one has ended
    (raising there when ``fail_at`` is 2)."""
    second = threading.Event()
    count = [0]
    build = DmlRows.build

    def counted(self: DmlRows[TsMsg]) -> object:
        count[0] += 1
        try:
            if count[0] == fail_at:
                raise RuntimeError(f"simulated failure building batch {fail_at - 1}")
            return build(self)
        finally:
            if count[0] == 2:
                second.set()

    monkeypatch.setattr(DmlRows, "build", counted)
    return second


async def test_the_next_batch_is_built_while_spark_runs_one(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Building a table is Python and Spark's part mostly its JVM: batch 1's table is
    built while batch 0 is in Spark. Ids, checkpoint marks and rows stay in order."""
    writes = _writes_recorded(monkeypatch)
    second_built = _builds_counted(monkeypatch)
    config = rocksmq_config(tmp_path / "store")
    channels = channel_names("overlap", 2)
    produced = await produce_sample(config, channels, 200, msgs_per_tick=4)
    seen_built: list[bool] = []
    collect = Collect()

    def held(df: DataFrame, batch_id: int) -> None:
        if batch_id == 0:
            seen_built.append(second_built.wait(30))
        collect(df, batch_id)

    async with asyncio.timeout(90):
        progress = await MicroBatcher(
            spark, config, channels, tmp_path / "ck.json", max_rows=40, first_batch_rows=40
        ).run(held)
    assert seen_built == [True]
    assert progress.batches >= 3 and list(collect.batches) == list(range(progress.batches))
    marks = [_mark(state) for _, state in writes]
    assert marks == [(i, kind) for i in range(progress.batches) for kind in ("pending", "done")]
    rows = Counter(r for batch in collect.batches.values() for r in batch)
    assert rows == every_row(produced)


@pytest.mark.parametrize("failing", ["the function of batch 0", "the build of batch 1"])
async def test_a_batch_built_beside_a_failing_one_is_never_pending(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    """While batch 0 is in Spark, batch 1 is built. If batch 0's function fails, the run
    fails with its error and batch 1 never becomes pending; if batch 1's build fails,
    batch 0 still commits. The next run then goes on from the checkpoint, every row once."""
    writes = _writes_recorded(monkeypatch)
    second_built = _builds_counted(monkeypatch, fail_at=2 if "build" in failing else None)
    config = rocksmq_config(tmp_path / "store")
    channels = channel_names("failing", 2)
    produced = await produce_sample(config, channels, 200, msgs_per_tick=4)
    checkpoint = tmp_path / "ck.json"
    collect = Collect()

    def fn(df: DataFrame, batch_id: int) -> None:
        assert second_built.wait(30), "batch 1 was not built beside batch 0"
        if "function" in failing:
            raise RuntimeError("simulated failure in batch 0")
        collect(df, batch_id)

    with pytest.raises(RuntimeError, match="simulated failure"):
        async with asyncio.timeout(90):
            await MicroBatcher(spark, config, channels, checkpoint, max_rows=40).run(fn)
    state = load_checkpoint(checkpoint)
    assert state is not None
    if "function" in failing:
        assert [s.pending.batch_id for _, s in writes if s.pending] == [0]
        assert state.pending is not None and state.pending.batch_id == 0
        assert state.committed is None
    else:
        assert list(collect.batches) == [0]
        assert state.pending is None
        assert state.committed is not None and state.committed.batch_id == 0
    monkeypatch.undo()
    async with asyncio.timeout(90):
        await MicroBatcher(spark, config, channels, checkpoint, max_rows=40).run(collect)
    rows = Counter(r for batch in collect.batches.values() for r in batch)
    assert rows == every_row(produced)
