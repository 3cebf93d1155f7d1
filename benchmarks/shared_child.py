"""The other processes of ``bench_shared.py``: each answers commands read from stdin.

    python shared_child.py [--uvloop] MODE WHERE   # --uvloop: the process runs on uvloop

    python shared_child.py attached PATH     # a process attached to the store at PATH
    python shared_child.py own PATH          # a process that owns PATH and idles
                                             # (until a line or the end of stdin)
    python shared_child.py echo ADDRESS      # an asyncio echo server on a Unix socket
    python shared_child.py store-echo DIR    # a uvloop server on DIR/store.sock storing
                                             # each 320-byte request in a RocksDB at DIR
                                             # as the owner stores a send (the message and
                                             # its producer's record in one WriteBatch),
                                             # then answering 8 bytes
    python shared_child.py protocol-floor DIR
                                             # a uvloop server on DIR/store.sock doing the
                                             # owner's job for a send with the least code
                                             # the protocol allows: cut an APPEND frame,
                                             # check it, append_once it to a RocksStore at
                                             # DIR/store, answer a REPLY frame
    python shared_child.py acks PATH         # sends forever, one every millisecond,
                                             # printing ``ACK <sent> <acknowledged>``
    python shared_child.py relay ADDRESS     # an asyncio server on a Unix socket passing
                                             # what writers send on to its readers
    python shared_child.py pacer ADDRESS     # a writer to a relay, answering ``send``

The relay and the pacer are the hand-off's floor: the same three processes, the same
pacing and the same asyncio on each side, with no store, no frames and no reply. A
connection's first byte says what it is: ``R`` a reader, ``W`` a writer.

``attached`` prints ``READY <client class>``, then answers each command line with one
JSON line:

``send N GAP_US CHANNEL``     N sends, each payload its send time (``perf_counter_ns``, the
                              same clock in every process), GAP_US apart: ``{"sent": N}``
``quit``                      close and exit

``pacer`` answers ``send N GAP_US`` the same way, writing 320-byte records that start
with their send time.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from typing import Any, cast

import orjson
from rocksdict import Options, Rdict, WriteBatch

from msgstream.backends.rocksmq import open_client
from msgstream.backends.rocksmq.frames import HEADER, SIZE_FIELD, Op, check_request, encode
from msgstream.backends.rocksmq.store import RocksStore

PAYLOAD = b"x" * 320


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


async def serve_until_quit(name: str, address: str, protocol: Any) -> None:
    """Serve ``protocol`` (a factory) at the socket ``address``, say ``READY name``, and
    stop when the parent says ``quit`` (or closes stdin)."""
    server = await asyncio.get_running_loop().create_unix_server(protocol, address)
    answer(f"READY {name}")
    async for _ in command_lines():
        pass
    server.close()


async def send_stamped(client: Any, count: int, gap_us: int, channel: str) -> int:
    producer = await client.create_producer(channel)
    clock = time.perf_counter_ns
    for _ in range(count):
        await producer.send(clock().to_bytes(8, "little"))
        await asyncio.sleep(gap_us / 1e6)
    return count


async def attached(path: str) -> None:
    client = open_client(path)
    answer(f"READY {type(client).__name__}")
    async for command, *args in command_lines():
        if command == "send":
            answer({"sent": await send_stamped(client, int(args[0]), int(args[1]), args[2])})
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
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def data_received(self, data: bytes) -> None:
        self.transport.write(data)


async def echo(address: str) -> None:
    await serve_until_quit("echo", address, _Echo)


class _StoreEcho(asyncio.Protocol):
    """The least code that does an owner's job for one send: no frames, no checks."""

    def __init__(self, db: Any) -> None:
        self.db = db
        self.next_id = 0
        self.pending = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        data = self.pending + data
        size = len(PAYLOAD)
        while len(data) >= size:
            request, data = data[:size], data[size:]
            self.next_id += 1
            key = self.next_id.to_bytes(8, "big")
            batch = WriteBatch(raw_mode=True)
            batch.put(b"M" + key, request)
            batch.put(b"Q" + key[:4], key * 4)
            self.db.write(batch)
            self.transport.write(key)
        self.pending = data


async def store_echo(directory: str) -> None:
    db = Rdict(directory, Options(raw_mode=True))
    address = os.path.join(directory, "store.sock")
    await serve_until_quit("store-echo", address, lambda: _StoreEcho(db))
    db.close()


