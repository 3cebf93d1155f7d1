"""DESIGN §7: the backend contract, pinned once and run against every backend."""

from __future__ import annotations

import asyncio

import pytest

from harness import BackendHarness
from helpers.loop_turns import other_task_turns
from msgstream import (
    InvalidChannelNameError,
    InvalidPositionError,
    MessageTooLargeError,
    StreamClosedError,
    StreamStateError,
    SubscriptionPosition,
    TopicNotFoundError,
)
from msgstream.contract.backend import Consumer
from msgstream.runtime import cooperate
from msgstream.runtime.scope import concurrently

EARLIEST = SubscriptionPosition.EARLIEST
LATEST = SubscriptionPosition.LATEST
UNKNOWN = SubscriptionPosition.UNKNOWN
TIMEOUT = 10.0


async def receive_n(consumer: Consumer, count: int) -> list[bytes]:
    return [(await asyncio.wait_for(consumer.receive(), TIMEOUT)).payload for _ in range(count)]


async def assert_nothing_pending(consumer: Consumer, wait: float = 0.2) -> None:
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(consumer.receive(), wait)


def payloads(count: int, start: int = 0) -> list[bytes]:
    return [f"m{i}".encode() for i in range(start, start + count)]


async def test_earliest_delivers_everything_in_order(backend: BackendHarness) -> None:
    client = backend.client()
    channel = backend.channel()
    producer = await client.create_producer(channel)
    ids = [await producer.send(p) for p in payloads(20)]
    assert ids == sorted(ids) and len(set(ids)) == 20
    consumer = await client.subscribe(channel, "sub", EARLIEST)
    received = [await asyncio.wait_for(consumer.receive(), TIMEOUT) for _ in range(20)]
    assert [m.payload for m in received] == payloads(20)
    assert [m.msg_id for m in received] == ids
    assert all(m.channel == channel for m in received)


async def test_send_many_returns_ordered_ids(backend: BackendHarness) -> None:
    client = backend.client()
    channel = backend.channel()
    producer = await client.create_producer(channel)
    first = await producer.send_many(payloads(5))
    second = await producer.send_many(payloads(5, 5))
    assert first + second == sorted(first + second)
    consumer = await client.subscribe(channel, "sub", EARLIEST)
    assert await receive_n(consumer, 10) == payloads(10)


async def test_send_many_of_nothing_sends_nothing(backend: BackendHarness) -> None:
    """An empty batch returns at once with no ids (on Kafka it once never completed)."""
    client = backend.client()
    channel = backend.channel()
    producer = await client.create_producer(channel)
    assert await asyncio.wait_for(producer.send_many([]), TIMEOUT) == []
    only = await producer.send(b"only")
    consumer = await client.subscribe(channel, "sub", EARLIEST)
    message = await asyncio.wait_for(consumer.receive(), TIMEOUT)
    assert (message.payload, message.msg_id) == (b"only", only)


async def test_latest_only_sees_messages_after_subscribing(backend: BackendHarness) -> None:
    client = backend.client()
    channel = backend.channel()
    producer = await client.create_producer(channel)
    await producer.send_many(payloads(3))
    consumer = await client.subscribe(channel, "sub", LATEST)
    await producer.send_many(payloads(2, 3))
    assert await receive_n(consumer, 2) == payloads(2, 3)
    await assert_nothing_pending(consumer)


async def test_latest_on_empty_channel_delivers_first_message(backend: BackendHarness) -> None:
    client = backend.client()
    channel = backend.channel()
    producer = await client.create_producer(channel)
    consumer = await client.subscribe(channel, "sub", LATEST)
    await producer.send(b"first")
    assert await receive_n(consumer, 1) == [b"first"]


async def test_latest_on_a_channel_not_yet_created(backend: BackendHarness) -> None:
    client = backend.client()
    channel = backend.channel()
    consumer = await client.subscribe(channel, "sub", LATEST)
    producer = await client.create_producer(channel)
    await producer.send(b"first")
    assert await receive_n(consumer, 1) == [b"first"]


async def test_receive_waits_for_a_later_send(backend: BackendHarness) -> None:
    client = backend.client()
    channel = backend.channel()
    producer = await client.create_producer(channel)
    consumer = await client.subscribe(channel, "sub", EARLIEST)
    pending = asyncio.ensure_future(consumer.receive())
    await asyncio.sleep(0.05)
    assert not pending.done()
    await producer.send(b"late")
    assert (await asyncio.wait_for(pending, TIMEOUT)).payload == b"late"


