"""``spark.readStream.format("msgstream")`` with real queries: the embedded store, Kafka,
Pulsar."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from msgstream import (
    Config,
    SubscriptionPosition,
    config_from_dict,
    new_ttmsgstream,
    positions_to_json,
)
from msgstream.backends.log_client.client import RocksmqMessageID
from msgstream.backends.rocksmq import RocksOptions, RocksStore
from msgstream.backends.rocksmq.settings import RocksmqConfig
from msgstream.bridge_spark import drop_subscription
from msgstream.bridge_spark.data.workload import sample_schema
from msgstream.streams.factory import new_client
from spark.data import channel_names, produce_sample, rocksmq_config

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import DataStreamReader, StreamingQuery

pytestmark = pytest.mark.spark


def source(
    spark: SparkSession, store: Path, channels: list[str], **options: str
) -> DataStreamReader:
    reader = (
        spark.readStream.format("msgstream")
        .option("rocksmq.path", str(store))
        .option("channels", ",".join(channels))
    )
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader


def committed_offsets(checkpoint: Path) -> dict[int, dict[str, Any]]:
    """Batch id -> the source's end offset, from the query's offset log."""
    out = {}
    for entry in (checkpoint / "offsets").iterdir():
        if entry.name.isdigit():
            lines = entry.read_text(encoding="utf-8").splitlines()
            out[int(entry.name)] = json.loads(lines[2])
    return out


def sink_files(output: Path) -> dict[int, list[str]]:
    """Batch id -> the Parquet files the file sink committed for it."""
    out: dict[int, list[str]] = {}
    for entry in (output / "_spark_metadata").iterdir():
        if entry.name.isdigit():
            lines = entry.read_text(encoding="utf-8").splitlines()[1:]
            out[int(entry.name)] = [json.loads(line)["path"] for line in lines]
    return out


def wait_for_batches(query: StreamingQuery, count: int, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if query.exception() is not None:
            raise AssertionError(f"query failed: {query.exception()}")
        progress = query.lastProgress
        if progress is not None and progress["batchId"] >= count - 1:
            return
        time.sleep(0.2)
    raise AssertionError(f"fewer than {count} batches after {timeout_s} s")


@dataclass
class Target:
    """A backend the source reads: its msgstream config and the source's options for it."""

    config: Config
    options: dict[str, str]
    prefix: str


@pytest.fixture(
    params=[
        "rocksmq",
        pytest.param("kafka", marks=pytest.mark.kafka),
        pytest.param("pulsar", marks=pytest.mark.pulsar),
    ],
)
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Target:
    prefix = f"half-{uuid.uuid4().hex[:6]}"
    backend = request.param
    if backend == "rocksmq":
        store = tmp_path / "store"
        return Target(rocksmq_config(store), {"rocksmq.path": str(store)}, prefix)
    if backend == "kafka":
        broker = request.getfixturevalue("kafka_broker")
        settings = {"brokers": broker.bootstrap}
    else:
        broker = request.getfixturevalue("pulsar_broker")
        settings = {"address": broker.service_url, "admin_url": broker.admin_url}
    options = {"mq.type": backend, **{f"{backend}.{k}": v for k, v in settings.items()}}
    config = config_from_dict({"mq": {"type": backend}, backend: settings}, env={})
    return Target(config, options, prefix)


async def wait_until(
    condition: Callable[[], Awaitable[bool]], what: str, timeout_s: float = 120
) -> None:
    """Poll ``condition`` until it holds (the runner Spark stops closes after the query);
    the deadline is for a loaded machine, where Spark's own steps slow down the most."""
    deadline = time.monotonic() + timeout_s
    while not await condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not {what} after {timeout_s} s")
        await asyncio.sleep(0.2)


