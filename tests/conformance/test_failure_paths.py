"""Failure paths: a stream recovers from errors and callbacks cannot lose messages."""

from __future__ import annotations

import asyncio

import pytest

from harness import BackendHarness
from msgstream import (
    InvalidPositionError,
    MsgPack,
    MsgPosition,
    MsgStream,
    StreamStateError,
    SubscriptionPosition,
    TtMsgStream,
    repack_by_first_key,
)
from workload import Event, to_message

TIMEOUT = 10.0
EARLIEST = SubscriptionPosition.EARLIEST


async def produce(backend: BackendHarness, channels: list[str], events: list[Event]) -> None:
    async with MsgStream(backend.client(), repack=repack_by_first_key) as producer:
        await producer.as_producer(channels)
        for event in events:
            await producer.produce(MsgPack.of(to_message(event)))


async def next_ids(stream: MsgStream, count: int) -> list[int]:
    return [(await asyncio.wait_for(anext(stream), TIMEOUT)).msgs[0].msg_id for _ in range(count)]


async def test_a_failed_seek_leaves_every_channel_reading(backend: BackendHarness) -> None:
    channels = backend.channels(2)
    await produce(backend, channels, [Event(0, False, 1, 1), Event(1, False, 1, 2)])
    async with MsgStream(backend.client()) as stream:
        await stream.as_consumer(channels, "sub", EARLIEST)
        good = MsgPosition(channels[0], backend.client().earliest_message_id().to_bytes())
        bad = MsgPosition(channels[1], b"\x00garbage")
        with pytest.raises(InvalidPositionError):
            await stream.seek([good, bad])
        assert sorted(await next_ids(stream, 2)) == [1, 2]


async def test_a_reader_error_is_raised_once_then_the_stream_recovers(
    backend: BackendHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    channel = backend.channel()
    client = backend.client()
    await produce(backend, [channel], [Event(0, False, 1, 1), Event(0, False, 2, 2)])
    async with MsgStream(client, owns_client=False) as stream:
        await stream.as_consumer([channel], "sub", SubscriptionPosition.UNKNOWN)
        consumer = stream._readers[0].consumer
        healthy = consumer.receive_nowait
        failures = iter([OSError("transient read failure")])

        def flaky(limit: int) -> list[object]:
            for failure in failures:
                raise failure
            return healthy(limit)  # type: ignore[return-value]

        monkeypatch.setattr(consumer, "receive_nowait", flaky)
        await stream.seek([MsgPosition(channel, client.earliest_message_id().to_bytes())])
        with pytest.raises(OSError, match="transient"):
            await asyncio.wait_for(anext(stream), TIMEOUT)
        assert await next_ids(stream, 2) == [1, 2]


async def test_a_raising_on_late_callback_does_not_lose_the_late_message(
    backend: BackendHarness,
) -> None:
    channels = backend.channels(1)
    await produce(
        backend, channels, [Event(0, True, 10, 1), Event(0, False, 5, 2), Event(0, True, 20, 3)]
    )

    def explode(*_: object) -> None:
        raise RuntimeError("callback bug")

    async with TtMsgStream(backend.client(), on_late=explode, pursuit_lag_s=0) as stream:
        await stream.as_consumer(channels, "sub", EARLIEST)
        first = await asyncio.wait_for(anext(stream), TIMEOUT)
        second = await asyncio.wait_for(anext(stream), TIMEOUT)
    assert ([m.msg_id for m in first.msgs], [m.msg_id for m in second.msgs]) == ([], [2])


async def test_a_raising_on_bad_message_callback_does_not_lose_the_next_messages(
    backend: BackendHarness,
) -> None:
    channel = backend.channel()
    client = backend.client()
    raw = await client.create_producer(channel)
    await raw.send(b"not a message")
    await produce(backend, [channel], [Event(0, False, 1, 5), Event(0, False, 2, 6)])

    def explode(*_: object) -> None:
        raise RuntimeError("callback bug")

    async with MsgStream(backend.client(), on_bad_message=explode) as stream:
        await stream.as_consumer([channel], "sub", EARLIEST)
        assert await next_ids(stream, 2) == [5, 6]
        assert stream.read_stats.decode_errors == 1


async def test_channel_lists_must_be_unique_and_non_empty(backend: BackendHarness) -> None:
    channel = backend.channel()
    for stream in (MsgStream(backend.client()), TtMsgStream(backend.client())):
        async with stream:
            with pytest.raises(StreamStateError, match="more than once"):
                await stream.as_consumer([channel, channel], "sub")
            with pytest.raises(StreamStateError, match="at least one"):
                await stream.as_consumer([], "sub")
            assert stream.consumer_channels == []


async def test_time_tick_streams_refuse_an_exclusive_seek(backend: BackendHarness) -> None:
    channels = backend.channels(1)
    await produce(backend, channels, [Event(0, True, 10, 1)])
    async with TtMsgStream(backend.client(), pursuit_lag_s=0) as stream:
        await stream.as_consumer(channels, "sub", EARLIEST)
        pack = await asyncio.wait_for(anext(stream), TIMEOUT)
        with pytest.raises(InvalidPositionError, match="inclusively"):
            await stream.seek(pack.end_positions, include_current=False)


async def test_acks_never_move_a_subscription_back(backend: BackendHarness) -> None:
    channel = backend.channel()
    await produce(backend, [channel], [Event(0, False, t, t) for t in range(1, 6)])
    async with MsgStream(backend.client()) as stream:
        await stream.as_consumer([channel], "sub", EARLIEST)
        packs = [await asyncio.wait_for(anext(stream), TIMEOUT) for _ in range(3)]
        await stream.ack(packs[2])
        await stream.ack(packs[0])
    async with MsgStream(backend.client()) as reopened:
        await reopened.as_consumer([channel], "sub", EARLIEST)
        assert await next_ids(reopened, 2) == [4, 5]
