"""Kafka figures on both engines (``kafka.client`` aiokafka and confluent), each beside the
engine's raw client doing the same work in the same run.

    python benchmarks/bench_kafka.py [--bootstrap HOST:PORT] [--quick] [--json FILE]

Without ``--bootstrap`` a local Apache Kafka broker is started (tests/brokers/kafka.py).
Messages are the harness's 320-byte one-row Inserts (its minimum is 316 B). Figures
(``--json`` row ids in brackets):
  1. single-message produce latency p50/p99: MsgStream.produce vs the raw client's
     produce-and-wait of the same bytes, same settings
     [p50_aiokafka, p99_aiokafka, p50_confluent, p99_confluent]
  2. pipelined produce throughput: MsgStream.produce of 1,000-message packs vs the raw
     client's pipelined sends of the same       [pipelined_aiokafka, pipelined_confluent]
     Packs are built before the run (``--prebuilt 4``) and the raw clients get them
     encoded: the figure is the client's (msgstream's encoding included), not the
     building of messages.
Both are measured by the ``msgstream bench`` harness (``msgstream bench produce
--baseline raw``: the engine's raw target, HDR histograms, slices that alternate).
  3. confluent against raw aiokafka: pipelined (>= 3x) and p50 (below)
     [pipelined_confluent_vs_aiokafka, p50_confluent_vs_aiokafka], raw aiokafka being
     measured in the confluent engine's slices (below), alternating with the engine
  4. in the confluent engine's slices, five more sides (confluent_floor.py), p50 and
     pipelined against raw confluent-kafka: the *asyncio floor* (raw confluent-kafka
     woken on the loop as the engine is, nothing of msgstream: what any asyncio code can
     reach) [p50_confluent_floor, pipelined_confluent_floor], the same floor encoding
     the messages with msgstream's encoders in the measured time [p50_confluent_floorenc,
     pipelined_confluent_floorenc], the same floor with the least a checked encoder of
     these messages does (floor_encoder.py) [p50_confluent_floorleast,
     pipelined_confluent_floorleast], confluent-kafka's own
     ``confluent_kafka.aio.AIOProducer`` [p50_confluent_aio, pipelined_confluent_aio] and
     raw aiokafka [p50_confluent_aiokafka, pipelined_confluent_aiokafka]; then the
     engine against the floors [p50_confluent_vs_floor, p50_confluent_vs_floorenc,
     p50_confluent_vs_floorleast] and the floors against raw aiokafka
     [pipelined_floor_vs_aiokafka, pipelined_floorenc_vs_aiokafka,
     pipelined_floorleast_vs_aiokafka]
  5. TtMsgStream reading 16 channels on the confluent engine (>= 200k msgs/s), beside the
     same on aiokafka                                                  [tt_read_confluent];
     a plain MsgStream reading them in batches, beside a message a pack
                                                                  [read_batches_confluent]
  6. reference: the raw clients vs Kafka's Java producer (ProducerPerformance) on the
     same broker, to show how much of the ceiling is the Python client; and, when a Go
     toolchain is on PATH, raw librdkafka from Go (benchmarks/librdkafka_go) in
     1,000-record packs (the harness's pipelining) and with nothing awaited, beside raw
     aiokafka: what ">= 3x raw aiokafka" asks of any client
"""

from __future__ import annotations

import argparse
import asyncio
import re
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

from confluent_floor import (
    AiokafkaBeside,
    AioProducer,
    AsyncioFloor,
    EncodingFloor,
    LeastEncodingFloor,
)
from msgstream import (
    DeleteMsg,
    MsgPack,
    MsgStream,
    TimeTickMsg,
    config_from_dict,
    new_client,
    repack_by_first_key,
)
from msgstream.bench.common import delete_channels
from msgstream.configuration.config import Config
from report import (
    BROKER_RECORD,
    Row,
    broker_produce_rows,
    plain_read_rate,
    print_table,
    tests_on_path,
    timed,
    tt_read_rate,
)

ENGINES = ("aiokafka", "confluent")
FLOORS = (AsyncioFloor, EncodingFloor, LeastEncodingFloor, AioProducer, AiokafkaBeside)
"""Measured in the confluent engine's slices (see confluent_floor.py)."""
FLOOR_IDS = ("floor", "floorenc", "floorleast", "aio", "aiokafka")
"""Their ``--json`` ids: ``p50_confluent_floor``, ``pipelined_confluent_aio``..."""
PREBUILT = 4
"""Packs per channel built before the pipelined run and sent in turn."""
TT_CHANNELS = 16
READ_BATCH = 256
"""Messages a pack of ``MsgStream.batches`` in the read figure (its default)."""


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


