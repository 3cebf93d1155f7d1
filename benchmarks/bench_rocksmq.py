"""Embedded-backend figures, each beside its raw rocksdict baseline from the same run.

    python benchmarks/bench_rocksmq.py [--quick] [--json FILE]

Figures (goals from the core issue, then issue 41's):
  1. single-message produce latency p50/p99 vs a raw ``Rdict.put``: ``producer.send``
     (p50 <= 5x), ``MsgStream.produce`` (p50 <= 2.5x), beside two floors of that goal:
     ``encode_one`` + ``Rdict.put`` (the message encoded in the measured time), and
     ``encode_one`` + the store's own write of one message (``RocksStore.append_one``)
  2. batched produce throughput of 100 B messages vs a raw WriteBatch   (>= 0.7x)
  3. TtMsgStream end-to-end msgs/s over 16 channels vs a raw rocksdict scan of the data
     (>= 0.4x), next to the same stream with a header-only decode stub (what the
     pipeline costs without validating and planning payloads) and the floor of any
     time-tick reader of this format (``floor_reader.py``: the channels' scans, each
     message's checksum and one object, packs merged by time), also with the garbage
     collector off
  4. codec encode+decode MB/s, 1,000-row Insert with a 128-dim vector; and encoding
     packs as a producer does (``encode_batch``) against ``encode`` one message at a
     time: 1,000 one-row Inserts, and 100 Inserts of 100 rows; then ``encode_batch`` and
     ``encode_one`` against the least a checked encoder of those one-row Inserts does
     (``floor_encoder.py``)
  5. what Prometheus metrics cost the produce path: MsgStream.produce latency and the
     throughput of 100-message packs with metrics on, beside the same with metrics off
     (the default), interleaved in the same run
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import shutil
import statistics
import struct
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from operator import attrgetter
from pathlib import Path
from typing import Any

import numpy as np
from prometheus_client import CollectorRegistry
from rocksdict import AccessType, Options, Rdict, WriteBatch

import msgstream.streams.reader
from floor_encoder import least_checked_encode, least_checked_encode_one
from floor_reader import tt_floor
from msgstream import (
    DataType,
    DeleteMsg,
    FieldData,
    InsertMsg,
    MsgPack,
    MsgStream,
    TimeTickMsg,
    TsMsg,
    config_from_dict,
    decode,
    encode,
    new_client,
    repack_by_first_key,
)
from msgstream.backends.rocksmq import RocksOptions, RocksStore, open_client
from msgstream.backends.rocksmq.bench_baseline import RawRocksdict
from msgstream.backends.rocksmq.settings import RocksmqConfig
from msgstream.bench.runner import Side
from msgstream.bench.targets import MsgStreamTarget, Target
from msgstream.bench.workload import MessageFactory, Workload
from msgstream.configuration.config import Config
from msgstream.observability.metrics import PrometheusInstruments
from msgstream.wire import envelope
from msgstream.wire.batch_encoder import encode_batch, encode_one
from msgstream.wire.codec import ENVELOPE_SIZE, DecodedBatch
from msgstream.wire.plans import Plan, Where
from report import (
    BROKER_RECORD,
    Row,
    harness_sides,
    latency_us,
    latency_workload,
    pipelined_workload,
    plain_read_rate,
    print_table,
    timed,
    tt_read_rate,
)

PAYLOAD = b"x" * 100
ROUNDS = 5


def raw_db(path: str) -> Rdict:
    return Rdict(path, Options(raw_mode=True))


class ProducerSend(Target):
    """``producer.send`` of the encoded message: the backend's producer without a stream
    (no routing, no encoding on the timed path)."""

    label = "producer.send"

    def __init__(self, config: Config) -> None:
        self.config = config
        self._client: Any = None
        self.producers: list[Any] = []

    async def open(self, channels: Sequence[str]) -> None:
        self._client = new_client(self.config)
        self.producers = [await self._client.create_producer(f"{c}-send") for c in channels]

    def prepare(self, channel: int, msgs: list[TsMsg]) -> Any:
        return encode(msgs[0])

    async def send(self, channel: int, prepared: Any) -> None:
        await self.producers[channel].send(prepared)

    async def close(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.close()


class EncodingPut(RawRocksdict):
    """The raw baseline handed the message instead of its bytes: ``encode_one`` (the
    encoder a produce of one message uses) then ``Rdict.put``, both in the measured
    time. What any produce of this message must at least do, with none of the stream
    and store around them (routing, ids, pages, waking readers, checks)."""

    label = "floor: encode + put"

    def prepare(self, channel: int, msgs: list[TsMsg]) -> Any:
        key, _ = super().prepare(channel, msgs[:1])
        return key, msgs[0]

    async def send(self, channel: int, prepared: Any) -> None:
        assert self.db is not None
        key, msg = prepared
        self.db.put(key, encode_one(msg), self.write_options)


class EncodingAppend(Target):
    """``encode_one`` then the store's own write of one message (``RocksStore.append_one``:
    its lock, the message's id, the page's size) into a store of its own, both in the
    measured time: the floor above without the stream and producer around the store
    (routing, checks, waking readers, the MessageID and the result)."""

    label = "floor: encode + the store's write"

    def __init__(self, config: Config) -> None:
        self.path = Path(config.section(RocksmqConfig).resolved_path())
        self.directory = ""
        self.store: RocksStore | None = None
        self.channels: list[str] = []

    async def open(self, channels: Sequence[str]) -> None:
        # Beside the stream's store, as the raw baseline's RocksDB is: on the same disk.
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.directory = tempfile.mkdtemp(prefix=f"{self.path.name}-append-", dir=self.path.parent)
        self.store = RocksStore(self.directory, RocksOptions())
        self.channels = [f"{channel}-append" for channel in channels]
        for channel in self.channels:
            self.store.ensure_channel(channel)

    def prepare(self, channel: int, msgs: list[TsMsg]) -> Any:
        return msgs[0]

    async def send(self, channel: int, prepared: Any) -> None:
        assert self.store is not None
        self.store.append_one(self.channels[channel], encode_one(prepared))

    async def close(self) -> None:
        if self.store is not None:
            self.store.close()
            self.store = None
        if self.directory:
            shutil.rmtree(self.directory, ignore_errors=True)
        self.channels = []  # nothing on a broker to delete afterwards


class MeteredStream(MsgStreamTarget):
    """``MsgStream.produce`` with Prometheus metrics on (a registry of its own)."""

    label = "msgstream, metrics on"

    async def open(self, channels: Sequence[str]) -> None:
        instruments = PrometheusInstruments(CollectorRegistry())
        self.stream = MsgStream(new_client(self.config), instruments=instruments)
        await self.stream.as_producer([f"{c}-metrics" for c in channels])


def _config(path: str) -> Config:
    return config_from_dict({"mq": {"type": "rocksmq"}, "rocksmq": {"path": path}}, env={})


async def bench_latency(path: str, count: int) -> list[Side]:
    """Single-message latencies, measured by the ``msgstream bench`` harness: raw
    ``Rdict.put`` (its rocksmq baseline), ``MsgStream.produce``, ``producer.send`` of the
    same bytes and ``MsgStream.produce`` with metrics on, in slices whose order alternates."""
    config = _config(path)
    send = Side(ProducerSend(config), ProducerSend.label, "rocksmq")
    metered = Side(MeteredStream(config), MeteredStream.label, "rocksmq")
    floor = Side(EncodingPut(config), EncodingPut.label, "rocksmq")
    store = Side(EncodingAppend(config), EncodingAppend.label, "rocksmq")
    workload = latency_workload(count, BROKER_RECORD)
    return await harness_sides(config, workload, send, metered, floor, store)


async def bench_pack_produce(path: str, total: int) -> list[Side]:
    """``MsgStream.produce`` of 100-message packs, metrics off and on (and raw
    ``WriteBatch``es of the same), measured by the harness."""
    config = _config(path)
    metered = Side(MeteredStream(config), MeteredStream.label, "rocksmq")
    workload = pipelined_workload(total, BROKER_RECORD, 100)
    return await harness_sides(config, workload, metered)


def bench_raw_batch(path: str, total: int, batch: int) -> float:
    db = raw_db(path)
    key = struct.Struct(">cIq").pack
    start = time.perf_counter()
    for first in range(0, total, batch):
        wb = WriteBatch(raw_mode=True)
        for i in range(first, first + batch):
            wb.put(key(b"M", 1, i), PAYLOAD)
        db.write(wb)
    elapsed = time.perf_counter() - start
    db.close()
    return total / elapsed


async def bench_send_many(path: str, total: int, batch: int) -> float:
    client = open_client(path, RocksOptions())
    producer = await client.create_producer("throughput")
    payloads = [PAYLOAD] * batch
    start = time.perf_counter()
    for _ in range(0, total, batch):
        await producer.send_many(payloads)
    elapsed = time.perf_counter() - start
    await client.close()
    return total / elapsed


def delete(msg_id: int, ts: int, channel: int) -> DeleteMsg:
    return DeleteMsg(
        msg_id=msg_id, timestamp=ts, collection_name="c", primary_keys=[msg_id], hash_keys=[channel]
    )


async def fill_channels(path: str, channels: list[str], per_channel: int, per_tick: int) -> int:
    stream = MsgStream(open_client(path, RocksOptions()), repack=repack_by_first_key)
    await stream.as_producer(channels)
    msg_id = 0
    ts = 0
    data = 0
    for _ in range(per_channel // per_tick):
        msgs: list[Any] = []
        for _ in range(per_tick):
            ts += 1
            for c in range(len(channels)):
                msg_id += 1
                msgs.append(delete(msg_id, ts, c))
                data += 1
        ts += 1
        msgs.extend(TimeTickMsg(timestamp=ts, hash_keys=[c]) for c in range(len(channels)))
        await stream.produce(MsgPack(msgs=msgs))
    await stream.close()
    return data


async def bench_tt_consume(path: str, channels: list[str], expected: int, subname: str) -> float:
    return await tt_read_rate(open_client(path, RocksOptions()), channels, expected, subname)


async def bench_plain_consume(
    path: str, channels: list[str], expected: int, subname: str, batch: int | None = None
) -> float:
    client = open_client(path, RocksOptions())
    return await plain_read_rate(client, channels, expected, subname, batch)


class _HeaderOnlyPlan(Plan):
    """Builds a message of the right class from its envelope alone: no body, no check."""

    __slots__ = ("cls",)

    def __init__(self, cls: type[Any]) -> None:
        super().__init__(cls.MSG_TYPE, 0)
        self.cls = cls

    def build(
        self, msg_id: int, timestamp: int, source_id: int, payload: bytes, at: Any, where: Where
    ) -> Any:
        msg: Any = object.__new__(self.cls)
        msg.msg_id, msg.timestamp, msg.source_id, msg.size = msg_id, timestamp, source_id, 0
        msg.lazy_body = (self, payload, at, where)
        return msg


_HEADER_ONLY = {c.MSG_TYPE: _HeaderOnlyPlan(c) for c in (DeleteMsg, TimeTickMsg)}


def header_only_decode_batch(payloads: Sequence[bytes], *_: Any) -> DecodedBatch:
    """A stand-in for ``decode_batch`` that reads envelopes and nothing else (no checksum,
    no body, no plan): the ceiling of the stream's pipeline when validation is free."""
    env = np.frombuffer(b"".join(p[:ENVELOPE_SIZE] for p in payloads), envelope.DTYPE)
    plans: list[Plan] = [_HEADER_ONLY[code] for code in env["msg_type"].tolist()]
    return DecodedBatch(
        plans,
        env["end_ts"].tolist(),
        bytearray(map(attrgetter("kind"), plans)),
        env["msg_id"].tolist(),
        env["timestamp"].tolist(),
        env["source_id"].tolist(),
    )


