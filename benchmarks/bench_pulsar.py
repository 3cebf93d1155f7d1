"""Pulsar figures, each beside raw ``pulsar.asyncio`` doing the same work in the same run.

    python benchmarks/bench_pulsar.py [--service-url URL --admin-url URL] [--quick] [--json FILE]

Without ``--service-url`` a local Apache Pulsar standalone is started
(tests/brokers/pulsar.py). Figures (goals from the Pulsar issue):
  1. single-message produce latency p50/p99: MsgStream.produce vs a raw ``pulsar.asyncio``
     producer's ``send`` of the same bytes, same producer settings   (p50 <= 1.10x, p99 <= 1.25x)
  2. pipelined produce throughput: MsgStream.produce of 1,000-message packs vs raw
     pipelined sends of the same                                             (>= 0.9x)
Both are measured by the ``msgstream bench`` harness (``msgstream bench produce
--baseline raw``: its raw pulsar.asyncio target, HDR histograms, alternating slices).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path

import pulsar

from msgstream import config_from_dict
from report import broker_produce_rows, print_table, tests_on_path


def start_local_broker(stack: ExitStack) -> tuple[str, str]:
    tests_on_path()
    from brokers.pulsar import LocalPulsar

    workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-pulsar-")))
    broker = LocalPulsar(workdir / "pulsar", short_lived=False)
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
        rows = asyncio.run(broker_produce_rows(config, latency_n, total))
    print_table(
        rows,
        args.json,
        broker=f"Apache Pulsar standalone at {address}",
        client=f"pulsar-client {pulsar.__version__}, batching off",
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
