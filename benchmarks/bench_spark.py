"""Spark bridge figures: rows/s into Spark, each beside a baseline measured in the same run.

    python benchmarks/bench_spark.py [--quick] [--rows N] [--kafka] [--pulsar] [--json FILE]

One ``local[2]`` Spark session (default driver memory, 1 GiB heap), one data set: the
sample collection of ``msgstream.bridge_spark.data.workload`` (int64 key, 32-dim float vector,
string, JSON; inserts of ~100 rows and some deletes) on 4 channels, read in the
``changes`` frame. Figures (rows/s, median of rounds whose order alternates, so machine
noise hits every side alike), with their stable ``id`` in ``--json``:

``ceiling``                 ``spark.createDataFrame`` of the same rows as one prebuilt
                            Arrow table
``batcher``                 the driver-side MicroBatcher: read, convert, createDataFrame
                            per batch of 50,000 rows                       (>= 0.8x ceiling)
``source_rocksmq``          the streaming source, one Trigger.AvailableNow query into the
                            ``noop`` sink                                  (>= 0.8x ceiling)
``source_rocksmq_limited``  the same with ``maxRowsPerTrigger=50000``      (>= 0.6x ceiling)
``floor``, ``floor_limited`` the same two queries of a Python streaming source that
                            does no work (``floor_source.py``: the rows already in Arrow
                            files, one partition per channel): the most any PySpark
                            Python source of this shape can reach here, beside the ceiling

With ``--kafka`` (a local broker from tests/brokers, or ``--bootstrap``), same rows:

``source_kafka``            the streaming source on Kafka vs Spark's own Kafka source
                            reading the raw values into ``noop``           (>= 1.0x)
``source_kafka_fair``       the same vs Spark's Kafka source plus decoding the values
                            into the same columns (``mapInArrow`` calling msgstream's
                            decoder), what a user would otherwise write    (>= 2.0x)
``source_kafka_confluent``, ``source_kafka_confluent_fair``
                            the two above with ``kafka.client=confluent`` (the source
                            reads through librdkafka), when confluent-kafka is installed
``floor_vs_spark_kafka``    the floor (above) in the Kafka rounds, beside Spark's Kafka
                            source: what is left for a Python source's own work

Spark's Kafka source is ``spark-sql-kafka-0-10`` from Maven Central: the newest release
that resolves, PySpark's version first (see ``spark_connector.py``). With ``--pulsar``
(a local standalone, or ``--service-url``): ``source_pulsar``, beside the ceiling.

The peak resident memory of the driver (JVM and Python) and of Spark's Python workers
is sampled throughout and printed; ``--rows 2000000`` shows how both scale.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pyarrow as pa

import floor_source
from msgstream import Config, SubscriptionPosition, config_from_dict, decode, new_msgstream
from msgstream.bridge_spark import FrameBuilder, FrameKind, FrameSchema, MicroBatcher, local_spark
from msgstream.bridge_spark.data.workload import Produced, SampleProducer, sample_schema
from msgstream.streams.ttstream import TtMsgStream
from report import Row, print_table, tests_on_path, timed
from rss import RssSampler
from spark_connector import resolve as resolve_connector

CHANNELS = [f"bench-{i}" for i in range(4)]
DIM = 32
ROUNDS = 3
KAFKA_ROUNDS = 5
"""The Kafka queries' rounds: one took 1.3-1.8 s from round to round in one run (the
broker shares the machine's two cores), so three made medians 20 % apart between runs."""
BATCH_ROWS = 50_000
Figure = Callable[[], float]


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


def expected_rows(produced: Produced) -> int:
    return len(produced.inserted) + len(produced.deleted)


async def prebuilt_table(config: Config, frame: FrameSchema, last_tick: int) -> pa.Table:
    """Every row as one Arrow table, read once through a TtMsgStream."""
    from msgstream.bridge_spark.data.clients import open_reader

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