@contextlib.contextmanager
def header_only_decoding() -> Iterator[None]:
    """Readers decode with :func:`header_only_decode_batch` meanwhile."""
    real = getattr(msgstream.streams.reader, "decode_batch")  # noqa: B009 (not exported)
    setattr(msgstream.streams.reader, "decode_batch", header_only_decode_batch)  # noqa: B010
    try:
        yield
    finally:
        setattr(msgstream.streams.reader, "decode_batch", real)  # noqa: B010


def bench_raw_scan(path: str, expected: int) -> float:
    """Baseline of the end-to-end figure: rocksdict iterating every stored message."""
    db = Rdict(path, Options(raw_mode=True), access_type=AccessType.read_only())
    start = time.perf_counter()
    seen = sum(1 for key, _ in db.items(from_key=b"M") if key[:1] == b"M")
    elapsed = time.perf_counter() - start
    db.close()
    return seen / elapsed if seen >= expected else 0.0


async def bench_tt_rounds(
    path: str, channels: list[str], expected: int, stored: int, per_tick: int, rounds: int
) -> dict[str, list[float]]:
    """The stream, the stream with a header-only stub, the raw scan, the floor
    (``floor_reader.py``) with the garbage collector on and off, and a plain
    ``MsgStream``, a message a pack and in batches (it reads all ``stored`` messages,
    ticks too), in alternating rounds (each round reads everything from EARLIEST under a
    new subscription). A client held open keeps the store open between rounds."""
    keeper = open_client(path, RocksOptions())
    full: list[float] = []
    stub: list[float] = []
    scan: list[float] = []
    floor: list[float] = []
    floor_off: list[float] = []
    plain: list[float] = []
    batches: list[float] = []
    try:
        for r in range(rounds):
            gc.collect()
            plain.append(await bench_plain_consume(path, channels, stored, f"plain-{r}"))
            gc.collect()
            batches.append(await bench_plain_consume(path, channels, stored, f"batch-{r}", BATCH))
            gc.collect()
            full.append(await bench_tt_consume(path, channels, expected, f"full-{r}"))
            gc.collect()
            with header_only_decoding():
                stub.append(await bench_tt_consume(path, channels, expected, f"stub-{r}"))
            gc.collect()
            scan.append(bench_raw_scan(path, expected))
            gc.collect()
            floor.append(tt_floor(path, per_tick, expected))
            gc.collect()
            floor_off.append(tt_floor(path, per_tick, expected, collector=False))
    finally:
        await keeper.close()
    return {
        "stream": full, "header-only stub": stub, "raw scan": scan, "floor": floor,
        "floor, collector off": floor_off, "plain MsgStream": plain,
        f"MsgStream.batches({BATCH})": batches,
    }  # fmt: skip


