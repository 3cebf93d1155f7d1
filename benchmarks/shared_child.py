"""The other processes of ``bench_shared.py``: each answers commands read from stdin.

    python shared_child.py attached PATH     # a process attached to the store at PATH
    python shared_child.py own PATH          # a process that owns PATH and idles
    python shared_child.py echo ADDRESS      # an asyncio echo server on a Unix socket
    python shared_child.py acks PATH         # sends forever, one every millisecond,
                                             # printing each one's acknowledgement time

``attached`` prints ``READY <client class>``, then answers each command line with one
JSON line:

``latency N CHANNEL``         N one-by-one ``producer.send`` of 320 bytes: ``{"us": [...]}``
``produce N CHANNEL``         the same through ``MsgStream.produce``: ``{"us": [...]}``
``pipelined TOTAL BATCH CH``  ``send_many`` of BATCH 100-byte payloads, closed loop:
                              ``{"rate": msgs_per_s}``
``tt SUB EXPECTED CH...``     a TtMsgStream reading CH... from the start: ``{"rate": ...}``
``send N GAP_US CHANNEL``     N sends, each payload its send time (``perf_counter_ns``, the
                              same clock in every process), GAP_US apart: ``{"sent": N}``
``receive N CHANNEL``         subscribe at LATEST, answer ``{"ready": true}``, then receive N
                              messages: ``{"us": [delivery - send time, ...]}``
``quit``                      close and exit
"""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any

import orjson

from msgstream import (
    DeleteMsg,
    MsgPack,
    MsgStream,
    SubscriptionPosition,
    repack_by_first_key,
)
from msgstream.backends.rocksmq import open_client
from report import tt_read_rate

PAYLOAD = b"x" * 320
SMALL = b"x" * 100


def answer(value: Any) -> None:
    sys.stdout.write(orjson.dumps(value).decode() + "\n")
    sys.stdout.flush()


async def command_lines() -> Any:
    loop = asyncio.get_running_loop()
    while True:
        line = await loop.run_in_executor(None, sys.stdin.readline)
        if not line or line.strip() == "quit":
            return
        yield line.split()


async def latency(client: Any, count: int, channel: str) -> list[float]:
    producer = await client.create_producer(channel)
    samples = []
    clock = time.perf_counter_ns
    for _ in range(count):
        start = clock()
        await producer.send(PAYLOAD)
        samples.append((clock() - start) / 1000)
    return samples


async def produce_latency(client: Any, count: int, channel: str) -> list[float]:
    stream = MsgStream(client, repack=repack_by_first_key)
    await stream.as_producer([channel])
    samples = []
    clock = time.perf_counter_ns
    for n in range(count):
        msg = DeleteMsg(msg_id=n + 1, timestamp=n + 1, collection_name="c",
                        primary_keys=[n], hash_keys=[0])  # fmt: skip
        pack = MsgPack(msgs=[msg])
        start = clock()
        await stream.produce(pack)
        samples.append((clock() - start) / 1000)
    return samples


async def pipelined(client: Any, total: int, batch: int, channel: str) -> float:
    producer = await client.create_producer(channel)
    payloads = [SMALL] * batch
    start = time.perf_counter()
    for _ in range(0, total, batch):
        await producer.send_many(payloads)
    return total / (time.perf_counter() - start)


async def send_stamped(client: Any, count: int, gap_us: int, channel: str) -> int:
    producer = await client.create_producer(channel)
    clock = time.perf_counter_ns
    for _ in range(count):
        await producer.send(clock().to_bytes(8, "little"))
        await asyncio.sleep(gap_us / 1e6)
    return count


async def receive_stamped(client: Any, count: int, channel: str) -> list[float]:
    name = f"handoff-{time.time_ns()}"
    consumer = await client.subscribe(channel, name, SubscriptionPosition.LATEST)
    answer({"ready": True})
    clock = time.perf_counter_ns
    samples = []
    for _ in range(count):
        msg = await consumer.receive()
        samples.append((clock() - int.from_bytes(msg.payload, "little")) / 1000)
    await consumer.close()
    return samples


async def attached(path: str) -> None:
    client = open_client(path)
    answer(f"READY {type(client).__name__}")
    async for command, *args in command_lines():
        if command == "latency":
            answer({"us": await latency(client, int(args[0]), args[1])})
        elif command == "produce":
            answer({"us": await produce_latency(client, int(args[0]), args[1])})
        elif command == "pipelined":
            answer({"rate": await pipelined(client, int(args[0]), int(args[1]), args[2])})
        elif command == "tt":  # the stream closes its client: a new one
            rate = await tt_read_rate(open_client(path), args[2:], int(args[1]), args[0])
            answer({"rate": rate})
        elif command == "send":
            answer({"sent": await send_stamped(client, int(args[0]), int(args[1]), args[2])})
        elif command == "receive":
            answer({"us": await receive_stamped(client, int(args[0]), args[1])})
        else:
            answer({"error": f"unknown command {command!r}"})
    await client.close()


async def own(path: str) -> None:
    client = open_client(path)
    answer(f"READY {type(client).__name__}")
    async for _ in command_lines():
        pass
    await client.close()


class _Echo(asyncio.Protocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.transport.write(data)


async def echo(address: str) -> None:
    server = await asyncio.get_running_loop().create_unix_server(_Echo, address)
    answer("READY echo")
    async for _ in command_lines():
        pass
    server.close()


async def acks(path: str) -> None:
    client = open_client(path)
    producer = await client.create_producer("handover")
    answer(f"READY {type(client).__name__}")
    clock = time.perf_counter_ns
    while True:
        try:
            await producer.send(PAYLOAD)
        except Exception as exc:
            answer(f"FAILED {type(exc).__name__}")
        else:
            answer(f"ACK {clock()}")
        await asyncio.sleep(0.001)


def main(argv: list[str]) -> None:
    mode, where = argv
    runner = {"attached": attached, "own": own, "echo": echo, "acks": acks}[mode]
    asyncio.run(runner(where))


if __name__ == "__main__":
    main(sys.argv[1:])
