"""Kafka figures, each beside raw aiokafka doing the same work in the same run.

    python benchmarks/bench_kafka.py [--bootstrap HOST:PORT] [--quick] [--json FILE]

Without ``--bootstrap`` a local Apache Kafka broker is started (tests/brokers/kafka.py).
Figures (goals from the Kafka issue):
  1. single-message produce latency p50/p99: MsgStream.produce vs aiokafka send_and_wait of
     the same bytes, same producer settings                      (p50 <= 1.10x, p99 <= 1.25x)
  2. pipelined produce throughput: MsgStream.produce of 1,000-message packs vs raw
     pipelined sends of the same                                                (>= 0.9x)
Both are measured by the ``msgstream bench`` harness (``msgstream bench produce
--baseline raw``: its raw aiokafka target, HDR histograms, slices that alternate).
  3. reference: raw aiokafka vs Kafka's Java producer (ProducerPerformance) on the same
     broker, to show how much of the ceiling is the Python client
"""

from __future__ import annotations

import argparse
import asyncio
import re
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

from msgstream import config_from_dict, new_client
from report import BROKER_RECORD, Row, broker_produce_rows, print_table, tests_on_path


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
        rows = asyncio.run(broker_produce_rows(config, latency_n, total))
        java = java_producer_rate(bootstrap, total * 5, BROKER_RECORD)
        if java is not None:
            raw_pipelined = rows[-1].baseline or 0.0
            rows.append(
                Row(
                    f"reference: Java producer, {BROKER_RECORD} B records",
                    raw_pipelined,
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
