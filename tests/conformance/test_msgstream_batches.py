"""``MsgStream.batches``: many messages a pack, on every backend."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from harness import BackendHarness
from msgstream import (
    DeleteMsg,
    MsgPack,
    MsgStream,
    StreamClosedError,
    StreamStateError,
    SubscriptionPosition,
    TimeTickMsg,
    TsMsg,
    TtMsgStream,
)

TIMEOUT = 10.0
EARLIEST = SubscriptionPosition.EARLIEST


def stream(backend: BackendHarness, **options: object) -> MsgStream:
    return MsgStream(backend.client(), **options)  # type: ignore[arg-type]


def delete(msg_id: int, channel: int) -> DeleteMsg:
    return DeleteMsg(
        msg_id=msg_id,
        timestamp=1000 + msg_id,
        collection_name="c",
        primary_keys=[msg_id],
        hash_keys=[channel],
    )


def workload(channels: int, count: int) -> list[TsMsg]:
    """``count`` Deletes dealt round the channels, with a tick on each channel after
    every tenth (so a channel's rows change plan now and then)."""
    msgs: list[TsMsg] = []
    for i in range(count):
        msgs.append(delete(i, i % channels))
        if i % 10 == 9:
            msgs.append(
                TimeTickMsg(msg_id=10_000 + i, timestamp=1000 + i, hash_keys=[i % channels])
            )
    return msgs


async def collect(packs: AsyncIterator[MsgPack], count: int) -> list[MsgPack]:
    """Packs from ``packs`` until they hold ``count`` messages."""
    got: list[MsgPack] = []
    async with asyncio.timeout(TIMEOUT):
        while sum(len(pack.msgs) for pack in got) < count:
            got.append(await anext(packs))
    return got


def by_channel(msgs: list[TsMsg]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for msg in msgs:
        assert msg.position is not None
        out.setdefault(msg.position.channel, []).append(msg.msg_id)
    return out


async def test_batches_hand_out_every_message_once_in_its_channels_order(
    backend: BackendHarness,
) -> None:
    channels = backend.channels(3)
    sent = workload(3, 60)
    async with stream(backend) as producer, stream(backend) as consumer:
        await producer.as_producer(channels)
        await producer.produce(MsgPack(msgs=sent))
        await consumer.as_consumer(channels, "sub", EARLIEST)
        packs = await collect(consumer.batches(max_messages=7), len(sent))
    got = [msg for pack in packs for msg in pack.msgs]
    assert len(got) == len(sent)
    expected = {channels[c]: [m.msg_id for m in sent if m.hash_keys == [c]] for c in range(3)}
    assert by_channel(got) == expected
    for pack in packs:
        assert 1 <= len(pack.msgs) <= 7
        runs: dict[str, list[TsMsg]] = {}
        for msg in pack.msgs:
            assert msg.position is not None
            runs.setdefault(msg.position.channel, []).append(msg)
        # A channel's messages stand together in a pack.
        assert sum(len(run) for run in runs.values()) == len(pack.msgs)
        assert [m.position.channel for m in pack.msgs if m.position] == [
            channel for channel, run in runs.items() for _ in run
        ]
        assert pack.start_positions == [run[0].position for run in runs.values()]
        assert pack.end_positions == [run[-1].position for run in runs.values()]
        assert pack.ack_positions == pack.end_positions
        assert pack.begin_ts == min(m.begin_ts for m in pack.msgs)
        assert pack.end_ts == max(m.end_ts for m in pack.msgs)
    originals = {m.msg_id: m for m in sent}
    for msg in got:  # each whole, as sent
        original = originals[msg.msg_id]
        assert (type(msg), msg.timestamp, msg.time_range()) == (
            type(original),
            original.timestamp,
            original.time_range(),
        )
        if isinstance(msg, DeleteMsg):
            assert list(msg.primary_keys) == list(original.primary_keys)  # type: ignore[attr-defined]


async def test_one_at_a_time_then_batches_continue_where_it_stopped(
    backend: BackendHarness,
) -> None:
    channel = backend.channel()
    sent = workload(1, 80)
    async with stream(backend) as producer, stream(backend) as consumer:
        await producer.as_producer([channel])
        await producer.produce(MsgPack(msgs=sent))
        await consumer.as_consumer([channel], "sub", EARLIEST)
        first = [(await asyncio.wait_for(anext(consumer), TIMEOUT)).msgs[0] for _ in range(3)]
        rest = await collect(consumer.batches(max_messages=50), len(sent) - 3)
    ids = [m.msg_id for m in first] + [m.msg_id for pack in rest for m in pack.msgs]
    assert ids == [m.msg_id for m in sent]


async def test_acking_a_batch_resumes_after_its_last_message(backend: BackendHarness) -> None:
    channel = backend.channel()
    sent = [delete(i, 0) for i in range(12)]
    async with stream(backend) as producer:
        await producer.as_producer([channel])
        await producer.produce(MsgPack(msgs=sent))
    async with stream(backend) as first:
        await first.as_consumer([channel], "sub", EARLIEST)
        packs = await collect(first.batches(max_messages=5), 5)  # what the reader holds
        taken = [m.msg_id for pack in packs for m in pack.msgs]
        assert taken == list(range(len(taken)))
        await first.ack(packs[-1])
    async with stream(backend) as second:
        await second.as_consumer([channel], "sub", EARLIEST)
        rest = await collect(second.batches(), 12 - len(taken))
        assert [m.msg_id for pack in rest for m in pack.msgs] == list(range(len(taken), 12))


async def test_batches_end_at_the_stops(backend: BackendHarness) -> None:
    channel = backend.channel()
    async with stream(backend) as producer:
        await producer.as_producer([channel])
        await producer.produce(MsgPack(msgs=[delete(i, 0) for i in range(9)]))
        stops = {channel: await producer.get_latest_msg_id(channel)}
        await producer.produce(MsgPack(msgs=[delete(i, 0) for i in range(9, 12)]))
    async with stream(backend, receive_buffer_size=2) as reader:  # several receives
        await reader.as_consumer([channel], "sub", EARLIEST, stop_at=stops)

        async def drain() -> list[int]:
            return [m.msg_id async for pack in reader.batches(4) for m in pack.msgs]

        assert await asyncio.wait_for(drain(), TIMEOUT) == list(range(9))


async def test_close_ends_a_waiting_batch_iteration(backend: BackendHarness) -> None:
    s = stream(backend)
    await s.as_consumer([backend.channel()], "sub", EARLIEST, missing="create")
    packs = s.batches()
    waiting = asyncio.ensure_future(anext(packs))
    await asyncio.sleep(0.05)
    await s.close()
    with pytest.raises(StopAsyncIteration):
        await asyncio.wait_for(waiting, TIMEOUT)


async def test_batches_refuse_bad_sizes_and_the_wrong_state(backend: BackendHarness) -> None:
    s = stream(backend)
    with pytest.raises(StreamStateError, match="as_consumer"):
        s.batches()
    await s.as_consumer([backend.channel()], "sub", EARLIEST, missing="create")
    with pytest.raises(ValueError, match="max_messages must be at least 1, got 0"):
        s.batches(0)
    for bad in (True, 2.5, "8"):
        with pytest.raises(TypeError, match="max_messages must be an int"):
            s.batches(bad)  # type: ignore[arg-type]
    await s.close()
    with pytest.raises(StreamClosedError, match="MsgStream is closed"):
        s.batches()
    tt = TtMsgStream(backend.client())
    try:
        with pytest.raises(StreamStateError, match="cut at time ticks"):
            tt.batches()
    finally:
        await tt.close()
