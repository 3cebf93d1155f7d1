"""rocksmq read-only mode: another process reads a store this process keeps writing.

The reader is a separate process (tests/helpers/rocksmq_child.py ``read``) opening the
store with ``RocksOptions(read_only=True)`` through ``open_client``; it sees the writer's
later messages and channels only through its polling catch-up.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import time
from pathlib import Path

import pytest

from helpers.rocksmq_child import Child
from msgstream.backends.log_client.client import RocksmqMessageID
from msgstream.backends.rocksmq import RocksOptions, RocksStore, open_client
from msgstream.errors import BackendUnavailableError, StreamStateError, TopicNotFoundError
from msgstream.wire.position import SubscriptionPosition

WAIT_S = 60
"""How long what must happen may take (a deadline, never a pause): a loaded machine is slow."""


def mid(value: int) -> RocksmqMessageID:
    return RocksmqMessageID(value)


def disk_state(path: Path) -> dict[str, tuple[int, int]]:
    """Every file of the store with its size and modification time, but RocksDB's info
    ``LOG`` (and its rotated ``LOG.old.*``): the writer's background threads append to it
    whenever they like (CI saw 133 bytes 24 ms after a flush returned, and a loaded machine
    can delay that for longer than any quiet period a test would wait for), and it holds
    no data: a read-only process that wrote anything would write the other files."""
    state = {}
    for entry in os.scandir(path):
        if entry.name == "LOG" or entry.name.startswith("LOG.old."):
            continue
        info = entry.stat()
        state[entry.name] = (info.st_size, info.st_mtime_ns)
    return state


async def settled_disk_state(
    path: Path, quiet_s: float = 0.2, tries: int = 25
) -> dict[str, tuple[int, int]]:
    """:func:`disk_state` once it stayed the same for ``quiet_s`` (a safety net: a flush
    has finished its own files when it returns)."""
    state = disk_state(path)
    for _ in range(tries):
        await asyncio.sleep(quiet_s)
        now = disk_state(path)
        if now == state:
            return now
        state = now
    raise AssertionError(f"the store at {path} kept changing: {state}")


async def test_other_process_reads_while_writer_writes(tmp_path: Path) -> None:
    path = tmp_path / "store"
    writer = open_client(str(path))
    child: Child | None = None
    try:
        store = writer.store
        assert isinstance(store, RocksStore)
        producer = await writer.create_producer("ch")
        assert await producer.send_many([b"a%d" % i for i in range(1, 51)]) == [
            mid(i) for i in range(1, 51)
        ]

        child = Child("read", str(path), "ch", "100", "late", "3")
        assert child.line() == "OPENED"
        # Everything written before it opened...
        assert [child.line() for _ in range(50)] == [f"MSG {i} a{i}" for i in range(1, 51)]

        # ...and, while it waits, a new channel and more messages in several steps.
        late = await writer.create_producer("late")
        assert await late.send_many([b"late1", b"late2", b"late3"]) == [mid(1), mid(2), mid(3)]
        for step in range(5):
            await asyncio.sleep(0.05)  # the reader is polling in between
            first = 51 + 10 * step
            ids = await producer.send_many([b"b%d" % i for i in range(first, first + 10)])
            assert ids == [mid(i) for i in range(first, first + 10)]
        assert [child.line() for _ in range(50)] == [f"MSG {i} b{i}" for i in range(51, 101)]
        assert [child.line() for _ in range(3)] == ["LATE 1 late1", "LATE 2 late2", "LATE 3 late3"]
        assert child.line() == "PRODUCE StreamStateError"
        assert child.line() == "READY_TO_ACK"

        # The reader's ack stays in its memory: nothing reaches the disk.
        store._db.flush()
        before = await settled_disk_state(path)
        sequence = store._db.latest_sequence_number()
        child.send_line("ack")
        assert child.line() == "ACKED 101"  # its own (volatile) cursor moved
        assert child.wait() == 0, child.stderr()
        assert disk_state(path) == before
        assert store._db.latest_sequence_number() == sequence
        assert store.get_subscription("ch", "reader") is None
        assert store.list_subscriptions("ch") == []
        assert store.list_subscriptions("late") == []
    finally:
        if child is not None:
            child.close()
        await writer.close()
    # The writer's data is intact after the reader went away.
    store = RocksStore(str(path))
    try:
        assert [r.msg_id for r in store.read("ch", 0, 1000)] == list(range(1, 101))
        assert store.list_subscriptions("ch") == []
    finally:
        store.close()


async def test_read_only_client_in_process(tmp_path: Path) -> None:
    path = str(tmp_path / "store")
    writer = open_client(path)
    reader = open_client(path, RocksOptions(read_only=True, poll_interval_s=0.01))
    try:
        assert reader.store is not writer.store
        assert reader.store.read_only
        producer = await writer.create_producer("ch")
        await producer.send_many([b"1", b"2"], {"k": "v"})

        consumer = await reader.subscribe("ch", "ro", SubscriptionPosition.EARLIEST)
        with pytest.raises(StreamStateError):
            await reader.create_producer("ch")
        with pytest.raises(StreamStateError):
            await reader.delete_channel("ch")
        with pytest.raises(StreamStateError):
            await reader.delete_subscription("ch", "ro")
        with pytest.raises(TopicNotFoundError):
            await reader.subscribe("missing", "ro", SubscriptionPosition.EARLIEST)

        first = await asyncio.wait_for(consumer.receive(), WAIT_S)
        assert (first.msg_id, first.payload, dict(first.properties)) == (mid(1), b"1", {"k": "v"})
        await consumer.ack(first)
        assert writer.store.get_subscription("ch", "ro") is None
        assert reader.store.get_subscription("ch", "ro") is not None

        # A waiting reader picks up the writer's later message by polling.
        await consumer.receive()
        waiting = asyncio.create_task(consumer.receive())
        await asyncio.sleep(0.05)
        assert not waiting.done()
        await producer.send(b"3")
        third = await asyncio.wait_for(waiting, WAIT_S)
        assert (third.msg_id, third.payload) == (mid(3), b"3")
        assert await consumer.get_latest_msg_id() == mid(3)

        # A channel deleted by the writer ends a waiting read with TopicNotFoundError.
        waiting = asyncio.create_task(consumer.receive())
        await asyncio.sleep(0.03)
        await writer.delete_channel("ch")
        with pytest.raises(TopicNotFoundError):
            await asyncio.wait_for(waiting, WAIT_S)
    finally:
        await reader.close()
        await writer.close()


def test_read_only_open_of_missing_store_fails(tmp_path: Path) -> None:
    path = tmp_path / "nothing"
    with pytest.raises(BackendUnavailableError, match="nothing"):
        open_client(str(path), RocksOptions(read_only=True))
    assert not path.exists()


async def test_waiting_consumers_share_one_catch_up_per_poll_interval(tmp_path: Path) -> None:
    """A read-only store polls the writer for every waiting channel at once: four
    consumers waiting cost one catch-up per 20 ms interval, not four; a message written
    meanwhile reaches its consumer at the next catch-up (or the one after, if its waiter
    looked just before the first).

    Asserted as the order and spacing of the catch-ups, never as wall-clock durations or
    counts per second, which a loaded machine stretches at will."""
    path = tmp_path / "store"
    writer = open_client(str(path))
    reader = None
    waits: list[asyncio.Task[None]] = []
    try:
        producers = {c: await writer.create_producer(c) for c in "abcd"}
        for producer in producers.values():
            await producer.send(b"x")
        reader = open_client(str(path), RocksOptions(read_only=True, poll_interval_s=0.02))
        store = reader.store
        assert isinstance(store, RocksStore)
        calls: list[float] = []
        catch_up = store.catch_up

        def counted() -> None:
            calls.append(time.monotonic())
            catch_up()

        store.catch_up = counted  # type: ignore[method-assign]
        waits = [asyncio.create_task(store.wait_for_append(c, 2)) for c in "abcd"]
        await asyncio.sleep(0.3)  # the four wait: every 20 ms, each of them looks
        assert not any(w.done() for w in waits)
        assert calls  # they did look
        # one catch-up per interval for all four, not one each (four at once)
        gaps = [later - earlier for earlier, later in itertools.pairwise(calls)]
        assert all(gap >= 0.02 for gap in gaps), gaps
        # Stamped before the send: the send may yield to the loop after its write, and a
        # catch-up run then has seen the message (stamped after, it would not count).
        written = time.monotonic()
        await producers["c"].send(b"y")
        await asyncio.wait_for(waits[2], WAIT_S)
        assert 1 <= len([t for t in calls if t >= written]) <= 2
        assert not any(w.done() for i, w in enumerate(waits) if i != 2)
    finally:
        for wait in waits:
            wait.cancel()
        await asyncio.gather(*waits, return_exceptions=True)
        if reader is not None:
            await reader.close()
        await writer.close()