def run_to_noop(frame: Any, workdir: Path) -> tuple[float, int]:
    """Seconds of an AvailableNow query of ``frame`` into the noop sink, start to end,
    and the input rows Spark counted."""
    checkpoint = workdir / f"query-{time.monotonic_ns()}"
    start = time.perf_counter()
    query = (
        frame.writeStream.format("noop")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    elapsed = time.perf_counter() - start
    shutil.rmtree(checkpoint, ignore_errors=True)
    progress = [p for p in query.recentProgress if p["numInputRows"]]
    print(f"    {len(progress)} micro-batch(es) with rows", file=sys.stderr)
    return elapsed, sum(p["numInputRows"] for p in progress)


def bench_source(
    spark: Any,
    options: dict[str, str],
    workdir: Path,
    expected: int,
    limit: int | None,
    source: str = "msgstream",
) -> float:
    """Rows/s of an AvailableNow query of ``source`` (the msgstream source, or
    :mod:`floor_source`'s: what Spark alone charges a Python streaming source of this
    shape) into ``noop``."""
    reader = spark.readStream.format(source)
    limits = {} if limit is None else {"maxRowsPerTrigger": limit}
    for key, value in {**options, **limits}.items():
        reader = reader.option(key, str(value))
    elapsed, rows = run_to_noop(reader.load(), workdir)
    if rows != expected:
        raise AssertionError(f"the {source} source read {rows} rows, expected {expected}")
    return rows / elapsed


def bench_floor(
    spark: Any, options: dict[str, str], workdir: Path, expected: int, limit: int | None
) -> float:
    return bench_source(spark, options, workdir, expected, limit, floor_source.NAME)


def spark_kafka(spark: Any, bootstrap: str) -> Any:
    return (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", ",".join(CHANNELS))
        .option("startingOffsets", "earliest")
        .load()
    )


def bench_spark_kafka(spark: Any, bootstrap: str, workdir: Path, expected: int) -> float:
    """Spark's Kafka source reading the raw values: the same rows over its time (its
    records are messages, each carrying many rows, so its own row count differs)."""
    elapsed, records = run_to_noop(spark_kafka(spark, bootstrap).select("value"), workdir)
    if records == 0:
        raise AssertionError("Spark's Kafka source read nothing")
    return expected / elapsed


def decode_values(frame: FrameSchema) -> Callable[[Iterator[pa.RecordBatch]], Iterator[Any]]:
    """What a user writes without the msgstream source: decode each record's value."""

    def decode_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            builder = FrameBuilder(frame)
            topics = batch.column("topic").to_pylist()
            for topic, value in zip(topics, batch.column("value").to_pylist(), strict=True):
                builder.add(decode(value), topic)
            yield from builder.build().to_batches()

    return decode_batches


def bench_spark_kafka_fair(
    spark: Any, bootstrap: str, frame: FrameSchema, workdir: Path, expected: int
) -> float:
    records = spark_kafka(spark, bootstrap).select("topic", "value")
    decoded = records.mapInArrow(decode_values(frame), frame.spark_schema())
    # numInputRows counts Kafka records here; the decoded rows are the expected ones.
    elapsed, records = run_to_noop(decoded, workdir)
    if records == 0:
        raise AssertionError("Spark's Kafka source read nothing")
    return expected / elapsed


def rounds(
    figures: dict[str, Figure], failed: dict[str, str], count: int = ROUNDS
) -> dict[str, float]:
    """The median of ``count`` runs of every figure; odd rounds run them in reverse order.

    A figure that raises (the ceiling's ``createDataFrame`` of 2 M rows can run the 1 GiB
    driver heap out of memory) is noted in ``failed`` with its error and left out of the
    later rounds and of the result (a median of the rounds before would not compare);
    the other figures go on."""
    samples: dict[str, list[float]] = {name: [] for name in figures}
    for r in range(count):
        order = list(figures) if r % 2 == 0 else list(reversed(figures))
        for name in (name for name in order if name not in failed):
            try:
                samples[name].append(timed(f"{name} {r}", figures[name]))
            except Exception as exc:
                failed[name] = error_line(exc)
                print(f"  {name} {r}: failed: {failed[name]}", file=sys.stderr)
    return {
        name: statistics.median(values)
        for name, values in samples.items()
        if values and name not in failed
    }


def error_line(exc: BaseException) -> str:
    """The line of an error's text that names it (a Java one's, for Py4J errors)."""
    text = str(exc)
    line = next((ln for ln in text.splitlines() if "Error" in ln), text)
    return line.strip().lstrip(": ")[:300]


def source_options(schema_json: str, **config: str) -> dict[str, str]:
    return {"channels": ",".join(CHANNELS), "collectionSchema": schema_json, **config}


def start_kafka(stack: ExitStack, workdir: Path) -> str:
    tests_on_path()
    from brokers.kafka import LocalKafka

    broker = LocalKafka(workdir / "kafka", short_lived=False)
    print("starting a local Kafka broker...", file=sys.stderr)
    broker.start()
    stack.callback(broker.close)
    return str(broker.bootstrap)


def start_pulsar(stack: ExitStack, workdir: Path) -> tuple[str, str]:
    tests_on_path()
    from brokers.pulsar import LocalPulsar

    broker = LocalPulsar(workdir / "pulsar", short_lived=False)
    print("starting a local Pulsar standalone...", file=sys.stderr)
    broker.start()
    stack.callback(broker.close)
    return broker.service_url, broker.admin_url


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else "")
    parser.add_argument("--quick", action="store_true", help="fewer rows")
    parser.add_argument("--rows", type=int, help="rows to insert (default 200000, quick 50000)")
    parser.add_argument("--kafka", action="store_true", help="also the Kafka figures")
    parser.add_argument("--bootstrap", help="with --kafka: an existing broker (default: start one)")
    parser.add_argument("--pulsar", action="store_true", help="also the Pulsar figure")
    parser.add_argument("--service-url", help="with --pulsar: an existing broker")
    parser.add_argument("--admin-url", help="with --service-url: its admin REST URL")
    parser.add_argument("--json", help="also write the figures to this JSON file")
    args = parser.parse_args()
    total = args.rows or (50_000 if args.quick else 200_000)
    workdir = Path(tempfile.mkdtemp(prefix="msgstream-bench-spark-"))
    with ExitStack() as stack:
        stack.callback(shutil.rmtree, workdir, ignore_errors=True)
        return run(args, total, workdir, stack)