async def test_inclusive_and_exclusive_seek(backend: BackendHarness) -> None:
    client = backend.client()
    channel = backend.channel()
    producer = await client.create_producer(channel)
    ids = await producer.send_many(payloads(10))
    consumer = await client.subscribe(channel, "sub", UNKNOWN)
    await consumer.seek(ids[4], inclusive=True)
    assert await receive_n(consumer, 2) == [b"m4", b"m5"]
    await consumer.seek(ids[4], inclusive=False)
    assert await receive_n(consumer, 2) == [b"m5", b"m6"]


async def test_seek_backwards_and_forwards(backend: BackendHarness) -> None:
    client = backend.client()
    channel = backend.channel()
    producer = await client.create_producer(channel)
    ids = await producer.send_many(payloads(10))
    consumer = await client.subscribe(channel, "sub", EARLIEST)
    assert await receive_n(consumer, 8) == payloads(8)
    await consumer.seek(ids[1], inclusive=True)
    assert await receive_n(consumer, 2) == [b"m1", b"m2"]
    await consumer.seek(ids[8], inclusive=True)
    assert await receive_n(consumer, 2) == [b"m8", b"m9"]
    await assert_nothing_pending(consumer)


async def test_seek_to_earliest_after_messages_exist(backend: BackendHarness) -> None:
    client = backend.client()
    channel = backend.channel()
    producer = await client.create_producer(channel)
    await producer.send_many(payloads(5))
    consumer = await client.subscribe(channel, "sub", LATEST)
    await producer.send(b"m5")
    assert await receive_n(consumer, 1) == [b"m5"]
    await consumer.seek_to_earliest()
    assert await receive_n(consumer, 6) == payloads(6)
    other = await client.subscribe(channel, "other", UNKNOWN)
    await other.seek(client.earliest_message_id(), inclusive=True)
    assert await receive_n(other, 6) == payloads(6)


async def test_latest_msg_id_on_empty_and_filled_channel(backend: BackendHarness) -> None:
    client = backend.client()
    channel = backend.channel()
    producer = await client.create_producer(channel)
    consumer = await client.subscribe(channel, "sub", EARLIEST)
    assert await consumer.get_latest_msg_id() is None
    ids = await producer.send_many(payloads(3))
    assert await consumer.get_latest_msg_id() == ids[-1]
    last = await producer.send(b"more")
    assert await consumer.get_latest_msg_id() == last


async def test_newest_ids_of_several_channels_asked_at_once(backend: BackendHarness) -> None:
    """Calls on one client side by side (the Spark source's planner asks every channel
    at once): each gets its own channel's answer. On Kafka the channels' first offset
    lookups share the metadata updates of an offsets reader that has never seen them."""
    client = backend.client()
    channels = [backend.channel() for _ in range(4)]
    newest: list[object] = [None]
    for count, channel in enumerate(channels[1:], start=1):
        producer = await client.create_producer(channel)
        newest.append((await producer.send_many(payloads(count)))[-1])
    await client.create_producer(channels[0])  # exists, empty
    got = await concurrently(client.get_latest_msg_id(channel) for channel in channels)
    assert got == newest


async def test_properties_round_trip(backend: BackendHarness) -> None:
    client = backend.client()
    channel = backend.channel()
    producer = await client.create_producer(channel)
    props = {"trace-id": "abc-123", "unicode": "héllo ☃", "empty": ""}
    await producer.send(b"with", props)
    await producer.send(b"without")
    consumer = await client.subscribe(channel, "sub", EARLIEST)
    first = await asyncio.wait_for(consumer.receive(), TIMEOUT)
    second = await asyncio.wait_for(consumer.receive(), TIMEOUT)
    assert (first.payload, dict(first.properties)) == (b"with", props)
    assert (second.payload, dict(second.properties)) == (b"without", {})


async def test_two_subscriptions_each_see_every_message(backend: BackendHarness) -> None:
    client = backend.client()
    channel = backend.channel()
    producer = await client.create_producer(channel)
    first = await client.subscribe(channel, "a", EARLIEST)
    second = await client.subscribe(channel, "b", EARLIEST)
    await producer.send_many(payloads(7))
    assert await receive_n(first, 7) == payloads(7)
    assert await receive_n(second, 7) == payloads(7)


