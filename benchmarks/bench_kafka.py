"""Kafka figures, each beside raw aiokafka doing the same work in the same run.

    python benchmarks/bench_kafka.py [--bootstrap HOST:PORT] [--quick] [--json FILE]

Without ``--bootstrap`` a local Apache Kafka broker is started (tests/brokers/kafka.py).
Figures (goals from the Kafka issue):
  1. single-message produce latency p50/p99: MsgStream.produce vs aiokafka send_and_wait of
     the same bytes, same producer settings                      (p50 <= 1.10x, p99 <= 1.25x)
  2. pipelined produce throughput: MsgStream.produce of a pack vs raw pipelined sends (>= 0.9x)
  3. reference: raw aiokafka vs Kafka's Java producer (ProducerPerformance) on the same
     broker, to show how much of the ceiling is the Python client
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaProducer

from msgstream import (
    MsgStream,
    config_from_dict,
    encode,
    new_client,
)
from msgstream.backends.kafka.settings import producer_kwargs
from msgstream.bench.recorder import Recorder
from report import (
    Row,
    alternating_rounds,
    broker_produce_rows,
    delete,
    interleaved_latency,
    print_table,
    stream_pipelined_rate,
    tests_on_path,
)

ROUNDS = 6  # even: each side goes first in half of the rounds


async def bench_latency(config: Any, count: int) -> tuple[Recorder, Recorder]:
    """Interleave raw send_and_wait and MsgStream.produce, so noise hits both alike."""
    stamp = time.monotonic_ns()
    raw = AIOKafkaProducer(**producer_kwargs(config.kafka))
    await raw.start()
    stream = MsgStream(new_client(config))
    ours_topic, raw_topic = f"bench-lat-ours-{stamp}", f"bench-lat-raw-{stamp}"
    await stream.as_producer([ours_topic])
    await stream.client.create_producer(raw_topic)  # create the raw topic the same way
    raw_us, ours_us = await interleaved_latency(
        count,
        delete,
        lambda payload: raw.send_and_wait(raw_topic, payload, partition=0),
        stream.produce,
    )
    await raw.stop()
    await stream.close()
    return raw_us, ours_us


async def bench_raw_pipelined(config: Any, total: int) -> float:
    producer = AIOKafkaProducer(**producer_kwargs(config.kafka))
    await producer.start()
    topic = f"bench-tput-raw-{time.monotonic_ns()}"
    client = new_client(config)
    await client.create_producer(topic)
    payloads = [encode(delete(i)) for i in range(total)]
    await producer.send_and_wait(topic, payloads[0], partition=0)
    start = time.perf_counter()
    futures = [await producer.send(topic, p, partition=0) for p in payloads]
    await asyncio.gather(*futures)
    elapsed = time.perf_counter() - start
    await producer.stop()
    await client.close()
    return total / elapsed


def java_producer_rate(bootstrap: str, total: int, record_size: int) -> float | None:
    """Kafka's own Java producer (``ProducerPerformance``), same acks and linger: how fast
    the broker takes records when the client is not the bottleneck."""
    tests_on_path()
    from brokers.kafka import KAFKA_VERSION
    from brokers.maven import resolve_classpath

    jars = resolve_classpath("kafka-tools", [f"org.apache.kafka:kafka-tools:{KAFKA_VERSION}"])
    topic = f"bench-java-{time.monotonic_ns()}"
    asyncio.run(_create_topic(bootstrap, topic))
    result = subprocess.run(
        [
            "java",
            "-Xmx512m",
            "-cp",
            ":".join(map(str, jars)),
            "org.apache.kafka.tools.ProducerPerformance",
            "--topic",
            topic,
            "--num-records",
            str(total),
            "--record-size",
            str(record_size),
            "--throughput",
            "-1",
            "--producer-props",
            f"bootstrap.servers={bootstrap}",
            "acks=all",
            "linger.ms=0",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    rates = re.findall(r"([\d.]+) records/sec", result.stdout)
    return float(rates[-1]) if rates else None


async def _create_topic(bootstrap: str, topic: str) -> None:
    config = config_from_dict({"mq": {"type": "kafka"}, "kafka": {"brokers": bootstrap}}, env={})
    client = new_client(config)
    await client.create_producer(topic)
    await client.close()


def start_local_broker(stack: ExitStack) -> str:
    tests_on_path()
    from brokers.kafka import LocalKafka

    workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-kafka-")))
    broker = LocalKafka(workdir / "kafka")
    print("starting a local Kafka broker...", file=sys.stderr)
    broker.start()
    stack.callback(broker.close)
    return str(broker.bootstrap)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else "")
    parser.add_argument("--bootstrap", help="an existing broker (default: start a local one)")
    parser.add_argument("--quick", action="store_true", help="fewer iterations")
    parser.add_argument("--json", help="also write the figures to this JSON file")
    args = parser.parse_args()
    scale = 0.1 if args.quick else 1.0
    latency_n = int(10_000 * scale)
    total = int(100_000 * scale)
    with ExitStack() as stack:
        bootstrap = args.bootstrap or start_local_broker(stack)
        config = config_from_dict(
            {"mq": {"type": "kafka"}, "kafka": {"brokers": bootstrap}}, env={}
        )
        raw, ours = asyncio.run(bench_latency(config, latency_n))
        raw_rounds, our_rounds = alternating_rounds(
            ROUNDS,
            lambda: asyncio.run(bench_raw_pipelined(config, total)),
            lambda: asyncio.run(stream_pipelined_rate(config, total)),
        )
        rows = broker_produce_rows(raw, ours, raw_rounds, our_rounds)
        record_size = len(encode(delete(0)))
        java = java_producer_rate(bootstrap, total * 5, record_size)
        if java is not None:
            rows.append(
                Row(
                    f"reference: Java producer, {record_size} B records",
                    statistics.median(raw_rounds),
                    java,
                    "msgs/s",
                    "raw aiokafka vs Java client",
                )
            )
    import aiokafka

    print_table(
        rows,
        args.json,
        broker=f"Apache Kafka (local) at {bootstrap}",
        client=f"aiokafka {aiokafka.__version__}",
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
