"""Figures of one rocksmq store shared by several processes, each beside its baseline
from the same run (sides alternate slice by slice).

    python benchmarks/bench_shared.py [--quick] [--json FILE] [--uvloop]
                                      [--kafka [HOST:PORT] | --kafka-p50 US]

This process owns store A (the in-process side) and is attached to store B, which an
idle process owns (the attached side: a service owns the store, this process uses it),
so both sides run the same code in the same event loop. Other processes are
``shared_child.py``. Figures (goals from issue 39):
  1. the floor: an asyncio round trip of 320 bytes over a Unix socket to an echo server
     in another process, p50/p99 (in the latency slices); and the stored floor: the
     same round trip to a uvloop server that stores each request in RocksDB as the
     owner stores a send, with none of the owner's frames, checks or bookkeeping; and
     the protocol floor: this protocol's APPEND and REPLY frames, checked on both sides
     and stored with the store's own idempotent ``append_once``, with the least code on
     either side (no dispatch, deadlines, reconnection or readers to wake): what any
     client and owner speaking it must at least do
  2. produce latency, ``producer.send`` of 320 B, attached beside in-process, p50/p99
     (p50 <= 100 us, p99 <= 1 ms); the attached p50 against the floor, and against
     Kafka's: ``--kafka`` measures a Kafka ``producer.send`` (msgstream's
     ``--kafka-engine``, aiokafka by default; acks=all) as one more side of the same
     slices, against the tests' local broker or the one named, after a warm-up
     (``--kafka-p50`` takes a figure measured elsewhere);
     <= 0.2x; ``MsgStream.produce`` the same way
  3. hand-off latency, send to delivery, from a producer process to a consumer process
     (this one), a third process owning the store, p50/p99 (p50 <= 250 us, p99 <= 2 ms);
     and with the consumer owning the store (the two-terminal case); each against its
     floor: the same three processes passing stamped records through an asyncio relay
     at the same pace (a message every millisecond finds each process asleep: the
     back-to-back round trip of 1. never does)
  4. pipelined ``send_many`` of 1,000 x 100 B, attached vs in-process (>= 0.5x)
  5. TtMsgStream reading 16 channels, attached vs in-process (>= 0.8x)
  6. hand-over: the owner SIGKILLed while two other processes send, time to the first
     send acknowledged after the kill, several times (< 2 s)
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import queue
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from msgstream import (
    DeleteMsg,
    MsgPack,
    MsgStream,
    SubscriptionPosition,
    TimeTickMsg,
    new_client,
    repack_by_first_key,
)
from msgstream.backends.rocksmq import open_client
from msgstream.backends.rocksmq.frames import Op, check_reply, encode
from msgstream.backends.rocksmq.ownership import read_owner
from report import Row, print_table, timed, tt_read_rate
from shared_child import FloorFrames

CHILD = str(Path(__file__).resolve().parent / "shared_child.py")
TT_CHANNELS = [f"tt-{i}" for i in range(16)]
PAYLOAD = b"x" * 320
SMALL = b"x" * 100
ON_UVLOOP = False
"""``--uvloop``: this process and the children it starts run on uvloop (an application's
choice; a store's owner serves other processes on uvloop either way)."""
HANDOFF_GAP_US = 1000
"""The pause between a hand-off's sends: each message finds every process idle."""


class Proc:
    """A ``shared_child.py`` process answering one JSON line per command."""

    def __init__(self, *args: str, lines: queue.Queue[tuple[Proc, str]] | None = None) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, CHILD, *(["--uvloop"] if ON_UVLOOP else []), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        self._own: queue.Queue[str] = queue.Queue()
        self._shared = lines
        """Where every line after the first also goes (several processes' lines)."""
        threading.Thread(target=self._pump, daemon=True).start()
        self.ready = self.read()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for number, line in enumerate(self.proc.stdout):
            if self._shared is not None and number:
                self._shared.put((self, line.rstrip("\n")))
            else:
                self._own.put(line.rstrip("\n"))

    def read(self, timeout: float = 120.0) -> Any:
        return orjson.loads(self._own.get(timeout=timeout))

    def ask(self, *command: object) -> Any:
        assert self.proc.stdin is not None
        self.proc.stdin.write(" ".join(map(str, command)) + "\n")
        self.proc.stdin.flush()
        return self.read(600.0)

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(60)

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.kill()


def percentile(samples: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(samples), q))


