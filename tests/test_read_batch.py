"""Columnar reads of the local backends (``read_batch``, ``receive_batch_nowait``): the
same messages, ids, payloads and properties, in the same order, as the one-by-one reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from msgstream.backends.log_client import LogClient, LogStore
from msgstream.backends.log_client.client import RocksmqMessageID
from msgstream.backends.memory import MemoryStore
from msgstream.backends.rocksmq import RocksOptions, RocksStore, open_client
from msgstream.backends.rocksmq.retention import RetentionPolicy
from msgstream.contract.backend import ConsumedBatch, ConsumedMessage
from msgstream.wire.position import SubscriptionPosition


def fill(store: LogStore) -> None:
    store.ensure_channel("a")
    store.append("a", [b"p1", b"p2", b"p3"], {})
    store.append("a", [b"p4"], {"k": "v"})
    store.append("a", [b"p5", b""], {})
    store.ensure_channel("b")


def columns(
    store: LogStore, channel: str, start: int, limit: int
) -> list[tuple[int, bytes, dict[str, str]]]:
    batch = store.read_batch(channel, start, limit)
    if batch is None:
        return []
    props = batch.properties or [{}] * len(batch.payloads)
    ids = [int.from_bytes(i, "big", signed=True) for i in batch.ids]
    assert batch.next_id == ids[-1] + 1
    return list(zip(ids, batch.payloads, [dict(p) for p in props], strict=True))


def records(
    store: LogStore, channel: str, start: int, limit: int
) -> list[tuple[int, bytes, dict[str, str]]]:
    return [(r.msg_id, r.payload, dict(r.properties)) for r in store.read(channel, start, limit)]


@pytest.fixture(params=["rocksmq", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> LogStore:
    made: LogStore = (
        RocksStore(str(tmp_path / "db")) if request.param == "rocksmq" else MemoryStore("batch")
    )
    fill(made)
    yield made  # type: ignore[misc]
    made.close()


@pytest.mark.parametrize("start", [-5, 0, 1, 3, 4, 6, 7, 100])
@pytest.mark.parametrize("limit", [1, 2, 6, 1024])
def test_read_batch_is_read_as_columns(store: LogStore, start: int, limit: int) -> None:
    assert columns(store, "a", start, limit) == records(store, "a", start, limit)
    assert columns(store, "b", start, limit) == []


def test_rocksmq_read_batch_after_retention_starts_at_the_first_retained(tmp_path: Path) -> None:
    policy = RetentionPolicy(max_age_ms=0, max_size=-1)
    store = RocksStore(str(tmp_path / "db"), RocksOptions(page_size=10, retention=policy))
    try:
        store.ensure_channel("a")
        for i in range(1, 9):
            store.append("a", [b"payload%03d" % i], {})
        assert store.run_retention(now=2**62) == 8
        store.append("a", [b"later1", b"later2"], {})
        assert store.first_id("a") == 9
        assert columns(store, "a", 0, 100) == records(store, "a", 0, 100)
        assert [row[0] for row in columns(store, "a", 3, 100)] == [9, 10]
    finally:
        store.close()


async def test_receive_batch_nowait_gives_what_receive_nowait_gives(tmp_path: Path) -> None:
    client: LogClient = open_client(str(tmp_path / "db"))
    try:
        producer = await client.create_producer("a")
        await producer.send_many([b"x1", b"x2"])
        await producer.send_many([b"x3"], {"k": "v"})
        await producer.send_many([b"x4", b"x5", b"x6"])
        one = await client.subscribe("a", "one", SubscriptionPosition.EARLIEST)
        many = await client.subscribe("a", "many", SubscriptionPosition.EARLIEST)
        expected = one.receive_nowait(4) + one.receive_nowait(10)
        got: list[ConsumedMessage] = []
        for size in (4, 10, 10):
            batch = many.receive_batch_nowait(size)
            assert isinstance(batch, ConsumedBatch) and batch.channel == "a"
            assert batch.payloads == [batch.message(i).payload for i in range(len(batch))]
            assert batch.id_bytes == [batch.message(i).msg_id.to_bytes() for i in range(len(batch))]
            got += [batch.message(i) for i in range(len(batch))]
        assert [(m.channel, m.msg_id, m.payload, dict(m.properties)) for m in got] == [
            (m.channel, m.msg_id, m.payload, dict(m.properties)) for m in expected
        ]
        assert [m.msg_id for m in got] == [RocksmqMessageID(i) for i in range(1, 7)]
        assert dict(got[2].properties) == {"k": "v"}
        assert len(many.receive_batch_nowait(10)) == 0
    finally:
        await client.close()


async def test_messages_prefetched_by_receive_come_first(tmp_path: Path) -> None:
    client: LogClient = open_client(str(tmp_path / "db"))
    try:
        producer = await client.create_producer("a")
        await producer.send_many([b"y%d" % i for i in range(1, 6)])
        consumer = await client.subscribe("a", "s", SubscriptionPosition.EARLIEST)
        assert (await consumer.receive()).payload == b"y1"  # prefetches the rest
        batch = consumer.receive_batch_nowait(2)
        assert batch.payloads == [b"y2", b"y3"]
        assert consumer.receive_batch_nowait(10).payloads == [b"y4", b"y5"]
        await producer.send(b"y6")
        assert consumer.receive_batch_nowait(10).payloads == [b"y6"]
    finally:
        await client.close()
