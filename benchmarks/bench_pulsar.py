"""Pulsar figures, each beside raw ``pulsar.asyncio`` doing the same work in the same run.

    python benchmarks/bench_pulsar.py [--service-url URL --admin-url URL] [--quick] [--json FILE]

Without ``--service-url`` a local Apache Pulsar standalone is started
(tests/brokers/pulsar.py). Figures (goals from the Pulsar issue):
  1. single-message produce latency p50/p99: MsgStream.produce vs a raw ``pulsar.asyncio``
     producer's ``send`` of the same bytes, same producer settings   (p50 <= 1.10x, p99 <= 1.25x)
  2. pipelined produce throughput: MsgStream.produce of a pack vs raw pipelined sends,
     the same number in flight                                               (>= 0.9x)
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pulsar
import pulsar.asyncio

from msgstream import MsgStream, config_from_dict, encode, new_client
from msgstream.backends.pulsar.settings import (
    MAX_PENDING_SENDS,
    client_kwargs,
    producer_kwargs,
    service_url,
    topic_name,
)
from msgstream.bench.recorder import Recorder
from report import (
    alternating_rounds,
    broker_produce_rows,
    delete,
    interleaved_latency,
    print_table,
    stream_pipelined_rate,
    tests_on_path,
)

ROUNDS = 6  # even: each side goes first in half of the rounds


async def raw_producer(config: Any, channel: str) -> tuple[Any, Any]:
    """A raw ``pulsar.asyncio`` client and producer with msgstream's producer settings."""
    section, shared = config.pulsar, config.msgstream
    client = pulsar.asyncio.Client(service_url(section), **client_kwargs(section, shared))
    producer = await client.create_producer(
        topic_name(section, channel), **producer_kwargs(section, shared)
    )
    return client, producer


async def bench_latency(config: Any, count: int) -> tuple[Recorder, Recorder]:
    """Interleave raw send and MsgStream.produce, so noise hits both alike."""
    stamp = time.monotonic_ns()
    raw_client, raw = await raw_producer(config, f"bench-lat-raw-{stamp}")
    stream = MsgStream(new_client(config))
    await stream.as_producer([f"bench-lat-ours-{stamp}"])
    raw_us, ours_us = await interleaved_latency(count, delete, raw.send, stream.produce)
    await raw_client.close()
    await stream.close()
    return raw_us, ours_us


async def bench_raw_pipelined(config: Any, total: int) -> float:
    client, producer = await raw_producer(config, f"bench-tput-raw-{time.monotonic_ns()}")
    payloads = [encode(delete(i)) for i in range(total)]
    await producer.send(payloads[0])
    start = time.perf_counter()
    for first in range(0, total, MAX_PENDING_SENDS):
        window = payloads[first : first + MAX_PENDING_SENDS]
        await asyncio.gather(*(producer.send(p) for p in window))
    elapsed = time.perf_counter() - start
    await client.close()
    return total / elapsed


def start_local_broker(stack: ExitStack) -> tuple[str, str]:
    tests_on_path()
    from brokers.pulsar import LocalPulsar

    workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-pulsar-")))
    broker = LocalPulsar(workdir / "pulsar")
    print("starting a local Pulsar standalone...", file=sys.stderr)
    broker.start()
    stack.callback(broker.close)
    return broker.service_url, broker.admin_url


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else "")
    parser.add_argument("--service-url", help="an existing broker (default: start a local one)")
    parser.add_argument("--admin-url", help="its admin REST URL (default: host:8080)")
    parser.add_argument("--quick", action="store_true", help="fewer iterations")
    parser.add_argument("--json", help="also write the figures to this JSON file")
    args = parser.parse_args()
    scale = 0.1 if args.quick else 1.0
    latency_n = int(10_000 * scale)
    total = int(50_000 * scale)
    with ExitStack() as stack:
        if args.service_url:
            address, admin = args.service_url, args.admin_url
        else:
            address, admin = start_local_broker(stack)
        config = config_from_dict(
            {"mq": {"type": "pulsar"}, "pulsar": {"address": address, "admin_url": admin}},
            env={},
        )
        raw, ours = asyncio.run(bench_latency(config, latency_n))
        raw_rounds, our_rounds = alternating_rounds(
            ROUNDS,
            lambda: asyncio.run(bench_raw_pipelined(config, total)),
            lambda: asyncio.run(stream_pipelined_rate(config, total)),
        )
        rows = broker_produce_rows(raw, ours, raw_rounds, our_rounds)
    print_table(
        rows,
        args.json,
        broker=f"Apache Pulsar standalone at {address}",
        client=f"pulsar-client {pulsar.__version__}, batching off",
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