# --- 1. the floor -----------------------------------------------------------------------------
class _Client(asyncio.Protocol):
    def __init__(self, answer_bytes: int) -> None:
        self.waiter: asyncio.Future[None] | None = None
        self.got = 0
        self.answer_bytes = answer_bytes

    def data_received(self, data: bytes) -> None:
        self.got += len(data)
        if self.waiter is not None and self.got >= self.answer_bytes:
            self.waiter.set_result(None)


class Floor:
    """Round trips of 320 bytes to an echo server in another process; ``stored``: to a
    uvloop server that stores each in RocksDB as the owner stores a send (message and
    producer record in one WriteBatch) and answers 8 bytes -- the owner's job with none
    of its frames, checks or bookkeeping."""

    def __init__(self, tmp: str, stored: bool = False) -> None:
        if stored:
            directory = os.path.join(tmp, "store-echo")
            self.address = os.path.join(directory, "store.sock")
            self.server = Proc("store-echo", directory)
        else:
            self.address = os.path.join(tmp, "echo.sock")
            self.server = Proc("echo", self.address)
        self.answer_bytes = 8 if stored else len(PAYLOAD)

    async def open(self) -> None:
        loop = asyncio.get_running_loop()
        self.transport, self.client = await loop.create_unix_connection(
            lambda: _Client(self.answer_bytes), self.address
        )

    async def measure(self, count: int) -> list[float]:
        loop = asyncio.get_running_loop()
        client, clock = self.client, time.perf_counter_ns
        samples = []
        for _ in range(count):
            client.got = 0
            client.waiter = loop.create_future()
            start = clock()
            self.transport.write(PAYLOAD)
            await client.waiter
            samples.append((clock() - start) / 1000)
        return samples

    def close(self) -> None:
        self.transport.close()
        self.server.close()


class _FrameClient(FloorFrames):
    """The client's half of the protocol floor: REPLY frames checked against the APPEND
    layout, each resolving the future of its request number."""

    def __init__(self) -> None:
        super().__init__()
        self.waiting: dict[int, asyncio.Future[int]] = {}

    def frame(self, op: int, request: int, control: Any, blob: bytes) -> None:
        if op != Op.REPLY or blob:
            raise ValueError(f"the protocol floor's owner answered op {op}")
        check_reply(Op.APPEND, control, [])
        self.waiting.pop(request).set_result(control[0])


class ProtocolFloor:
    """Sends of 320 bytes to ``shared_child.py protocol-floor``: this protocol's APPEND
    frames, stored idempotently in a RocksStore, with the least code on either side --
    what any client and owner speaking it must at least do."""

    def __init__(self, tmp: str) -> None:
        directory = os.path.join(tmp, "protocol-floor")
        self.address = os.path.join(directory, "store.sock")
        self.server = Proc("protocol-floor", directory)
        self.number = 0
        self.producer = int.from_bytes(os.urandom(7), "big")

    async def open(self) -> None:
        loop = asyncio.get_running_loop()
        self.transport, self.client = await loop.create_unix_connection(_FrameClient, self.address)

    async def measure(self, count: int) -> list[float]:
        loop = asyncio.get_running_loop()
        waiting, clock = self.client.waiting, time.perf_counter_ns
        samples = []
        for _ in range(count):
            start = clock()
            self.number = number = self.number + 1
            frame = encode(Op.APPEND, number, ["floor", self.producer, number, False, None],
                           (PAYLOAD,))  # fmt: skip
            waiting[number] = future = loop.create_future()
            self.transport.write(frame)
            await future
            samples.append((clock() - start) / 1000)
        return samples

    def close(self) -> None:
        self.transport.close()
        self.server.close()