async def test_reopen_resumes_after_last_ack(backend: BackendHarness) -> None:
    channel = backend.channel()
    client = backend.client()
    producer = await client.create_producer(channel)
    await producer.send_many(payloads(10))
    consumer = await client.subscribe(channel, "sub", EARLIEST)
    received = [await asyncio.wait_for(consumer.receive(), TIMEOUT) for _ in range(6)]
    await consumer.ack(received[3])
    await consumer.close()
    await client.close()

    reopened = backend.client()
    again = await reopened.subscribe(channel, "sub", EARLIEST)
    assert await receive_n(again, 6) == payloads(6, 4)


async def test_new_subscription_position_is_ignored_for_existing_one(
    backend: BackendHarness,
) -> None:
    client = backend.client()
    channel = backend.channel()
    producer = await client.create_producer(channel)
    await producer.send_many(payloads(4))
    consumer = await client.subscribe(channel, "sub", LATEST)
    await consumer.close()
    await producer.send(b"m4")
    again = await client.subscribe(channel, "sub", EARLIEST)
    assert await receive_n(again, 1) == [b"m4"]


async def test_missing_topic_is_reported(backend: BackendHarness) -> None:
    client = backend.client()
    channel = backend.channel("missing")
    with pytest.raises(TopicNotFoundError, match=channel):
        await client.check_topic_valid(channel)  # type: ignore[attr-defined]
    producer = await client.create_producer(channel)
    consumer = await client.subscribe(channel, "sub", EARLIEST)
    await producer.send(b"x")
    await consumer.check_topic_valid()


async def test_message_id_bytes_round_trip_and_order(backend: BackendHarness) -> None:
    client = backend.client()
    channel = backend.channel()
    producer = await client.create_producer(channel)
    ids = await producer.send_many(payloads(3))
    for msg_id in ids:
        assert client.message_id_from_bytes(msg_id.to_bytes()) == msg_id
    assert ids[0] < ids[1] < ids[2]
    assert client.earliest_message_id() < ids[0]


async def test_seek_with_another_backends_id_is_a_clear_error(backend: BackendHarness) -> None:
    client = backend.client()
    channel = backend.channel()
    await client.create_producer(channel)
    consumer = await client.subscribe(channel, "sub", UNKNOWN)
    foreign = b"\x00not-an-id-of-any-backend"
    with pytest.raises(InvalidPositionError):
        client.message_id_from_bytes(foreign)
    other_backend_id = (b"m" if backend.name != "memory" else b"r") + (1).to_bytes(8, "big")
    with pytest.raises(InvalidPositionError, match="backend"):
        await consumer.seek(client.message_id_from_bytes(other_backend_id), inclusive=True)


async def test_unknown_position_needs_a_seek(backend: BackendHarness) -> None:
    client = backend.client()
    channel = backend.channel()
    producer = await client.create_producer(channel)
    ids = await producer.send_many(payloads(2))
    consumer = await client.subscribe(channel, "sub", UNKNOWN)
    with pytest.raises(StreamStateError, match="UNKNOWN"):
        await asyncio.wait_for(consumer.receive(), TIMEOUT)
    await consumer.seek(ids[1], inclusive=True)
    assert await receive_n(consumer, 1) == [b"m1"]


async def test_closed_consumer_and_client_raise(backend: BackendHarness) -> None:
    client = backend.client()
    channel = backend.channel()
    producer = await client.create_producer(channel)
    consumer = await client.subscribe(channel, "sub", EARLIEST)
    pending = asyncio.ensure_future(consumer.receive())
    await asyncio.sleep(0.05)
    await consumer.close()
    with pytest.raises(StreamClosedError, match=channel):
        await asyncio.wait_for(pending, TIMEOUT)
    with pytest.raises(StreamClosedError):
        await consumer.receive()
    await client.close()
    with pytest.raises(StreamClosedError):
        await producer.send(b"x")
    with pytest.raises(StreamClosedError):
        await client.subscribe(channel, "other", EARLIEST)


@pytest.mark.parametrize("name", ["", "has space", "a/b", ".", "..", "x" * 250, "é"])
async def test_invalid_channel_names_fail_before_any_io(backend: BackendHarness, name: str) -> None:
    client = backend.client()
    with pytest.raises(InvalidChannelNameError):
        await client.create_producer(name)
    with pytest.raises(InvalidChannelNameError):
        await client.subscribe(name, "sub", EARLIEST)