def secondary_dirs(store: Path) -> list[Path]:
    """The secondary-instance directories of the read-only rocksmq stores open on
    ``store`` now, in this process or another (RocksDB's info LOG in each names the
    primary's directory; a store removes its directory when closed)."""
    found = []
    for entry in Path(tempfile.gettempdir()).glob("msgstream-secondary-*"):
        with contextlib.suppress(OSError):
            if f" {store} " in (entry / "LOG").read_text(errors="replace"):
                found.append(entry)
    return found


async def planner_subscriptions(target: Target, channels: list[str]) -> list[str]:
    """The channels on which the query's planner subscription exists (Kafka, Pulsar)."""
    client: Any = new_client(target.config)
    try:
        names = {c: {i.name for i in await client.list_subscriptions(c)} for c in channels}
    finally:
        await client.close()
    return [c for c in channels if "msgstream-spark.planner" in names[c]]


async def test_a_stopped_query_closes_what_its_planner_opened(
    spark: SparkSession, tmp_path: Path, target: Target
) -> None:
    """Spark stops a query's source runner with SIGTERM; the source's stop still runs
    there: the driver's read-only store goes (rocksmq), and so does the planner's
    subscription (Pulsar: a durable subscription, which would otherwise keep the
    channels' backlog). On Kafka the planner reads through seek readers, which commit
    nothing: no consumer group of it exists, while the query runs or after."""
    channels = channel_names(target.prefix, 2)
    await produce_sample(target.config, channels, 100, msgs_per_tick=4)
    reader = spark.readStream.format("msgstream").option("channels", ",".join(channels))
    for key, value in target.options.items():
        reader = reader.option(key, value)
    query = (
        reader.load()
        .writeStream.format("noop")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .start()
    )
    try:
        wait_for_batches(query, 1)
        if target.config.mq.type == "rocksmq":
            store = target.config.section(RocksmqConfig).resolved_path()

            async def opened() -> bool:
                return bool(secondary_dirs(store))

            async def closed() -> bool:
                return not secondary_dirs(store)
        elif target.config.mq.type == "kafka":

            async def opened() -> bool:
                return await planner_subscriptions(target, channels) == []

            closed = opened
        else:

            async def opened() -> bool:
                return await planner_subscriptions(target, channels) == channels

            async def closed() -> bool:
                return await planner_subscriptions(target, channels) == []

        await wait_until(opened, "open while the query runs")
    finally:
        query.stop()
    await wait_until(closed, "closed once the query stopped")
    await drop_subscription(target.config, channels, "msgstream-spark")


async def test_query_stopped_half_way_and_restarted_writes_every_row_once(
    spark: SparkSession, tmp_path: Path, target: Target
) -> None:
    channels = channel_names(target.prefix, 4)
    produced = await produce_sample(target.config, channels, 600, msgs_per_tick=6)
    output, checkpoint = tmp_path / "out", tmp_path / "checkpoint"

    def start(available_now: bool) -> StreamingQuery:
        reader = spark.readStream.format("msgstream").option("channels", ",".join(channels))
        for key, value in {**target.options, "maxRowsPerTrigger": "200"}.items():
            reader = reader.option(key, value)
        writer = (
            reader.load()
            .writeStream.format("parquet")
            .option("path", str(output))
            .option("checkpointLocation", str(checkpoint))
        )
        if available_now:
            writer = writer.trigger(availableNow=True)
        return writer.start()

    first = start(available_now=False)
    try:
        wait_for_batches(first, 2)
    finally:
        first.stop()  # half-way: maybe in the middle of a batch
    written = len(spark.read.parquet(str(output)).collect())
    assert 0 < written < len(produced.inserted)

    more = await produce_sample(target.config, channels, 150, seed=5, create=False)
    second = start(available_now=True)
    second.awaitTermination(180)
    assert second.exception() is None

    await check_query_subscription(target, channels, committed_offsets(checkpoint))

    rows = spark.read.parquet(str(output)).select("_op", "pk", "_ts", "_channel").collect()
    inserted = Counter(r["pk"] for r in rows if r["_op"] == "insert")
    deleted = Counter(r["pk"] for r in rows if r["_op"] == "delete")
    assert inserted == Counter(produced.inserted) + Counter(more.inserted)
    assert deleted == Counter(produced.deleted) + Counter(more.deleted)

    # every micro-batch is one time slice (previous end tick, its end tick], across channels
    ends = committed_offsets(checkpoint)
    files = sink_files(output)
    assert len(files) >= 4
    ticks = [ends[b]["tick"] for b in sorted(ends)]
    assert ticks == sorted(ticks) and len(set(ticks)) == len(ticks)
    for batch, paths in files.items():
        begin = ends[batch - 1]["tick"] if batch else 0
        end = ends[batch]["tick"]
        if not paths:
            continue
        stamps = spark.read.parquet(*paths).select("_ts", "_channel").collect()
        assert all(begin < r["_ts"] <= end for r in stamps), batch
        assert len({r["_channel"] for r in stamps}) > 1