# --- 2. produce latency -------------------------------------------------------------------------
async def send_latency(client: Any, count: int, channel: str) -> list[float]:
    producer = await client.create_producer(channel)
    clock = time.perf_counter_ns
    samples = []
    for _ in range(count):
        start = clock()
        await producer.send(PAYLOAD)
        samples.append((clock() - start) / 1000)
    return samples


async def produce_latency(client: Any, count: int, channel: str) -> list[float]:
    stream = MsgStream(client, repack=repack_by_first_key)
    await stream.as_producer([channel])
    clock = time.perf_counter_ns
    samples = []
    for n in range(count):
        msg = DeleteMsg(msg_id=n + 1, timestamp=n + 1, collection_name="c",
                        primary_keys=[n], hash_keys=[0])  # fmt: skip
        pack = MsgPack(msgs=[msg])
        start = clock()
        await stream.produce(pack)
        samples.append((clock() - start) / 1000)
    return samples


Sides = dict[str, list[float]]


async def warm_up(client: Any, seconds: float = 20.0) -> None:
    """Send to a fresh broker for ``seconds`` before measuring it: a JVM broker answers
    from interpreted and C1 code at first, and its produce path is several times slower
    until the JIT has compiled it."""
    producer = await client.create_producer(f"bench-shared-warm-{time.time_ns()}")
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        await producer.send_many([PAYLOAD] * 500)
        for _ in range(50):
            await producer.send(PAYLOAD)