def run(args: argparse.Namespace, total: int, workdir: Path, stack: ExitStack) -> int:
    import pyspark

    rows: list[Row] = []
    extra: dict[str, str] = {}
    schema_json = json.dumps(sample_schema(dim=DIM).to_dict())
    config = config_from_dict(
        {"mq": {"type": "rocksmq"}, "rocksmq": {"path": str(workdir / "store")}}, env={}
    )
    produced = timed("produce", lambda: asyncio.run(produce(config, total)))
    expected = expected_rows(produced)
    frame = FrameSchema(sample_schema(dim=DIM), FrameKind.CHANGES)
    table = timed(
        "prebuild table", lambda: asyncio.run(prebuilt_table(config, frame, produced.last_tick))
    )
    assert table.num_rows == expected, (table.num_rows, expected)
    conf = {"spark.local.dir": str(workdir / "spark")}
    if args.kafka:
        connector = timed(
            "resolve Spark's Kafka source",
            lambda: resolve_connector(pyspark.__version__, Path(pyspark.__file__).parent / "jars"),
        )
        extra["spark kafka source"] = connector.coordinate or "none resolved"
        if connector.note:
            extra["spark kafka source"] += f" ({connector.note})"
        if connector.jars:
            conf["spark.jars"] = ",".join(connector.jars)
    spark = timed("spark start", lambda: local_spark(conf=conf))
    floor_source.register(spark)
    floor = {
        "directory": str(workdir / "floor"),
        "schema": frame.spark_schema().json(),
    }
    floor_source.write_pieces(table, workdir / "floor", len(CHANNELS), BATCH_ROWS)
    sampler = RssSampler(spark.sparkContext._gateway.proc.pid).start()
    stack.callback(sampler.stop)
    rocksmq = source_options(schema_json, **{"rocksmq.path": str(workdir / "store")})
    timed("warm-up", lambda: bench_source(spark, rocksmq, workdir, expected, BATCH_ROWS))
    failed: dict[str, str] = {}
    local = rounds(
        {
            "ceiling": lambda: bench_ceiling(spark, table, frame),
            "batcher": lambda: bench_batcher(spark, config, workdir, expected),
            "source_rocksmq": lambda: bench_source(spark, rocksmq, workdir, expected, None),
            "source_rocksmq_limited": lambda: bench_source(
                spark, rocksmq, workdir, expected, BATCH_ROWS
            ),
            "floor": lambda: bench_floor(spark, floor, workdir, expected, None),
            "floor_limited": lambda: bench_floor(spark, floor, workdir, expected, BATCH_ROWS),
        },
        failed,
    )
    top = local.get("ceiling")
    described = {
        "ceiling": ("createDataFrame(prebuilt Arrow table)", "ceiling"),
        "batcher": ("driver-side batcher -> DataFrames", ">= 0.8x"),
        "source_rocksmq": ("streaming source (rocksmq), one batch", ">= 0.8x"),
        "source_rocksmq_limited": (f"streaming source (rocksmq), {BATCH_ROWS} rows/trigger",
                                   ">= 0.6x"),
        "floor": ("floor: Python source serving Arrow files", "bound"),
        "floor_limited": (f"floor, {BATCH_ROWS} rows/trigger", "bound"),
    }  # fmt: skip
    rows += [
        Row(figure, local[name], None if name == "ceiling" else top, "rows/s", goal, name)
        for name, (figure, goal) in described.items()
        if name in local
    ]
    if args.kafka:
        bootstrap = args.bootstrap or start_kafka(stack, workdir)
        rows += kafka_rows(
            spark,
            total,
            frame,
            workdir,
            bootstrap,
            schema_json,
            bool(conf.get("spark.jars")),
            failed,
            floor=lambda: bench_floor(spark, floor, workdir, expected, None),
        )
    if args.pulsar:
        if args.service_url:
            service, admin = args.service_url, args.admin_url or ""
        else:
            service, admin = start_pulsar(stack, workdir)
        try:
            rows.append(pulsar_row(spark, total, workdir, service, admin, schema_json, top, failed))
        except Exception as exc:  # reported below; the other figures stand
            failed["source_pulsar"] = error_line(exc)
    peaks = sampler.stop()
    extra = {
        "data": f"{expected} rows ({len(produced.inserted)} inserts, "
        f"{len(produced.deleted)} deletes) in {produced.insert_msgs + produced.delete_msgs} "
        f"produce calls on {len(CHANNELS)} channels, dim {DIM}",
        "spark": f"pyspark {spark.version}, local[2], driver memory 1g",
        "peak rss": peaks.describe(),
        **extra,
        **{name: f"failed: {why}" for name, why in failed.items()},
    }
    spark.stop()
    print_table(rows, args.json, **extra)
    return 1 if failed else 0


