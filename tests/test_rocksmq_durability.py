"""rocksmq durability: a send acknowledged before the process is SIGKILLed is never lost.

A child process (tests/helpers/rocksmq_child.py) produces to two channels and prints every
acknowledged message; the test kills it mid-stream and reopens the store.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from pathlib import Path

import pytest

from helpers.rocksmq_child import Child
from msgstream.backends.log_client.client import RocksmqMessageID
from msgstream.backends.rocksmq import RocksOptions, RocksStore, open_client
from msgstream.wire.position import SubscriptionPosition

CHANNELS = ("alpha", "beta")


def expected_properties(seq: int) -> dict[str, str]:
    """The child sends seqs ``s % 8 < 5`` one by one with properties, the rest batched."""
    return {"seq": str(seq)} if seq % 8 < 5 else {}


def produce_and_kill(path: Path, *, sync: bool, min_acks: int) -> dict[str, list[tuple[int, int]]]:
    """Run the producing child until it acknowledged ``min_acks`` messages, SIGKILL it,
    and return the acknowledged ``(id, seq)`` pairs per channel, in print order."""
    child = Child("produce", str(path), "1" if sync else "0", *CHANNELS)
    try:
        lines = [child.line() for _ in range(min_acks)]
        lines += child.kill()  # printed after `send` returned, so acknowledged too
    finally:
        child.close()
    assert child.proc.returncode == -9
    acked: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for line in lines:
        tag, channel, msg_id, seq = line.split()
        assert tag == "ACK"
        acked[channel].append((int(msg_id), int(seq)))
    return acked


def check_recovered(store: RocksStore, acked: dict[str, list[tuple[int, int]]]) -> None:
    assert store.list_channels() == sorted(CHANNELS)
    for channel in CHANNELS:
        acks = acked[channel]
        # The child printed every channel's acks in id order, ids from 1, id = seq + 1.
        assert acks == [(i + 1, i) for i in range(len(acks))]
        records = store.read(channel, 0, 1_000_000)
        assert len(records) >= len(acks)
        # Present in order with exact ids, then at most a contiguous continuation (sends
        # written to the WAL but killed before their ack was printed).
        for position, record in enumerate(records):
            seq = position
            assert record.msg_id == seq + 1
            assert record.payload == f"{channel}:{seq}".encode()
            assert dict(record.properties) == expected_properties(seq)
        # A batch is written atomically: an unacknowledged tail never ends mid-batch.
        last_seq = records[-1].msg_id - 1
        assert last_seq % 8 < 5 or last_seq % 8 == 7
        assert store.first_id(channel) == 1
        assert store.next_id(channel) == len(records) + 1


def test_sigkill_loses_no_acknowledged_send(tmp_path: Path) -> None:
    path = tmp_path / "store"
    acked = produce_and_kill(path, sync=False, min_acks=2000)
    assert sum(len(a) for a in acked.values()) >= 2000
    assert set(acked) == set(CHANNELS)
    store = RocksStore(str(path))
    try:
        check_recovered(store, acked)
    finally:
        store.close()


def test_sigkill_loses_no_acknowledged_send_with_sync(tmp_path: Path) -> None:
    path = tmp_path / "store"
    acked = produce_and_kill(path, sync=True, min_acks=120)
    store = RocksStore(str(path), RocksOptions(sync=True))
    try:
        check_recovered(store, acked)
    finally:
        store.close()


async def test_appends_after_crash_continue_without_id_reuse(tmp_path: Path) -> None:
    path = tmp_path / "store"
    acked = produce_and_kill(path, sync=False, min_acks=300)
    client = open_client(str(path))
    try:
        store = client.store
        ends = {ch: store.next_id(ch) for ch in CHANNELS}
        for channel in CHANNELS:
            assert ends[channel] >= acked[channel][-1][0] + 1
        consumer = await client.subscribe("alpha", "after", SubscriptionPosition.LATEST)
        producer = await client.create_producer("alpha")
        new_ids = [await producer.send(b"after-crash-%d" % i) for i in range(3)]
        end = ends["alpha"]
        assert new_ids == [RocksmqMessageID(end + i) for i in range(3)]
        got = [await asyncio.wait_for(consumer.receive(), 5) for _ in range(3)]
        assert [(m.msg_id, m.payload) for m in got] == [
            (RocksmqMessageID(end + i), b"after-crash-%d" % i) for i in range(3)
        ]
        # The message before the new ones is still the child's last one.
        before = store.read("alpha", end - 1, 2)
        assert before[0].payload == f"alpha:{end - 2}".encode()
        assert store.next_id("beta") == ends["beta"]
    finally:
        await client.close()
    # Once more across a clean reopen: ids keep going from where they were.
    client = open_client(str(path))
    try:
        producer = await client.create_producer("alpha")
        assert await producer.send(b"again") == RocksmqMessageID(ends["alpha"] + 3)
    finally:
        await client.close()


async def test_ack_persisted_before_sigkill_survives(tmp_path: Path) -> None:
    path = tmp_path / "store"
    child = Child("ack", str(path), "ch", "20", "7")
    try:
        assert child.line() == "ACKED 7"
        assert child.kill() == []
    finally:
        child.close()

    client = open_client(str(path))
    try:
        sub = client.store.get_subscription("ch", "sub")
        assert sub is not None
        assert sub.next_id == 8
        # Resuming the subscription starts right after the child's ack, whatever position
        # is asked for (the cursor wins).
        consumer = await client.subscribe("ch", "sub", SubscriptionPosition.LATEST)
        first = await asyncio.wait_for(consumer.receive(), 5)
        second = await asyncio.wait_for(consumer.receive(), 5)
        assert (first.msg_id, first.payload) == (RocksmqMessageID(8), b"m8")
        assert (second.msg_id, second.payload) == (RocksmqMessageID(9), b"m9")
        await consumer.ack(second)
    finally:
        await client.close()

    # The parent's own ack survives a second reopen too.
    client = open_client(str(path))
    try:
        consumer = await client.subscribe("ch", "sub", SubscriptionPosition.EARLIEST)
        msg = await asyncio.wait_for(consumer.receive(), 5)
        assert (msg.msg_id, msg.payload) == (RocksmqMessageID(10), b"m10")
        infos = await client.list_subscriptions("ch")
        assert [(i.name, i.acked_id, i.lag) for i in infos] == [("sub", RocksmqMessageID(9), 11)]
    finally:
        await client.close()


@pytest.mark.parametrize("sync", [False, True])
def test_reopen_after_sigkill_sees_same_data_twice(tmp_path: Path, sync: bool) -> None:
    """Recovery is stable: a second reopen (after the first one closed) sees the same."""
    path = tmp_path / "store"
    acked = produce_and_kill(path, sync=sync, min_acks=100)
    seen = []
    for _ in range(2):
        store = RocksStore(str(path), RocksOptions(sync=sync))
        try:
            check_recovered(store, acked)
            seen.append({ch: store.read(ch, 0, 1_000_000) for ch in CHANNELS})
        finally:
            store.close()
    assert seen[0] == seen[1]