async def test_oversized_message_names_size_and_limit(backend: BackendHarness) -> None:
    client = backend.client()
    limit = backend.config.msgstream.max_message_bytes
    channel = backend.channel()
    producer = await client.create_producer(channel)
    with pytest.raises(MessageTooLargeError) as info:
        await producer.send(b"x" * (limit + 1))
    assert (info.value.size, info.value.limit, info.value.channel) == (limit + 1, limit, channel)
    assert str(limit) in str(info.value)


async def test_reading_an_empty_channel_from_earliest_waits_without_spinning(
    backend: BackendHarness,
) -> None:
    """A read position below the channel's first id with nothing stored after it: the
    consumer must wait on an event (the loop watch fails a busy loop), then deliver."""
    client = backend.client()
    channel = backend.channel()
    producer = await client.create_producer(channel)
    consumer = await client.subscribe(channel, "sub", UNKNOWN)
    await consumer.seek_to_earliest()
    await assert_nothing_pending(consumer, wait=0.3)
    await consumer.seek(client.earliest_message_id(), inclusive=True)
    pending = asyncio.ensure_future(consumer.receive())
    await asyncio.sleep(0.2)
    assert not pending.done()
    sent = await producer.send(b"first")
    message = await asyncio.wait_for(pending, TIMEOUT)
    assert (message.payload, message.msg_id) == (b"first", sent)


async def test_seek_past_the_channel_end_is_refused(backend: BackendHarness) -> None:
    """A position past the end would silently swallow the next messages: refused with an
    error naming the channel, the requested id and the end. (The short channel is made
    first so that, on Pulsar too, the long channel's ids sort after it.)"""
    client = backend.client()
    short, long = backend.channel("short"), backend.channel("long")
    short_producer = await client.create_producer(short)
    short_ids = await short_producer.send_many(payloads(2))
    long_ids = await (await client.create_producer(long)).send_many(payloads(10))
    consumer = await client.subscribe(short, "sub", UNKNOWN)
    with pytest.raises(InvalidPositionError, match=rf"{short}.*past the channel's end"):
        await consumer.seek(long_ids[-1], inclusive=True)
    await consumer.seek(short_ids[-1], inclusive=False)  # right at the end: fine, waits
    await assert_nothing_pending(consumer)
    await short_producer.send(b"next")
    assert await receive_n(consumer, 1) == [b"next"]


async def test_draining_a_backlog_lets_other_tasks_run(
    backend: BackendHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A receive served from a buffer completes inline; a drain loop must still yield (here
    on every call: the time slice is set to 0, so the test does not depend on speed)."""
    monkeypatch.setattr(cooperate, "SLICE_S", 0.0)
    client = backend.client()
    channel = backend.channel()
    producer = await client.create_producer(channel)
    await producer.send_many(payloads(600))
    consumer = await client.subscribe(channel, "sub", EARLIEST)
    async with other_task_turns() as turns:
        # No wait_for: it yields.
        received = [(await consumer.receive()).payload for _ in range(600)]
    assert received == payloads(600)
    assert turns.count >= 300  # at least every other receive let it run


async def test_lag_counts_exactly_the_messages_not_yet_acknowledged(
    backend: BackendHarness,
) -> None:
    """5 messages, a subscription seeked to the earliest one and nothing acked: lag 5 (it
    was 6 on the local backends, whose seek to the earliest id stored the cursor at 0)."""
    client = backend.client()
    channel = backend.channel()
    producer = await client.create_producer(channel)
    await producer.send_many(payloads(5))
    consumer = await client.subscribe(channel, "sub", UNKNOWN)
    await consumer.seek_to_earliest()
    assert await receive_n(consumer, 1) == [b"m0"]

    async def lag() -> int | None:
        infos = await client.list_subscriptions(channel)  # type: ignore[attr-defined]
        (info,) = [i for i in infos if i.name == "sub"]
        return info.lag  # type: ignore[no-any-return]

    assert await lag() == 5
    await consumer.ack(await asyncio.wait_for(consumer.receive(), TIMEOUT))  # acks m0 and m1
    for _ in range(100):  # Pulsar's client groups acknowledgements (100 ms) before sending
        if await lag() == 3:
            break
        await asyncio.sleep(0.1)
    assert await lag() == 3