async def latency_sides(
    local: Any,
    attached: Any,
    floor: Floor | None,
    rounds: int,
    count: int,
    what: str,
    kafka: Any = None,
    stored_floor: Floor | None = None,
    protocol_floor: ProtocolFloor | None = None,
) -> Sides:
    """Samples of each side (in-process, attached, the floor, a Kafka client when given),
    in slices whose order rotates every round; each slice's first tenth is a warm-up,
    dropped."""
    measure = send_latency if what == "send" else produce_latency
    runs = {
        "in": lambda r: measure(local, count, f"{what}-{r}"),
        "attached": lambda r: measure(attached, count, f"{what}-{r}"),
    }
    if floor is not None:
        runs["floor"] = lambda r: floor.measure(count)
    if stored_floor is not None:
        runs["stored floor"] = lambda r: stored_floor.measure(count)
    if protocol_floor is not None:
        runs["protocol floor"] = lambda r: protocol_floor.measure(count)
    if kafka is not None:
        channel = f"bench-shared-{time.time_ns()}"  # one topic: created once, then warm
        runs["kafka"] = lambda r: measure(kafka, count, channel)
    sides: Sides = {name: [] for name in runs}
    names = list(runs)
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            gc.collect()
            samples = await runs[name](r)
            sides[name] += samples[count // 10 :]
    return sides


class _Records(asyncio.Protocol):
    """Send-to-arrival times of the relay's 320-byte records, each stamped by its sender."""

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.samples: list[float] = []
        self.want = 0
        self.done: asyncio.Future[None] | None = None

    def data_received(self, data: bytes) -> None:
        now = time.perf_counter_ns()
        self.buffer += data
        size = len(PAYLOAD)
        while len(self.buffer) >= size:
            self.samples.append((now - int.from_bytes(self.buffer[:8], "little")) / 1000)
            del self.buffer[:size]
        if self.done is not None and not self.done.done() and len(self.samples) >= self.want:
            self.done.set_result(None)


class PacedFloor:
    """The hand-off's floor: a pacer process writes stamped records, GAP apart, to a relay
    process, which passes them on to this one (three processes, no store, no reply)."""

    def __init__(self, tmp: str) -> None:
        self.address = os.path.join(tmp, "relay.sock")
        self.relay = Proc("relay", self.address)
        self.pacer = Proc("pacer", self.address)

    async def open(self) -> None:
        loop = asyncio.get_running_loop()
        self.transport, self.records = await loop.create_unix_connection(_Records, self.address)
        self.transport.write(b"R")

    async def measure(self, count: int, gap_us: int) -> list[float]:
        records = self.records
        records.samples, records.want = [], count
        records.done = asyncio.get_running_loop().create_future()
        gc.collect()
        await asyncio.to_thread(self.pacer.ask, "send", count, gap_us)
        await records.done
        return records.samples[count // 10 :]

    def close(self) -> None:
        self.transport.close()
        self.pacer.close()
        self.relay.close()


# --- 3. hand-off --------------------------------------------------------------------------------
async def handoff(client: Any, sender: Proc, count: int) -> list[float]:
    """Send-to-delivery times of ``sender``'s messages, received here through ``client``."""
    channel = f"handoff-{time.time_ns()}"
    consumer = await client.subscribe(channel, "handoff", SubscriptionPosition.LATEST)
    gc.collect()
    sending = asyncio.ensure_future(
        asyncio.to_thread(sender.ask, "send", count, HANDOFF_GAP_US, channel)
    )
    clock = time.perf_counter_ns
    samples = []
    for _ in range(count):
        msg = await consumer.receive()
        samples.append((clock() - int.from_bytes(msg.payload, "little")) / 1000)
    await sending
    await consumer.close()
    return samples[count // 10 :]


# --- 4. pipelined -------------------------------------------------------------------------------
async def pipelined(client: Any, total: int, channel: str) -> float:
    producer = await client.create_producer(channel)
    payloads = [SMALL] * 1000
    start = time.perf_counter()
    for _ in range(0, total, 1000):
        await producer.send_many(payloads)
    return total / (time.perf_counter() - start)


async def alternating(rounds: int, sides: dict[str, Any]) -> dict[str, list[float]]:
    """``sides[name](round)`` for every side, each round, the order flipping by round."""
    names = list(sides)
    results: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        for name in names if r % 2 else names[::-1]:
            gc.collect()
            results[name].append(await sides[name](r))
    return results


# --- 5. TtMsgStream -------------------------------------------------------------------------------
async def fill_tt(client: Any, per_channel: int, per_tick: int = 100) -> int:
    stream = MsgStream(client, repack=repack_by_first_key)
    await stream.as_producer(TT_CHANNELS)
    msg_id = ts = data = 0
    for _ in range(per_channel // per_tick):
        msgs: list[Any] = []
        for _ in range(per_tick):
            ts += 1
            for c in range(len(TT_CHANNELS)):
                msg_id += 1
                msgs.append(DeleteMsg(msg_id=msg_id, timestamp=ts, collection_name="c",
                                      primary_keys=[msg_id], hash_keys=[c]))  # fmt: skip
                data += 1
        ts += 1
        msgs.extend(TimeTickMsg(timestamp=ts, hash_keys=[c]) for c in range(len(TT_CHANNELS)))
        await stream.produce(MsgPack(msgs=msgs))
    return data


# --- 6. hand-over ---------------------------------------------------------------------------------
def handovers(tmp: str, times: int) -> list[float]:
    """Seconds from SIGKILLing the owner to the acknowledgement of the first send made
    after it died (which only a new owner can give)."""
    path = os.path.join(tmp, "handover")
    lines: queue.Queue[tuple[Proc, str]] = queue.Queue()
    procs = {"owner": Proc("own", path, lines=lines)}
    procs["a"] = Proc("acks", path, lines=lines)
    procs["b"] = Proc("acks", path, lines=lines)
    measured = []
    try:
        for _ in range(times):
            info = read_owner(path)
            assert info is not None
            (name,) = [n for n, p in procs.items() if p.proc.pid == info.pid]
            victim = procs[name]
            for _ in range(20):  # the survivors are sending
                lines.get(timeout=120)
            killed_at = time.perf_counter_ns()
            victim.kill()
            dead_at = time.perf_counter_ns()  # a send started after this has a new owner
            while True:
                proc, line = lines.get(timeout=120)
                reply = orjson.loads(line)
                if proc is not victim and reply.startswith("ACK "):
                    sent_at, acked_at = map(int, reply.split()[1:])
                    if sent_at > dead_at:
                        measured.append((acked_at - killed_at) / 1e9)
                        break
            if name == "owner":
                del procs[name]  # the senders own the store from now on
            else:
                procs[name] = Proc("acks", path, lines=lines)
    finally:
        for proc in procs.values():
            proc.kill()
    return measured


async def run(
    tmp: str, scale: float, kafka_p50: float | None, kafka: str | None, engine: str
) -> list[Row]:
    rows: list[Row] = []
    here, there = os.path.join(tmp, "here"), os.path.join(tmp, "there")
    floor = Floor(tmp)
    stored_floor = Floor(tmp, stored=True)
    protocol = ProtocolFloor(tmp)
    paced_floor = PacedFloor(tmp)
    owner = Proc("own", there)
    local, attached = open_client(here), open_client(there)
    assert (type(local).__name__, type(attached).__name__) == ("LogClient", "RemoteClient")
    sender = Proc("attached", there)
    local_sender = Proc("attached", here)
    try:
        await floor.open()
        await stored_floor.open()
        await protocol.open()
        await paced_floor.open()
        count, rounds = int(2000 * scale) or 200, 6
        kafka_client = None
        if kafka is not None:
            from bench_kafka import engine_config  # Kafka's extras only when asked for

            kafka_client = new_client(engine_config(kafka, engine))
            await warm_up(kafka_client)
        sides = await latency_sides(
            local, attached, floor, rounds, count, "send", kafka_client, stored_floor, protocol
        )
        if kafka_client is not None:
            await kafka_client.close()
            kafka_p50 = percentile(sides["kafka"], 50)
            rows.append(Row(f"Kafka producer.send p50 ({engine}, acks=all), same run",
                            kafka_p50, None, "us", ""))  # fmt: skip
        floor50, floor99 = percentile(sides["floor"], 50), percentile(sides["floor"], 99)
        rows.append(Row("floor: asyncio UDS round trip p50", floor50, None, "us", ""))
        rows.append(Row("floor: asyncio UDS round trip p99", floor99, None, "us", ""))
        stored50 = percentile(sides["stored floor"], 50)
        rows.append(Row("floor: round trip + the owner's RocksDB write p50", stored50, None,
                        "us", ""))  # fmt: skip
        protocol50 = percentile(sides["protocol floor"], 50)
        rows.append(Row("floor: the protocol's send with the least code p50", protocol50,
                        None, "us", ""))  # fmt: skip
        for q, goal in ((50, "<= 100 us"), (99, "<= 1 ms")):
            rows.append(Row(f"attached producer.send p{q} vs in-process",
                            percentile(sides["attached"], q), percentile(sides["in"], q), "us",
                            goal))  # fmt: skip
        attached50 = percentile(sides["attached"], 50)
        rows.append(Row("attached producer.send p50 vs the floor", attached50, floor50, "us", ""))
        rows.append(Row("attached producer.send p50 vs the stored floor", attached50, stored50,
                        "us", ""))  # fmt: skip
        rows.append(Row("attached producer.send p50 vs the protocol floor", attached50,
                        protocol50, "us", ""))  # fmt: skip
        if kafka_p50 is not None:
            rows.append(Row("attached producer.send p50 vs Kafka p50", attached50, kafka_p50,
                            "us", "<= 0.2x Kafka"))  # fmt: skip
            rows.append(Row("the floor p50 vs Kafka p50", floor50, kafka_p50, "us", ""))
            rows.append(Row("the stored floor p50 vs Kafka p50", stored50, kafka_p50, "us", ""))
            rows.append(Row("the protocol floor p50 vs Kafka p50", protocol50, kafka_p50, "us",
                            ""))  # fmt: skip
        sides = await latency_sides(local, attached, None, rounds, count, "produce")
        rows.append(Row("attached MsgStream.produce p50 vs in-process",
                        percentile(sides["attached"], 50), percentile(sides["in"], 50), "us",
                        ""))  # fmt: skip

        handoffs = int(3000 * scale) or 300
        paced = await paced_floor.measure(handoffs, HANDOFF_GAP_US)
        paced50, paced99 = percentile(paced, 50), percentile(paced, 99)
        rows.append(Row("floor: paced relay, 3 processes, p50", paced50, None, "us", ""))
        rows.append(Row("floor: paced relay, 3 processes, p99", paced99, None, "us", ""))
        samples = await handoff(attached, sender, handoffs)
        for q, goal in ((50, "<= 250 us"), (99, "<= 2 ms")):
            rows.append(Row(f"hand-off p{q}, producer -> consumer process vs paced floor",
                            percentile(samples, q), paced50 if q == 50 else paced99, "us",
                            goal))  # fmt: skip
        samples = await handoff(local, local_sender, handoffs)
        for q in (50, 99):
            rows.append(Row(f"hand-off p{q}, to a consumer owning the store vs paced floor",
                            percentile(samples, q), paced50 if q == 50 else paced99, "us",
                            ""))  # fmt: skip

        total = int(200_000 * scale)
        rates = await alternating(rounds, {
            "in": lambda r: pipelined(local, total, f"pipelined-{r}"),
            "attached": lambda r: pipelined(attached, total, f"pipelined-{r}"),
        })  # fmt: skip
        rows.append(Row("pipelined send_many 1000x100 B, attached vs in",
                        statistics.median(rates["attached"]), statistics.median(rates["in"]),
                        "msgs/s", ">= 0.5x"))  # fmt: skip

        per_channel = int(20_000 * scale)
        expected = await fill_tt(open_client(here), per_channel)  # the stream closes its client
        assert await fill_tt(open_client(there), per_channel) == expected
        rates = await alternating(rounds, {  # a new client each read: the stream closes it
            "in": lambda r: tt_read_rate(open_client(here), TT_CHANNELS, expected, f"tt-{r}"),
            "attached": lambda r: tt_read_rate(
                open_client(there), TT_CHANNELS, expected, f"tt-{r}"
            ),
        })  # fmt: skip
        for label, figures in rates.items():
            spread = ", ".join(f"{f / 1000:.0f}k" for f in figures)
            print(f"    tt read rounds, {label} (msgs/s): {spread}", file=sys.stderr)
        rows.append(Row("TtMsgStream 16 ch read, attached vs in",
                        statistics.median(rates["attached"]), statistics.median(rates["in"]),
                        "msgs/s", ">= 0.8x"))  # fmt: skip
    finally:
        sender.close()
        local_sender.close()
        floor.close()
        stored_floor.close()
        protocol.close()
        paced_floor.close()
        await attached.close()
        await local.close()
        owner.close()
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else "")
    parser.add_argument("--quick", action="store_true", help="fewer iterations")
    parser.add_argument("--json", help="also write the figures to this JSON file")
    parser.add_argument("--kafka-p50", type=float, help="Kafka's produce p50 in µs")
    parser.add_argument(
        "--kafka",
        nargs="?",
        const="local",
        metavar="HOST:PORT",
        help="also measure a Kafka producer.send beside the others (no address: start the "
        "tests' local broker)",
    )
    parser.add_argument(
        "--kafka-engine",
        choices=("aiokafka", "confluent"),
        default="aiokafka",
        help="the Kafka engine --kafka measures (kafka.client)",
    )
    parser.add_argument(
        "--uvloop", action="store_true", help="run this process and its children on uvloop"
    )
    args = parser.parse_args()
    global ON_UVLOOP
    ON_UVLOOP = args.uvloop
    scale = 0.2 if args.quick else 1.0
    with tempfile.TemporaryDirectory(prefix="msgstream-bench-shared-") as tmp:
        runner = asyncio.run
        if ON_UVLOOP:
            import uvloop

            runner = uvloop.run
        with ExitStack() as stack:
            kafka = args.kafka
            if kafka == "local":
                from bench_kafka import start_local_broker

                kafka = start_local_broker(stack)
            rows = timed(
                "shared store",
                lambda: runner(run(tmp, scale, args.kafka_p50, kafka, args.kafka_engine)),
            )
        seconds = timed("hand-over", lambda: handovers(tmp, 5 if args.quick else 10))
        print(f"    hand-overs (ms): {', '.join(f'{s * 1000:.0f}' for s in seconds)}",
              file=sys.stderr)  # fmt: skip
        rows.append(Row("hand-over p50 (owner SIGKILLed)", statistics.median(seconds) * 1000,
                        None, "ms", "< 2000 ms"))  # fmt: skip
        rows.append(Row("hand-over max", max(seconds) * 1000, None, "ms", "< 2000 ms"))
    print_table(rows, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