class FloorFrames(asyncio.Protocol):
    """Both ends of the protocol floor: the frames of a byte stream cut with no decoder
    buffer (a frame never crosses reads in a back-to-back run, but is kept whole if it
    does), each handed to :meth:`frame` with its one blob (``b""`` for none)."""

    def __init__(self) -> None:
        self.pending = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        data = self.pending + data if self.pending else data
        at = 0
        while len(data) - at >= HEADER.size:
            size, op, request, control_len, count = HEADER.unpack_from(data, at)
            end = at + SIZE_FIELD.size + size
            if end > len(data):
                break
            if count > 1:
                raise ValueError(f"the protocol floor takes one blob a frame, not {count}")
            start = at + HEADER.size
            control = orjson.loads(data[start : start + control_len])
            self.frame(
                op, request, control, data[start + control_len + SIZE_FIELD.size * count : end]
            )
            at = end
        self.pending = data[at:]

    def frame(self, op: int, request: int, control: Any, blob: bytes) -> None:
        raise NotImplementedError


class _ProtocolFloor(FloorFrames):
    """The owner's job for one send as the protocol asks it, with no more code: the frame
    cut and its control checked against the APPEND layout, the send stored idempotently
    by the store's own ``append_once``, a REPLY frame written. No dispatch, no other
    operations, no readers to wake."""

    def __init__(self, store: RocksStore) -> None:
        super().__init__()
        self.store = store

    def frame(self, op: int, request: int, control: Any, blob: bytes) -> None:
        if op != Op.APPEND:
            raise ValueError("the protocol floor takes sends only")
        check_request(Op.APPEND, control, [blob])
        channel, producer, seq, sync, _ = control
        ids = self.store.append_once(channel, [blob], {}, producer, seq, sync)
        self.transport.write(encode(Op.REPLY, request, [ids[0]]))


async def protocol_floor(directory: str) -> None:
    os.makedirs(directory, exist_ok=True)
    store = RocksStore(os.path.join(directory, "store"))
    store.ensure_channel("floor")
    address = os.path.join(directory, "store.sock")
    await serve_until_quit("protocol-floor", address, lambda: _ProtocolFloor(store))
    store.close()


class _Relay(asyncio.Protocol):
    def __init__(self, readers: list[asyncio.Transport]) -> None:
        self.readers = readers
        self.role = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        if not self.role:
            self.role, data = data[:1], data[1:]
            if self.role == b"R":
                self.readers.append(self.transport)
        if self.role == b"W" and data:
            for reader in self.readers:
                reader.write(data)


async def relay(address: str) -> None:
    readers: list[asyncio.Transport] = []
    await serve_until_quit("relay", address, lambda: _Relay(readers))


async def pacer(address: str) -> None:
    _, writer = await asyncio.open_unix_connection(address)
    writer.write(b"W")
    answer("READY pacer")
    clock = time.perf_counter_ns
    pad = PAYLOAD[8:]
    async for command, *args in command_lines():
        if command != "send":
            answer({"error": f"unknown command {command!r}"})
            continue
        count, gap_us = int(args[0]), int(args[1])
        for _ in range(count):
            writer.write(clock().to_bytes(8, "little") + pad)
            await writer.drain()
            await asyncio.sleep(gap_us / 1e6)
        answer({"sent": count})
    writer.close()


async def acks(path: str) -> None:
    client = open_client(path)
    producer = await client.create_producer("handover")
    answer(f"READY {type(client).__name__}")
    clock = time.perf_counter_ns
    while True:
        started = clock()
        try:
            await producer.send(PAYLOAD)
        except Exception as exc:
            answer(f"FAILED {type(exc).__name__}")
        else:
            answer(f"ACK {started} {clock()}")
        await asyncio.sleep(0.001)


def main(argv: list[str]) -> None:
    on_uvloop = argv[:1] == ["--uvloop"]
    mode, where = argv[1:] if on_uvloop else argv
    runner = {
        "attached": attached,
        "own": own,
        "echo": echo,
        "store-echo": store_echo,
        "protocol-floor": protocol_floor,
        "acks": acks,
        "relay": relay,
        "pacer": pacer,
    }[mode]
    if on_uvloop or mode in ("store-echo", "protocol-floor"):  # as an owner serves
        import uvloop

        uvloop.run(runner(where))
    else:
        asyncio.run(runner(where))


if __name__ == "__main__":
    main(sys.argv[1:])