GO_REFERENCE = Path(__file__).parent / "librdkafka_go"
"""The Go program measuring raw librdkafka (confluent-kafka-go, its own librdkafka)."""


def librdkafka_go_rates(bootstrap: str, total: int, record_size: int) -> dict[int, float]:
    """Raw librdkafka's records/s from Go, by pack size (0: nothing awaited); empty
    without a Go toolchain, or if the program fails (its error is printed)."""
    go = shutil.which("go")
    if go is None:
        print("no Go toolchain on PATH: the librdkafka reference is not run", file=sys.stderr)
        return {}
    rates: dict[int, float] = {}
    for pack in (1000, 0):
        topic = f"bench-go-{time.monotonic_ns()}"
        asyncio.run(_create_topic(bootstrap, topic))
        result = subprocess.run(
            [go, "run", ".", "-b", bootstrap, "-t", topic, "-n", str(total),
             "-s", str(record_size), "-pack", str(pack)],
            cwd=GO_REFERENCE, capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
        found = re.findall(r"([\d.]+) records/s", result.stdout)
        if not found:
            print(f"librdkafka reference failed: {result.stderr.strip()[-500:]}", file=sys.stderr)
            return rates
        rates[pack] = float(found[-1])
    return rates


async def _create_topic(bootstrap: str, topic: str) -> None:
    config = config_from_dict({"mq": {"type": "kafka"}, "kafka": {"brokers": bootstrap}}, env={})
    client = new_client(config)
    await client.create_producer(topic)
    await client.close()


def engine_config(bootstrap: str, engine: str) -> Config:
    return config_from_dict(
        {"mq": {"type": "kafka"}, "kafka": {"brokers": bootstrap, "client": engine}}, env={}
    )


async def fill_channels(config: Config, channels: list[str], per_channel: int) -> int:
    """``per_channel`` Delete messages on each channel, a time tick after every 100."""
    async with MsgStream(new_client(config), repack=repack_by_first_key) as stream:
        await stream.as_producer(channels)
        msg_id = ts = 0
        for _ in range(per_channel // 100):
            msgs: list[object] = []
            for _ in range(100):
                ts += 1
                for c in range(len(channels)):
                    msg_id += 1
                    msgs.append(
                        DeleteMsg(msg_id=msg_id, timestamp=ts, collection_name="c",
                                  primary_keys=[msg_id], hash_keys=[c])
                    )  # fmt: skip
            ts += 1
            msgs.extend(TimeTickMsg(timestamp=ts, hash_keys=[c]) for c in range(len(channels)))
            await stream.produce(MsgPack(msgs=msgs))  # type: ignore[arg-type]
    return msg_id


async def tt_read_rows(bootstrap: str, per_channel: int) -> list[Row]:
    confluent = engine_config(bootstrap, "confluent")
    channels = [f"bench-tt-{time.monotonic_ns()}-{i}" for i in range(TT_CHANNELS)]
    expected = await fill_channels(confluent, channels, per_channel)
    stored = expected + len(channels) * (per_channel // 100)  # the ticks too
    try:
        rates = {
            engine: await tt_read_rate(
                new_client(engine_config(bootstrap, engine)), channels, expected, f"tt-{engine}"
            )
            for engine in ENGINES
        }
        plain = await plain_read_rate(new_client(confluent), channels, stored, "plain")
        batched = await plain_read_rate(
            new_client(confluent), channels, stored, "batches", READ_BATCH
        )
    finally:
        await delete_channels(confluent, channels)
    return [
        Row(f"TtMsgStream read, {TT_CHANNELS} channels, confluent", rates["confluent"],
            rates["aiokafka"], "msgs/s", ">= 200k/s (baseline: on aiokafka)",
            "tt_read_confluent"),
        Row(f"MsgStream read, {TT_CHANNELS} channels, confluent: batches({READ_BATCH}) vs "
            "a message a pack", batched, plain, "msgs/s", "", "read_batches_confluent"),
    ]  # fmt: skip


def start_local_broker(stack: ExitStack) -> str:
    tests_on_path()
    from brokers.kafka import LocalKafka

    workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-kafka-")))
    broker = LocalKafka(workdir / "kafka", short_lived=False)
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
        rows: list[Row] = []
        by_id: dict[str, Row] = {}
        for engine in ENGINES:
            config = engine_config(bootstrap, engine)
            extra = FLOORS if engine == "confluent" else ()
            produced = timed(
                f"produce, {engine}",
                lambda config=config, extra=extra: asyncio.run(
                    broker_produce_rows(config, latency_n, total, prebuilt=PREBUILT, extra=extra)
                ),
            )
            ids = [f"{figure}_{engine}" for figure in ("p50", "p99", "pipelined")]
            if extra:  # p50_confluent_floor, pipelined_confluent_floor, ...
                ids += [f"{f}_{engine}_{name}" for name in FLOOR_IDS for f in ("p50", "pipelined")]
            for row, row_id in zip(produced, ids, strict=True):
                row.id = row_id
                row.figure = f"{row.figure} [{engine}]"
                by_id[row.id] = row
            if engine == "confluent":  # issue 16's goal for the librdkafka engine
                by_id["pipelined_confluent"].goal = ">= 0.8x raw"
            rows.extend(produced)
        # Raw aiokafka from the confluent engine's own slices (alternating with it).
        raw_aiokafka_p50 = by_id["p50_confluent_aiokafka"].ours
        raw_aiokafka = by_id["pipelined_confluent_aiokafka"].ours
        for figure, ours_id, baseline, unit, goal, row_id in (
            ("pipelined: confluent engine vs raw aiokafka", "pipelined_confluent", raw_aiokafka,
             "msgs/s", ">= 3x raw aiokafka", "pipelined_confluent_vs_aiokafka"),
            ("p50: confluent engine vs the asyncio floor", "p50_confluent",
             by_id["p50_confluent_floor"].ours, "us",
             "floor: raw confluent-kafka from asyncio, nothing of msgstream",
             "p50_confluent_vs_floor"),
            ("p50: confluent engine vs the floor + encoding", "p50_confluent",
             by_id["p50_confluent_floorenc"].ours, "us",
             "floor + msgstream's encoders in the measured time", "p50_confluent_vs_floorenc"),
            ("pipelined: the asyncio floor vs raw aiokafka", "pipelined_confluent_floor",
             raw_aiokafka, "msgs/s", "what >= 3x raw aiokafka asks of any asyncio code",
             "pipelined_floor_vs_aiokafka"),
            ("pipelined: the floor + encoding vs raw aiokafka", "pipelined_confluent_floorenc",
             raw_aiokafka, "msgs/s", "what >= 3x raw aiokafka asks once messages are encoded",
             "pipelined_floorenc_vs_aiokafka"),
            ("pipelined: the floor + the least checked encoding vs raw aiokafka",
             "pipelined_confluent_floorleast", raw_aiokafka, "msgs/s",
             "the same, whatever the encoder", "pipelined_floorleast_vs_aiokafka"),
            ("p50: confluent engine vs the floor + the least checked encoding", "p50_confluent",
             by_id["p50_confluent_floorleast"].ours, "us", "the same, whatever the encoder",
             "p50_confluent_vs_floorleast"),
            ("p50: confluent engine vs raw aiokafka", "p50_confluent", raw_aiokafka_p50, "us",
             "< 1x raw aiokafka", "p50_confluent_vs_aiokafka"),
        ):  # fmt: skip
            rows.append(Row(figure, by_id[ours_id].ours, baseline, unit, goal, row_id))
        rows.extend(
            timed("tt read", lambda: asyncio.run(tt_read_rows(bootstrap, int(25_000 * scale))))
        )
        java = java_producer_rate(bootstrap, total * 5, BROKER_RECORD)
        if java is not None:
            for engine in ENGINES:
                raw = by_id[f"pipelined_{engine}"].baseline or 0.0
                rows.append(
                    Row(f"reference: Java producer vs raw {engine}", raw, java, "msgs/s",
                        f"raw {engine} vs Java client, {BROKER_RECORD} B records",
                        f"java_vs_raw_{engine}")
                )  # fmt: skip
        for pack, rate in librdkafka_go_rates(bootstrap, total * 5, BROKER_RECORD).items():
            what = f"{pack:,}-record packs" if pack else "nothing awaited"
            rows.append(
                Row(f"reference: librdkafka (Go), {what}", rate, raw_aiokafka, "msgs/s",
                    "vs raw aiokafka (>= 3x is the confluent engine's goal)",
                    f"librdkafka_go_{'packs' if pack else 'free'}")
            )  # fmt: skip
    import aiokafka
    import confluent_kafka

    print_table(
        rows,
        args.json,
        broker=f"Apache Kafka (local) at {bootstrap}",
        client=(
            f"aiokafka {aiokafka.__version__}, confluent-kafka {confluent_kafka.version()[0]} "
            f"(librdkafka {confluent_kafka.libversion()[0]})"
        ),
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
