"""rocksmq in one process: state persists across close/reopen, clients share one store,
and a consumer is woken by a producer of another client without polling."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from msgstream.backends.log_client.client import RocksmqMessageID
from msgstream.backends.rocksmq import RocksOptions, RocksStore, new_client, open_client
from msgstream.backends.rocksmq import client as rocksmq  # its open stores: _OPEN
from msgstream.configuration.config import config_from_dict
from msgstream.errors import BackendUnavailableError, StreamClosedError, TopicNotFoundError
from msgstream.wire.position import SubscriptionPosition


def mid(value: int) -> RocksmqMessageID:
    return RocksmqMessageID(value)


async def settle() -> None:
    """Let ready callbacks run without letting any timer (a polling sleep) fire."""
    for _ in range(10):
        await asyncio.sleep(0)


async def test_messages_channels_subscriptions_persist(tmp_path: Path) -> None:
    path = str(tmp_path / "store")
    client = open_client(path)
    a = await client.create_producer("a")
    b = await client.create_producer("b")
    assert await a.send_many([b"a1", b"a2", b"a3"], {"k": "v"}) == [mid(1), mid(2), mid(3)]
    assert await b.send(b"b1") == mid(1)
    await client.create_producer("empty")
    consumer = await client.subscribe("a", "s1", SubscriptionPosition.EARLIEST)
    first = await asyncio.wait_for(consumer.receive(), 5)
    await consumer.ack(first)
    await client.subscribe("a", "s2", SubscriptionPosition.LATEST)  # cursor at 4, never acks
    await client.close()
    assert (path, False) not in rocksmq._OPEN

    client = open_client(path)
    try:
        assert await client.list_channels() == ["a", "b", "empty"]
        store = client.store
        assert [(r.msg_id, r.payload, dict(r.properties)) for r in store.read("a", 0, 10)] == [
            (1, b"a1", {"k": "v"}),
            (2, b"a2", {"k": "v"}),
            (3, b"a3", {"k": "v"}),
        ]
        assert [(r.msg_id, r.payload, dict(r.properties)) for r in store.read("b", 0, 10)] == [
            (1, b"b1", {})
        ]
        assert store.first_id("empty") is None
        assert store.next_id("empty") == 1
        infos = await client.list_subscriptions("a")
        assert [(i.name, i.acked_id, i.lag) for i in infos] == [
            ("s1", mid(1), 2),
            ("s2", mid(3), 0),
        ]
        # Resuming: right after the last ack, whatever position is asked for.
        s1 = await client.subscribe("a", "s1", SubscriptionPosition.LATEST)
        assert [(m.msg_id, m.payload) for m in s1.receive_nowait(10)] == [
            (mid(2), b"a2"),
            (mid(3), b"a3"),
        ]
        s2 = await client.subscribe("a", "s2", SubscriptionPosition.EARLIEST)
        assert s2.receive_nowait(10) == []
        a = await client.create_producer("a")
        assert await a.send(b"a4") == mid(4)
        msg = await asyncio.wait_for(s2.receive(), 5)
        assert (msg.msg_id, msg.payload) == (mid(4), b"a4")
        assert await s2.get_latest_msg_id() == mid(4)
    finally:
        await client.close()


async def test_deleted_channel_and_subscription_stay_deleted(tmp_path: Path) -> None:
    path = str(tmp_path / "store")
    client = open_client(path)
    for channel in ("keep", "drop"):
        producer = await client.create_producer(channel)
        await producer.send(b"x")
    await client.subscribe("keep", "gone", SubscriptionPosition.EARLIEST)
    await client.subscribe("keep", "stays", SubscriptionPosition.EARLIEST)
    await client.delete_subscription("keep", "gone")
    await client.delete_channel("drop")
    await client.close()

    client = open_client(path)
    try:
        assert await client.list_channels() == ["keep"]
        assert [i.name for i in await client.list_subscriptions("keep")] == ["stays"]
        with pytest.raises(TopicNotFoundError):
            await client.check_topic_valid("drop")
        # A channel created again under the old name starts empty, from id 1.
        producer = await client.create_producer("drop")
        assert await producer.send(b"new") == mid(1)
        assert [r.payload for r in client.store.read("drop", 0, 10)] == [b"new"]
    finally:
        await client.close()


async def test_last_client_close_closes_the_store(tmp_path: Path) -> None:
    path = str(tmp_path / "store")
    first = open_client(path)
    second = open_client(path)
    store = first.store
    assert second.store is store
    assert rocksmq._OPEN[(str(tmp_path / "store"), False)].clients == 2
    producer = await first.create_producer("ch")
    await producer.send(b"1")

    await first.close()
    await first.close()  # idempotent: does not release the store twice
    assert rocksmq._OPEN[(path, False)].clients == 1
    assert store.read("ch", 0, 10)[0].payload == b"1"  # still open for `second`
    with pytest.raises(StreamClosedError):
        await first.create_producer("ch")

    await second.close()
    assert (path, False) not in rocksmq._OPEN
    with pytest.raises(StreamClosedError):
        store.read("ch", 0, 10)
    with pytest.raises(StreamClosedError):
        store.append("ch", [b"late"], {})

    # The lock is released: the path opens again, in this process, as a new store.
    third = open_client(path)
    try:
        assert third.store is not store
        producer = await third.create_producer("ch")
        assert await producer.send(b"2") == mid(2)
        assert [r.payload for r in third.store.read("ch", 0, 10)] == [b"1", b"2"]
    finally:
        await third.close()
    # And directly, as proof that no handle in this process still holds the DB lock.
    direct = RocksStore(path)
    direct.close()


async def test_new_client_from_config_shares_by_path(tmp_path: Path) -> None:
    config = config_from_dict({"rocksmq": {"path": str(tmp_path / "cfg")}}, env={})
    one = new_client(config.rocksmq, config.msgstream)
    two = new_client(config.rocksmq, config.msgstream)
    try:
        assert one.store is two.store
        with pytest.raises(
            BackendUnavailableError, match="already open in this process with other"
        ):
            open_client(str(tmp_path / "cfg"), RocksOptions(sync=True))
    finally:
        await one.close()
        await two.close()
    assert not rocksmq._OPEN


@pytest.mark.parametrize("sync", [False, True])
async def test_consumer_woken_by_producer_of_other_client(tmp_path: Path, sync: bool) -> None:
    path = str(tmp_path / "store")
    producing = open_client(path, RocksOptions(sync=sync))
    consuming = open_client(path, RocksOptions(sync=sync))
    try:
        assert producing.store is consuming.store
        producer = await producing.create_producer("ch")
        c1 = await consuming.subscribe("ch", "s1", SubscriptionPosition.LATEST)
        c2 = await consuming.subscribe("ch", "s2", SubscriptionPosition.LATEST)
        for round_ in range(3):
            waiting = [asyncio.create_task(c.receive()) for c in (c1, c2)]
            await asyncio.sleep(0.02)
            assert not any(t.done() for t in waiting)  # blocked: nothing to read
            msg_id = await producer.send(b"m%d" % round_)
            assert msg_id == mid(round_ + 1)
            await settle()  # no time passes: only the in-process wake-up can deliver
            assert all(t.done() for t in waiting)
            for task in waiting:
                got = task.result()
                assert (got.msg_id, got.payload) == (mid(round_ + 1), b"m%d" % round_)
    finally:
        await producing.close()
        await consuming.close()


async def test_waiting_consumer_released_when_client_closes(tmp_path: Path) -> None:
    path = str(tmp_path / "store")
    client = open_client(path)
    try:
        consumer = await client.subscribe("ch", "s", SubscriptionPosition.LATEST)
        waiting = asyncio.create_task(consumer.receive())
        await asyncio.sleep(0.01)
        await consumer.close()
        await settle()
        assert waiting.done()
        with pytest.raises(StreamClosedError):
            waiting.result()
    finally:
        await client.close()
