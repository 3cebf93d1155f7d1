"""Processes sharing one rocksmq store, driven by the shared-store tests.

Usage: ``python shared_child.py MODE PATH [ARGS...]``; every line is printed (flushed) as
soon as the step it reports is done, so the parent (``rocksmq_child.Child``) can wait on
it. The store is opened with the default ``rocksmq.sharing: auto``: the process owns it
or attaches to its owner, whichever it finds. ``MSGSTREAM_TIMEOUT_S`` sets
``msgstream.operation_timeout_s`` (default 30).

``send PATH CHANNEL COUNT``
    Print ``READY <client class>``, then send ``COUNT`` messages (``-1``: until killed)
    one by one, payload ``b"<n>"`` for n = 1, 2...; print ``ACK <id> <n>`` once each send
    returned, ``FAILED <n> <error class>`` for one that raised. Then ``SENT`` and wait for
    a line on stdin: a number sends that many more the same way (the parent knows they
    were sent after whatever it did before writing it), anything else closes the client.

``hold PATH CHANNEL SUB ACK_AT``
    Subscribe ``SUB`` at EARLIEST, receive up to the message with id ``ACK_AT``, ack it,
    print ``ACKED <id>``, then keep the consumer open until stdin has a line.

``tail PATH CHANNEL``
    Subscribe at LATEST, print ``SUBSCRIBED``, then ``GOT <payload>`` for every message
    received, until killed.

``produce-tt PATH ID_RANGE TICK_S CHANNEL...``
    A producer with a ``TimeTickEmitter`` on ``CHANNEL...`` (its own: no other process
    writes them): sends one ``DeleteMsg`` at a time, round robin over the channels, with
    ``msg_id = ID_RANGE * 10**7 + n`` (the caller gives each process a range of its
    own); prints ``ACK <channel> <msg_id>`` once its produce returned and
    ``FAIL <msg_id> <error class>`` when one raised. On a line on
    stdin it stops sending, sends a last tick covering everything acknowledged, prints
    ``DONE <tick>`` and exits.

``consume-tt PATH OUTPUT SUB CHANNEL...``
    A ``TtMsgStream`` over ``CHANNEL...`` under subscription ``SUB``. Each pack is appended
    to ``OUTPUT`` as one JSON line (one ``write``): ``begin_ts``, ``end_ts``, the messages
    as ``[channel, msg_id, timestamp]`` and the pack's ``end_positions``. On start it
    resumes after the last whole line of ``OUTPUT`` (a half-written last line, left by a
    kill, is cut off), else from EARLIEST. Prints ``PACK <end_ts> <messages>`` per pack.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import orjson

from msgstream import (
    DeleteMsg,
    MsgPack,
    MsgStream,
    SubscriptionPosition,
    TimeTickEmitter,
    TtMsgStream,
    positions_from_json,
    positions_to_json,
    repack_by_first_key,
)
from msgstream.backends.log_client.client import LogMessageID
from msgstream.backends.rocksmq import open_client

TIMEOUT_S = float(os.environ.get("MSGSTREAM_TIMEOUT_S", "30"))


def out(*parts: object) -> None:
    sys.stdout.write(" ".join(map(str, parts)) + "\n")
    sys.stdout.flush()


async def stdin_line() -> str:
    return await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)


def value(msg_id: object) -> int:
    assert isinstance(msg_id, LogMessageID)
    return msg_id.value


async def send(path: str, channel: str, count: int) -> None:
    client = open_client(path, operation_timeout_s=TIMEOUT_S)
    out("READY", type(client).__name__)
    producer = await client.create_producer(channel)
    n = 0
    while True:
        end = n + count
        while count < 0 or n < end:
            n += 1
            try:
                msg_id = await producer.send(b"%d" % n)
            except Exception as exc:
                out("FAILED", n, type(exc).__name__)
            else:
                out("ACK", value(msg_id), n)
        out("SENT")
        more = (await stdin_line()).strip()
        if not more.isdigit():
            break
        count = int(more)
    await client.close()


async def hold(path: str, channel: str, sub: str, ack_at: int) -> None:
    client = open_client(path, operation_timeout_s=TIMEOUT_S)
    consumer = await client.subscribe(channel, sub, SubscriptionPosition.EARLIEST)
    while True:
        msg = await consumer.receive()
        if value(msg.msg_id) == ack_at:
            await consumer.ack(msg)
            out("ACKED", ack_at)
            break
    await stdin_line()
    await client.close()


async def tail(path: str, channel: str) -> None:
    client = open_client(path, operation_timeout_s=TIMEOUT_S)
    consumer = await client.subscribe(channel, "tail", SubscriptionPosition.LATEST)
    out("SUBSCRIBED")
    while True:
        msg = await consumer.receive()
        out("GOT", msg.payload.decode())


async def produce_tt(path: str, id_range: int, tick_s: float, channels: list[str]) -> None:
    stream = MsgStream(open_client(path, operation_timeout_s=TIMEOUT_S), repack=repack_by_first_key)
    await stream.as_producer(channels)
    emitter = TimeTickEmitter(stream, interval_s=tick_s)
    emitter.start()
    stop = asyncio.get_running_loop().create_task(stdin_line())
    n = 0
    while not stop.done():
        n += 1
        msg_id = id_range * 10**7 + n
        bucket = n % len(channels)
        try:
            async with emitter.reserve() as ts:
                msg = DeleteMsg(
                    msg_id=msg_id,
                    timestamp=ts,
                    collection_name="c",
                    primary_keys=[msg_id],
                    hash_keys=[bucket],
                )
                await stream.produce(MsgPack(msgs=[msg]))
        except Exception as exc:
            out("FAIL", msg_id, type(exc).__name__)
        else:
            out("ACK", channels[bucket], msg_id)
        await asyncio.sleep(0.002)
    await emitter.stop(final_tick=False)
    last = None
    while last is None:  # a tick covering every acknowledged send (retried across a kill)
        try:
            last = await emitter.tick()
        except Exception as exc:
            out("TICK_FAILED", type(exc).__name__)
    out("DONE", last)
    await stream.close()


def resume_point(output: Path) -> bytes | None:
    """The end positions of the last whole line of ``output``, cutting a torn last line."""
    if not output.exists():
        return None
    data = output.read_bytes()
    whole = data[: data.rfind(b"\n") + 1]
    if len(whole) != len(data):
        with open(output, "r+b") as handle:
            handle.truncate(len(whole))
    lines = whole.splitlines()
    return orjson.loads(lines[-1])["end_positions"].encode() if lines else None


async def consume_tt(path: str, output: Path, sub: str, channels: list[str]) -> None:
    saved = resume_point(output)
    stream = TtMsgStream(open_client(path, operation_timeout_s=TIMEOUT_S), pursuit_lag_s=0)
    if saved is None:
        await stream.as_consumer(channels, sub, SubscriptionPosition.EARLIEST)
    else:
        await stream.as_consumer(channels, sub, SubscriptionPosition.UNKNOWN)
        await stream.seek(positions_from_json(saved))
    fd = os.open(output, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    async for pack in stream:
        line = {
            "begin_ts": pack.begin_ts,
            "end_ts": pack.end_ts,
            "msgs": [[m.position.channel, m.msg_id, m.timestamp] for m in pack.msgs if m.position],
            "end_positions": positions_to_json(pack.end_positions),
        }
        os.write(fd, orjson.dumps(line) + b"\n")
        out("PACK", pack.end_ts, len(pack.msgs))


def main(argv: list[str]) -> None:
    mode, path, *args = argv
    if mode == "send":
        asyncio.run(send(path, args[0], int(args[1])))
    elif mode == "hold":
        asyncio.run(hold(path, args[0], args[1], int(args[2])))
    elif mode == "tail":
        asyncio.run(tail(path, args[0]))
    elif mode == "produce-tt":
        asyncio.run(produce_tt(path, int(args[0]), float(args[1]), args[2:]))
    elif mode == "consume-tt":
        asyncio.run(consume_tt(path, Path(args[0]), args[1], args[2:]))
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