def kafka_rows(
    spark: Any,
    total: int,
    frame: FrameSchema,
    workdir: Path,
    bootstrap: str,
    schema_json: str,
    has_connector: bool,
    failed: dict[str, str],
    floor: Figure,
) -> list[Row]:
    config = config_from_dict({"mq": {"type": "kafka"}, "kafka": {"brokers": bootstrap}}, env={})
    produced = timed("produce to Kafka", lambda: asyncio.run(produce(config, total)))
    expected = expected_rows(produced)
    options = source_options(schema_json, **{"mq.type": "kafka", "kafka.brokers": bootstrap})
    figures: dict[str, Figure] = {
        "source_kafka": lambda: bench_source(spark, options, workdir, expected, None)
    }
    if has_connector:
        figures["floor"] = floor
    confluent = {**options, "kafka.client": "confluent"}
    if has_confluent_kafka():
        figures["source_kafka_confluent"] = lambda: bench_source(
            spark, confluent, workdir, expected, None
        )
    if has_connector:
        figures["spark_kafka"] = lambda: bench_spark_kafka(spark, bootstrap, workdir, expected)
        figures["spark_kafka_fair"] = lambda: bench_spark_kafka_fair(
            spark, bootstrap, frame, workdir, expected
        )
        for name in ("spark_kafka", "spark_kafka_fair"):
            timed(f"warm-up {name}", figures[name])
    for name in ("source_kafka", "source_kafka_confluent"):
        if name in figures:
            timed(f"warm-up {name}", figures[name])
    got = rounds(figures, failed, KAFKA_ROUNDS)
    rows: list[Row] = []
    for name, engine in (("source_kafka", ""), ("source_kafka_confluent", ", confluent engine")):
        if name not in got:
            continue
        ours = got[name]
        rows += [
            Row(f"streaming source (Kafka{engine}) vs Spark's Kafka source", ours,
                got.get("spark_kafka"), "rows/s", ">= 1.0x", name),
            Row("  vs Spark's Kafka source + decoding (mapInArrow)", ours,
                got.get("spark_kafka_fair"), "rows/s", ">= 2.0x", f"{name}_fair"),
        ]  # fmt: skip
    if "floor" in got:
        rows.append(
            Row("floor (Python source, no work) vs Spark's Kafka source", got["floor"],
                got.get("spark_kafka"), "rows/s", "bound", "floor_vs_spark_kafka")
        )  # fmt: skip
    return rows


def has_confluent_kafka() -> bool:
    """Whether the confluent engine can run here (``msgstream[kafka-confluent]``)."""
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        return False
    return True


def pulsar_row(
    spark: Any,
    total: int,
    workdir: Path,
    service: str,
    admin: str,
    schema_json: str,
    ceiling: float | None,
    failed: dict[str, str],
) -> Row:
    settings = {"address": service, **({"admin_url": admin} if admin else {})}
    config = config_from_dict({"mq": {"type": "pulsar"}, "pulsar": settings}, env={})
    produced = timed("produce to Pulsar", lambda: asyncio.run(produce(config, total)))
    expected = expected_rows(produced)
    options = source_options(
        schema_json, **{"mq.type": "pulsar", **{f"pulsar.{k}": v for k, v in settings.items()}}
    )
    timed("warm-up source_pulsar", lambda: bench_source(spark, options, workdir, expected, None))
    got = rounds(
        {"source_pulsar": lambda: bench_source(spark, options, workdir, expected, None)}, failed
    )
    if "source_pulsar" not in got:
        raise RuntimeError(failed.pop("source_pulsar"))
    return Row("streaming source (Pulsar), one batch", got["source_pulsar"], ceiling, "rows/s",
               "vs ceiling", "source_pulsar")  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main())