async def check_query_subscription(
    target: Target, channels: list[str], offsets: dict[int, dict[str, Any]]
) -> None:
    """The query's subscription is the only one the source left, and it stands where the
    batch Spark last let go of (the one before the last: Spark commits a batch to its
    source when it plans the next) ends."""
    positions = offsets[max(offsets) - 1]["positions"]
    ends = {c: base64.b64decode(positions[c]) for c in channels}
    if target.config.mq.type == "rocksmq":
        store = RocksStore(
            target.config.section(RocksmqConfig).resolved_path(), RocksOptions(read_only=True)
        )
        try:
            subs = {c: store.list_subscriptions(c) for c in channels}
        finally:
            store.close()
        assert {c: [(s.name, s.next_id) for s in subs[c]] for c in channels} == {
            c: [("msgstream-spark", RocksmqMessageID.parse(ends[c]).value)] for c in channels
        }
        await drop_subscription(target.config, channels, "msgstream-spark")
        assert not any(store.holds.of_channel(c) for c in channels)
        return

    async def only_the_querys() -> bool:  # the planner's goes when Spark stops its runner
        return await planner_subscriptions(target, channels) == []

    await wait_until(only_the_querys, "only the query's subscription left")
    client: Any = new_client(target.config)
    try:
        infos = {c: await client.list_subscriptions(c) for c in channels}
    finally:
        await client.close()
    # no reader's subscription is left, nor the planner's
    assert {c: sorted(i.name for i in infos[c]) for c in channels} == {
        c: ["msgstream-spark"] for c in channels
    }
    infos = {c: [i for i in infos[c] if i.name == "msgstream-spark"] for c in channels}
    for channel in channels:
        acked, end = infos[channel][0].acked_id, client.message_id_from_bytes(ends[channel])
        if target.config.mq.type == "kafka":
            assert acked.offset + 1 == end.offset
        else:  # a seek to the end position acknowledges the entry before it
            assert acked.sort_key[:2] == (end.ledger, end.entry - 1)
    await drop_subscription(target.config, channels, "msgstream-spark")
    client = new_client(target.config)
    try:
        assert [await client.list_subscriptions(c) for c in channels] == [[]] * len(channels)
    finally:
        await client.close()


