"""Spark bridge figures: rows/s into Spark DataFrames, beside the createDataFrame ceiling.

    python benchmarks/bench_spark.py [--quick] [--rows N] [--json FILE] [--kafka]

One run, one local[2] Spark session, one data set: the sample collection of
``msgstream.bridge_spark.workload`` (int64 key, float vector, string, JSON; inserts of ~100 rows
and some deletes) on 4 channels of an embedded store, read in the ``changes`` frame.

Figures (rows/s, median of alternating rounds so machine noise hits every side alike):
  1. ``spark.createDataFrame`` of the same rows as one prebuilt Arrow table  (the ceiling)
  2. the driver-side micro-batcher: read, convert, createDataFrame per batch (vs 1)
  3. the streaming source, one Trigger.AvailableNow query into the ``noop`` sink (vs 1)
  4. the same with ``maxRowsPerTrigger`` (several micro-batches)
With ``--kafka`` (a local broker from tests/brokers, or ``--bootstrap``), same topic data:
  5. the streaming source on Kafka vs Spark's own Kafka source reading the raw values
     (``spark-sql-kafka-0-10`` of PySpark's version, resolved from Maven Central with
     tests/brokers/maven.py): the same rows over each one's time. Where that artifact
     cannot be resolved the baseline is reported unavailable, with the reason.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa

from msgstream import Config, SubscriptionPosition, config_from_dict, new_msgstream
from msgstream.bridge_spark import FrameBuilder, FrameKind, FrameSchema, MicroBatcher, local_spark
from msgstream.bridge_spark.workload import Produced, SampleProducer, sample_schema
from msgstream.ttstream import TtMsgStream
from report import Row, print_table, tests_on_path, timed

CHANNELS = [f"bench-{i}" for i in range(4)]
DIM = 32
ROUNDS = 3
BATCH_ROWS = 50_000


async def produce(config: Config, rows: int) -> Produced:
    async with new_msgstream(config) as stream:
        await stream.as_producer(CHANNELS)
        producer = SampleProducer(
            stream,
            schema=sample_schema(dim=DIM),
            rows_per_insert=(80, 120),
            delete_every=10,
            msgs_per_tick=8,
        )
        await producer.create_collection()
        return await producer.produce_rows(rows)


async def prebuilt_table(config: Config, frame: FrameSchema, last_tick: int) -> pa.Table:
    """Every row as one Arrow table, read once through a TtMsgStream."""
    from msgstream.bridge_spark.clients import open_reader

    builder = FrameBuilder(frame)
    reader = open_reader(config)
    async with TtMsgStream(reader.client, pursuit_lag_s=0) as stream:
        await stream.as_consumer(CHANNELS, "bench-prebuild", SubscriptionPosition.EARLIEST)
        async for pack in stream:
            builder.add_pack(pack)
            if pack.end_ts >= last_tick:
                break
    return builder.build()


def bench_ceiling(spark: Any, table: pa.Table, frame: FrameSchema) -> float:
    schema = frame.spark_schema()
    start = time.perf_counter()
    spark.createDataFrame(table, schema=schema)
    return table.num_rows / (time.perf_counter() - start)


def bench_batcher(spark: Any, config: Config, workdir: Path, expected: int) -> float:
    checkpoint = workdir / f"batcher-{time.monotonic_ns()}.json"
    batcher = MicroBatcher(
        spark,
        config,
        CHANNELS,
        checkpoint,
        collection="demo",
        schema=sample_schema(dim=DIM),
        max_rows=BATCH_ROWS,
    )
    start = time.perf_counter()
    progress = asyncio.run(batcher.run(lambda df, batch_id: None))
    elapsed = time.perf_counter() - start
    if progress.rows != expected:
        raise AssertionError(f"batcher read {progress.rows} rows, expected {expected}")
    return progress.rows / elapsed


def bench_source(
    spark: Any, options: dict[str, str], workdir: Path, expected: int, limit: int | None
) -> float:
    """Rows/s of an AvailableNow query into the noop sink, start to termination."""
    checkpoint = workdir / f"source-{time.monotonic_ns()}"
    reader = spark.readStream.format("msgstream")
    for key, value in options.items():
        reader = reader.option(key, value)
    if limit is not None:
        reader = reader.option("maxRowsPerTrigger", str(limit))
    start = time.perf_counter()
    query = (
        reader.load()
        .writeStream.format("noop")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    elapsed = time.perf_counter() - start
    rows = sum(p["numInputRows"] for p in query.recentProgress)
    shutil.rmtree(checkpoint, ignore_errors=True)
    if rows != expected:
        raise AssertionError(f"source read {rows} rows, expected {expected}")
    return rows / elapsed


def spark_kafka_jars() -> tuple[list[str], str]:
    """Spark's own Kafka source for this PySpark version from Maven Central, with the
    dependencies PySpark does not bundle; ``([], why)`` when they cannot be resolved."""
    import pyspark

    tests_on_path()
    from brokers.maven import MavenResolveError, resolve_classpath

    artifact = f"org.apache.spark:spark-sql-kafka-0-10_2.13:{pyspark.__version__}"
    try:
        jars = resolve_classpath("spark-sql-kafka", [artifact])
    except MavenResolveError as exc:
        text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))
        reason = next((line for line in text.splitlines() if "Could not" in line), text[:300])
        reason = reason.split("pom:0: ", 1)[-1].split(" -> [Help", 1)[0]
        return [], f"Maven Central: {reason.strip()}"
    bundled = {_artifact_name(p.name) for p in (Path(pyspark.__file__).parent / "jars").iterdir()}
    return [str(j) for j in jars if _artifact_name(j.name) not in bundled], ""


def _artifact_name(jar: str) -> str:
    match = re.match(r"^(.*?)-\d[\w.+-]*\.jar$", jar)
    return match.group(1) if match else jar


def start_kafka(workdir: Path) -> tuple[str, Callable[[], None]]:
    tests_on_path()
    from brokers.kafka import LocalKafka

    broker = LocalKafka(workdir / "kafka")
    print("starting a local Kafka broker...", file=sys.stderr)
    broker.start()
    return str(broker.bootstrap), broker.close


def bench_spark_kafka(spark: Any, bootstrap: str, workdir: Path, expected_rows: int) -> float:
    """Spark's Kafka source reading the raw values of the same topics: the same rows over
    its time (it reads records, each carrying many rows)."""
    checkpoint = workdir / f"spark-kafka-{time.monotonic_ns()}"
    start = time.perf_counter()
    query = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", ",".join(CHANNELS))
        .option("startingOffsets", "earliest")
        .load()
        .select("value")
        .writeStream.format("noop")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    elapsed = time.perf_counter() - start
    shutil.rmtree(checkpoint, ignore_errors=True)
    if sum(p["numInputRows"] for p in query.recentProgress) == 0:
        raise AssertionError("Spark's Kafka source read nothing")
    return expected_rows / elapsed


def kafka_rows(
    spark: Any, total: int, workdir: Path, bootstrap: str, jars_missing: str
) -> list[Row]:
    config = config_from_dict({"mq": {"type": "kafka"}, "kafka": {"brokers": bootstrap}}, env={})
    produced = timed("produce to Kafka", lambda: asyncio.run(produce(config, total)))
    expected = len(produced.inserted) + len(produced.deleted)
    options = {
        "mq.type": "kafka",
        "kafka.brokers": bootstrap,
        "channels": ",".join(CHANNELS),
        "collectionSchema": json.dumps(sample_schema(dim=DIM).to_dict()),
    }
    timed("warm-up (Kafka)", lambda: bench_source(spark, options, workdir, expected, None))
    ours, theirs = [], []
    for r in range(ROUNDS):
        ours.append(
            timed(
                f"source kafka {r}", lambda: bench_source(spark, options, workdir, expected, None)
            )
        )
        if not jars_missing:
            theirs.append(
                timed(
                    f"spark kafka {r}",
                    lambda: bench_spark_kafka(spark, bootstrap, workdir, expected),
                )
            )
    baseline = statistics.median(theirs) if theirs else None
    rows = [
        Row(
            "streaming source (Kafka) vs Spark's Kafka source",
            statistics.median(ours),
            baseline,
            "rows/s",
            ">= 1.0x" if baseline else "baseline n/a",
        )
    ]
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else "")
    parser.add_argument("--quick", action="store_true", help="fewer rows")
    parser.add_argument("--rows", type=int, help="rows to insert (default 400000, quick 50000)")
    parser.add_argument("--kafka", action="store_true", help="also the Kafka figures")
    parser.add_argument("--bootstrap", help="with --kafka: an existing broker (default: start one)")
    parser.add_argument("--json", help="also write the figures to this JSON file")
    args = parser.parse_args()
    total = args.rows or (50_000 if args.quick else 400_000)
    rows: list[Row] = []
    workdir = Path(tempfile.mkdtemp(prefix="msgstream-bench-spark-"))
    cleanups: list[Callable[[], None]] = []
    try:
        config = config_from_dict(
            {"mq": {"type": "rocksmq"}, "rocksmq": {"path": str(workdir / "store")}}, env={}
        )
        produced = timed("produce", lambda: asyncio.run(produce(config, total)))
        expected = len(produced.inserted) + len(produced.deleted)
        frame = FrameSchema(sample_schema(dim=DIM), FrameKind.CHANGES)
        table = timed(
            "prebuild table",
            lambda: asyncio.run(prebuilt_table(config, frame, produced.last_tick)),
        )
        assert table.num_rows == expected, (table.num_rows, expected)
        conf = {"spark.local.dir": str(workdir / "spark")}
        jars_missing = ""
        if args.kafka:
            jars, jars_missing = timed("resolve Spark's Kafka source", spark_kafka_jars)
            if jars:
                conf["spark.jars"] = ",".join(jars)
            else:
                print(f"  no Spark Kafka source: {jars_missing}", file=sys.stderr)
        spark = timed("spark start", lambda: local_spark(conf=conf))
        source_options = {
            "rocksmq.path": str(workdir / "store"),
            "channels": ",".join(CHANNELS),
            "collectionSchema": json.dumps(sample_schema(dim=DIM).to_dict()),
        }

        def source(limit: int | None) -> float:
            return bench_source(spark, source_options, workdir, expected, limit)

        timed("warm-up", lambda: source(BATCH_ROWS))
        ceiling, batcher, whole, limited = [], [], [], []
        for r in range(ROUNDS):
            ceiling.append(timed(f"ceiling {r}", lambda: bench_ceiling(spark, table, frame)))
            batcher.append(
                timed(f"batcher {r}", lambda: bench_batcher(spark, config, workdir, expected))
            )
            whole.append(timed(f"source {r}", lambda: source(None)))
            limited.append(timed(f"source limited {r}", lambda: source(BATCH_ROWS)))
        top = statistics.median(ceiling)
        rows.append(Row("createDataFrame(prebuilt Arrow table)", top, None, "rows/s", "ceiling"))
        rows.append(
            Row("driver-side batcher -> DataFrames", statistics.median(batcher), top, "rows/s", "")
        )
        rows.append(
            Row("streaming source (rocksmq), one batch", statistics.median(whole), top,
                "rows/s", "")
        )  # fmt: skip
        rows.append(
            Row(f"streaming source (rocksmq), {BATCH_ROWS} rows/trigger",
                statistics.median(limited), top, "rows/s", "")
        )  # fmt: skip
        if args.kafka:
            if args.bootstrap:
                bootstrap = args.bootstrap
            else:
                bootstrap, stop = start_kafka(workdir)
                cleanups.append(stop)
            rows.extend(kafka_rows(spark, total, workdir, bootstrap, jars_missing))
        extra = {
            "data": f"{expected} rows ({len(produced.inserted)} inserts, "
            f"{len(produced.deleted)} deletes) in {produced.insert_msgs + produced.delete_msgs} "
            f"produce calls on {len(CHANNELS)} channels, dim {DIM}, "
            f"{table.nbytes / 1e6:.0f} MB of Arrow; batcher batches of {BATCH_ROWS} rows",
            "spark": f"pyspark {spark.version}, local[2], driver memory 1g",
        }
        if jars_missing:
            extra["spark kafka source"] = jars_missing
        spark.stop()
        print_table(rows, args.json, **extra)
    finally:
        for cleanup in cleanups:
            cleanup()
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    raise SystemExit(main())