BATCH = 256
"""Messages a pack of ``MsgStream.batches`` in the read figures (its default)."""


def bench_codec(rounds: int) -> float:
    rows = 1000
    msg = InsertMsg(
        msg_id=1,
        timestamp=1,
        collection_name="c",
        row_ids=np.arange(rows),
        fields=[
            FieldData("pk", DataType.INT64, np.arange(rows)),
            FieldData("vec", DataType.FLOAT_VECTOR, np.random.rand(rows, 128), dim=128),
        ],
    )
    payload = encode(msg)
    start = time.perf_counter()
    for _ in range(rounds):
        decode(encode(msg))
    elapsed = time.perf_counter() - start
    return len(payload) * rounds / 1e6 / elapsed


def bench_pack_encode(
    packs: list[list[TsMsg]], rounds: int, sides: tuple[Any, Any] | None = None
) -> tuple[float, float]:
    """Encoding ``packs`` in turn by two ``sides`` (each given a pack): by default
    ``encode_batch`` (the producer's path) against ``encode`` one message at a time, the
    side that goes first alternating by round; the medians in msgs/s."""
    first, second = sides or (encode_batch, _encode_each)
    rates: dict[object, list[float]] = {first: [], second: []}
    for round_ in range(rounds):
        pack = packs[round_ % len(packs)]
        for side in (first, second) if round_ % 2 else (second, first):
            start = time.perf_counter()
            side(pack)
            rates[side].append(len(pack) / (time.perf_counter() - start))
    return statistics.median(rates[first]), statistics.median(rates[second])