async def test_latest_and_explicit_starting_positions(spark: SparkSession, tmp_path: Path) -> None:
    store = tmp_path / "store"
    config = rocksmq_config(store)
    channels = channel_names("start", 2)
    early = await produce_sample(config, channels, 200, msgs_per_tick=4)

    # a pack's end positions as startingPositions: only what follows that pack
    async with new_ttmsgstream(config, pursuit_lag_s=0) as stream:
        await stream.as_consumer(channels, "probe", SubscriptionPosition.EARLIEST)
        before: list[int] = []
        async for pack in stream:
            for msg in pack.msgs:
                if msg.msg_type == 2:
                    before.extend(msg.row_ids.tolist())  # type: ignore[attr-defined]
            if len(before) >= 80:
                positions = positions_to_json(pack.end_positions)
                break

    def run(name: str, **options: str) -> list[int]:
        keys: list[int] = []

        def collect(df: DataFrame, batch_id: int) -> None:
            keys.extend(r["pk"] for r in df.select("pk").collect())

        query = (
            source(spark, store, channels, frame="inserts", **options)
            .load()
            .writeStream.foreachBatch(collect)
            .option("checkpointLocation", str(tmp_path / name))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(120)
        assert query.exception() is None
        return keys

    after = run("from_positions", startingPositions=positions)
    assert sorted(after) == sorted(set(early.inserted) - set(before))

    assert run("from_latest", startingPositions="latest") == []
    late = await produce_sample(config, channels, 50, seed=9, create=False)
    again = run("from_latest", startingPositions="latest")  # same checkpoint: resumes
    assert sorted(again) == sorted(late.inserted)


async def test_bad_input_names_channel_field_and_option(
    spark: SparkSession, tmp_path: Path
) -> None:
    from pyspark.errors import PySparkException

    store = tmp_path / "store"
    config = rocksmq_config(store)
    channels = channel_names("oops", 2)
    await produce_sample(config, channels, 20)
    schema = json.dumps(sample_schema().to_dict())

    with pytest.raises(PySparkException) as caught:
        source(spark, store, [*channels, "oops-missing"]).load()
    assert "channel 'oops-missing' does not exist on backend 'rocksmq'" in str(caught.value)

    with pytest.raises(PySparkException) as caught:
        source(spark, store, channels, maxRowsPerTriger="5").load()
    assert "option 'maxrowspertriger': unknown option of the msgstream source" in str(caught.value)

    with pytest.raises(PySparkException) as caught:
        spark.readStream.format("msgstream").option("mq.type", "memory").option(
            "channels", "a"
        ).load()
    assert "backend 'memory' does not offer reading from other processes" in str(caught.value)

    # a checkpoint written for other channels
    checkpoint = str(tmp_path / "ck")

    def query(chans: list[str]) -> StreamingQuery:
        return (
            source(spark, store, chans, collectionSchema=schema)
            .load()
            .writeStream.format("noop")
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )

    ok = query(channels)
    ok.awaitTermination(120)
    assert ok.exception() is None
    wrong = query(channels[:1])
    with pytest.raises(PySparkException) as caught:
        wrong.awaitTermination(120)
    assert "cover channels ['oops-0', 'oops-1'], but the job reads ['oops-0']" in str(caught.value)


def test_schema_mismatch_fails_the_micro_batch_naming_the_field(
    spark: SparkSession, tmp_path: Path
) -> None:
    import asyncio

    import numpy as np
    from pyspark.errors import PySparkException

    from msgstream import DataType, FieldData, InsertMsg, MsgPack, new_msgstream
    from msgstream.bridge_spark.data.workload import SampleProducer

    store = tmp_path / "store"
    config = rocksmq_config(store)
    channels = channel_names("mis", 2)

    async def produce() -> None:
        async with new_msgstream(config) as stream:
            await stream.as_producer(channels)
            producer = SampleProducer(stream)
            await producer.create_collection()
            bad = InsertMsg(
                msg_id=77,
                timestamp=producer.emitter.allocator.allocate(),
                collection_name="demo",
                row_ids=[1],
                hash_keys=[0],
                fields=[
                    FieldData("pk", DataType.INT64, [1]),
                    FieldData("vec", DataType.FLOAT_VECTOR, np.zeros((1, 8)), dim=8),
                    FieldData("text", DataType.DOUBLE, [1.0]),
                ],
            )
            await stream.produce(MsgPack.of(bad))
            await producer.finish()

    asyncio.run(produce())
    query = (
        source(spark, store, channels)
        .load()
        .writeStream.format("noop")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    with pytest.raises(PySparkException) as caught:
        query.awaitTermination(120)
    assert (
        "field 'text' in InsertMsg(msg_id=77, collection='demo') on channel 'mis-0': "
        "has type double, but the collection schema says varchar"
    ) in str(caught.value)