def _encode_ones(pack: list[TsMsg]) -> None:
    for msg in pack:
        encode_one(msg)


def _least_ones(pack: list[TsMsg]) -> None:
    for msg in pack:
        least_checked_encode_one(msg)


FLOOR_ENCODERS = {
    "encode 1,000 one-row Inserts: encode_batch vs the least checked encoder":
        (encode_batch, least_checked_encode),
    "encode one-row Inserts one at a time: encode_one vs the least checked encoder":
        (_encode_ones, _least_ones),
}  # fmt: skip
"""The encoders against the least any checked encoder of these messages does
(``floor_encoder.py``), each on the harness's packs of one-row Inserts."""


def _encode_each(pack: list[TsMsg]) -> list[bytes]:
    return [encode(msg) for msg in pack]


def encode_packs() -> dict[str, list[list[TsMsg]]]:
    """What :func:`bench_pack_encode` measures: packs of the harness's one-row Inserts
    (the fast path), and of 100-row Inserts with a 32-dim vector (none: the pass that
    finds one-row Inserts must cost them nothing)."""
    factory = MessageFactory(Workload(size=BROKER_RECORD))
    rows = 100
    wide: list[TsMsg] = [
        InsertMsg(
            msg_id=i,
            timestamp=i + 1,
            collection_name="c",
            row_ids=np.arange(rows),
            fields=[
                FieldData("pk", DataType.INT64, np.arange(rows)),
                FieldData("vec", DataType.FLOAT_VECTOR, np.ones((rows, 32), np.float32), dim=32),
            ],
        )
        for i in range(100)
    ]
    return {
        "encode 1,000 one-row Inserts: pack vs each": [factory.pack(0, 1000) for _ in range(4)],
        "encode 100 100-row Inserts: pack vs each": [wide],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else "")
    parser.add_argument("--quick", action="store_true", help="fewer iterations")
    parser.add_argument("--json", help="also write the figures to this JSON file")
    args = parser.parse_args()
    scale = 0.1 if args.quick else 1.0
    latency_n = int(20000 * scale)
    batch_total = int(300_000 * scale)
    per_channel = int(20000 * scale)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="msgstream-bench-") as tmp:
        raw_latency, produce, send, produce_metered, floor, store = timed(
            "latency", lambda: asyncio.run(bench_latency(f"{tmp}/mq-latency", latency_n))
        )
        for name, side in (("producer.send", send), ("MsgStream.produce", produce)):
            for q in (50, 99):
                goals = {"producer.send": "<= 5x raw", "MsgStream.produce": "<= 2.5x raw"}
                goal = goals[name] if q == 50 else ""
                rows.append(
                    Row(
                        f"{name} latency p{q}, {BROKER_RECORD} B",
                        latency_us(side, q),
                        latency_us(raw_latency, q),
                        "us",
                        goal,
                    )
                )
        rows.append(
            Row("  floor: encode + put, latency p50", latency_us(floor, 50),
                latency_us(raw_latency, 50), "us", "")
        )  # fmt: skip
        rows.append(
            Row("  floor: encode + the store's write, p50", latency_us(store, 50),
                latency_us(raw_latency, 50), "us", "")
        )  # fmt: skip
        rows.append(
            Row("  MsgStream.produce vs encode + put, p50", latency_us(produce, 50),
                latency_us(floor, 50), "us", "")
        )  # fmt: skip
        for q in (50, 99):
            rows.append(
                Row(
                    f"produce latency p{q}, metrics on/off",
                    latency_us(produce_metered, q),
                    latency_us(produce, q),
                    "us",
                    "",
                )
            )
        # Alternate rounds so background flushes and machine noise hit both sides alike.
        raw_rounds, our_rounds = [], []
        for r in range(ROUNDS):
            raw_rounds.append(bench_raw_batch(f"{tmp}/raw2-{r}", batch_total, 1000))
            our_rounds.append(asyncio.run(bench_send_many(f"{tmp}/mq2-{r}", batch_total, 1000)))
        raw_tput, ours_tput = statistics.median(raw_rounds), statistics.median(our_rounds)
        rows.append(
            Row("batched produce, 100 B msgs", ours_tput, raw_tput, "msgs/s", ">= 0.7x raw")
        )
        _, packs_off, packs_on = timed(
            "packs, metrics on/off",
            lambda: asyncio.run(bench_pack_produce(f"{tmp}/mq-packs", batch_total // 3)),
        )
        rows.append(
            Row(
                "produce 100-msg packs, metrics on/off",
                packs_on.msgs_per_s,
                packs_off.msgs_per_s,
                "msgs/s",
                "",
            )
        )
        channels = [f"tt-{i}" for i in range(16)]
        per_tick = 100
        data = timed(
            "fill 16 channels",
            lambda: asyncio.run(fill_channels(f"{tmp}/mq3", channels, per_channel, per_tick)),
        )
        stored = data + len(channels) * (per_channel // per_tick)  # the ticks too
        rounds = timed(
            f"tt consume, {ROUNDS} rounds",
            lambda: asyncio.run(
                bench_tt_rounds(f"{tmp}/mq3", channels, data, stored, per_tick, ROUNDS)
            ),
        )
        for label, figures in rounds.items():
            spread = ", ".join(f"{f / 1000:.0f}k" for f in figures)
            print(f"    {label} rounds (msgs/s): {spread}", file=sys.stderr)
        median = {label: statistics.median(figures) for label, figures in rounds.items()}
        tt, raw, floor = median["stream"], median["raw scan"], median["floor"]
        rows.append(Row("TtMsgStream end-to-end, 16 channels", tt, raw, "msgs/s", ">= 0.4x raw"))
        rows.append(
            Row("  same, header-only decode stub (ceiling)", median["header-only stub"], raw,
                "msgs/s", "")
        )  # fmt: skip
        rows.append(Row("  floor: the least time-tick reader", floor, raw,
                        "msgs/s", ""))  # fmt: skip
        rows.append(
            Row("  same floor, garbage collector off", median["floor, collector off"], raw,
                "msgs/s", "")
        )  # fmt: skip
        rows.append(Row("  TtMsgStream vs that floor", tt, floor, "msgs/s", ""))
        rows.append(
            Row("MsgStream end-to-end, 16 channels", median["plain MsgStream"], raw, "msgs/s", "")
        )
        rows.append(
            Row(f"  same, MsgStream.batches({BATCH})", median[f"MsgStream.batches({BATCH})"],
                raw, "msgs/s", "")
        )  # fmt: skip
        codec = timed("codec", lambda: bench_codec(max(20, int(500 * scale))))
        rows.append(Row("codec encode+decode, 1000x128 f32 Insert", codec, None, "MB/s", ""))
        for label, packs in encode_packs().items():
            batched, single = timed(
                label, lambda packs=packs: bench_pack_encode(packs, max(20, int(200 * scale)))
            )
            rows.append(Row(label, batched, single, "msgs/s", ""))
        floor_packs = encode_packs()["encode 1,000 one-row Inserts: pack vs each"]
        floor_rounds = max(20, int(200 * scale))
        for label, sides in FLOOR_ENCODERS.items():
            ours, least = timed(
                label, lambda sides=sides: bench_pack_encode(floor_packs, floor_rounds, sides)
            )
            rows.append(Row(label, ours, least, "msgs/s", ""))

    print_table(rows, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
