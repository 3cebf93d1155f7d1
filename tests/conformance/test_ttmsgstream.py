"""DESIGN §6: TtMsgStream scenarios, run on every backend."""

from __future__ import annotations

import asyncio
import time

import pytest

from harness import BackendHarness
from msgstream import (
    LateMessageError,
    MessageID,
    MsgPack,
    MsgStream,
    StreamStateError,
    SubscriptionPosition,
    TimeTickEmitter,
    TsMsg,
    TtMsgStream,
    compose_ts,
    positions_from_json,
    positions_to_json,
    repack_by_first_key,
)
from workload import Event, regular_script, to_message

TIMEOUT = 10.0
Key = tuple[str, int]


def tt_stream(backend: BackendHarness, **options: object) -> TtMsgStream:
    options.setdefault("pursuit_lag_s", 0)
    return TtMsgStream(backend.client(), **options)  # type: ignore[arg-type]


async def produce_script(backend: BackendHarness, channels: list[str], script: list[Event]) -> None:
    async with MsgStream(backend.client(), repack=repack_by_first_key) as producer:
        await producer.as_producer(channels)
        for event in script:
            await producer.produce(MsgPack.of(to_message(event)))


def key(msg: TsMsg) -> Key:
    assert msg.position is not None
    return msg.position.channel, msg.msg_id


async def read_until(stream: TtMsgStream, data_count: int) -> list[MsgPack]:
    packs: list[MsgPack] = []
    seen = 0
    while seen < data_count:
        pack = await asyncio.wait_for(anext(stream), TIMEOUT)
        packs.append(pack)
        seen += len(pack.msgs)
    return packs


def check_packs(packs: list[MsgPack], channels: list[str]) -> None:
    previous = 0
    for pack in packs:
        assert pack.begin_ts == previous < pack.end_ts
        previous = pack.end_ts
        order = [(m.timestamp, channels.index(key(m)[0])) for m in pack.msgs]
        assert order == sorted(order)
        for msg in pack.msgs:
            assert pack.begin_ts < msg.timestamp <= pack.end_ts
        assert [p.channel for p in pack.end_positions] == channels
        assert all(p.timestamp == pack.end_ts for p in pack.end_positions)
        assert all(p.timestamp == pack.begin_ts for p in pack.start_positions)


async def test_identical_ticks_give_one_pack_per_tick(backend: BackendHarness) -> None:
    channels = backend.channels(3)
    script = []
    msg_id = 0
    for t in (10, 20, 30):
        for c in range(3):
            for ts in (t - 5, t - 2):
                msg_id += 1
                script.append(Event(c, False, ts, msg_id))
        for c in range(3):
            msg_id += 1
            script.append(Event(c, True, t, msg_id))
    await produce_script(backend, channels, script)
    async with tt_stream(backend) as stream:
        await stream.as_consumer(channels, "sub", SubscriptionPosition.EARLIEST)
        packs = await read_until(stream, 18)
    assert [(p.begin_ts, p.end_ts) for p in packs] == [(0, 10), (10, 20), (20, 30)]
    check_packs(packs, channels)
    assert [(key(m)[0], m.timestamp) for m in packs[0].msgs] == [
        (channels[0], 5),
        (channels[1], 5),
        (channels[2], 5),
        (channels[0], 8),
        (channels[1], 8),
        (channels[2], 8),
    ]


async def test_resume_contract_at_every_pack_boundary(backend: BackendHarness) -> None:
    channels = backend.channels(3)
    script = regular_script(3, ticks=6, per_tick=3)
    data = [e for e in script if not e.tick]
    await produce_script(backend, channels, script)
    async with tt_stream(backend) as stream:
        await stream.as_consumer(channels, "full", SubscriptionPosition.EARLIEST)
        packs = await read_until(stream, len(data))
    check_packs(packs, channels)
    everything = [key(m) for p in packs for m in p.msgs]
    assert sorted(everything) == sorted((channels[e.channel], e.msg_id) for e in data)
    assert len(packs) >= 5

    emitted = 0
    for index, pack in enumerate(packs[:-1]):
        emitted += len(pack.msgs)
        checkpoint = positions_to_json(pack.end_positions)
        async with tt_stream(backend) as resumed:
            await resumed.as_consumer(channels, f"resume-{index}", SubscriptionPosition.UNKNOWN)
            await resumed.seek(positions_from_json(checkpoint))
            rest = await read_until(resumed, len(data) - emitted)
            assert rest[0].begin_ts == pack.end_ts
            assert [key(m) for p in rest for m in p.msgs] == everything[emitted:]


async def test_stream_with_different_tick_values_does_not_stall(backend: BackendHarness) -> None:
    channels = backend.channels(2)
    script = [
        Event(0, False, 3, 1),
        Event(0, True, 10, 2),
        Event(1, False, 4, 3),
        Event(1, True, 25, 4),
        Event(0, False, 12, 5),
        Event(0, True, 30, 6),
    ]
    await produce_script(backend, channels, script)
    async with tt_stream(backend) as stream:
        await stream.as_consumer(channels, "sub", SubscriptionPosition.EARLIEST)
        packs = await read_until(stream, 3)
    assert packs[-1].end_ts == 25
    assert sorted(key(m) for p in packs for m in p.msgs) == [
        (channels[0], 1),
        (channels[0], 5),
        (channels[1], 3),
    ]


async def test_late_message_is_delivered_and_counted(backend: BackendHarness) -> None:
    channels = backend.channels(1)
    script = [Event(0, True, 10, 1), Event(0, False, 7, 2), Event(0, True, 20, 3)]
    await produce_script(backend, channels, script)
    late: list[LateMessageError] = []
    async with tt_stream(backend, on_late=lambda c, m, e: late.append(e)) as stream:
        await stream.as_consumer(channels, "sub", SubscriptionPosition.EARLIEST)
        packs = await read_until(stream, 1)
        assert [[m.msg_id for m in p.msgs] for p in packs] == [[], [2]]
        assert stream.barrier.stats.late_delivered == 1
    assert [(e.channel, e.msg_id, e.timestamp, e.last_tick) for e in late] == [
        (channels[0], 2, 7, 10)
    ]


@pytest.mark.parametrize("after_tick", [[], [Event(0, False, 15, 2)]], ids=["tick", "data"])
async def test_a_late_message_after_a_checkpoint_is_delivered_on_resume(
    backend: BackendHarness, after_tick: list[Event]
) -> None:
    """A message stamped below the tick that closed a checkpointed pack, written after the
    pack was cut, is in no pack yet: a stream resumed from the checkpoint delivers it (as
    late), as the live stream does -- whether the end position is the closing tick itself
    or data read after it."""
    channels = backend.channels(1)
    await produce_script(backend, channels, [Event(0, True, 10, 1), *after_tick])
    async with tt_stream(backend) as live:
        await live.as_consumer(channels, "live", SubscriptionPosition.EARLIEST)
        first = await asyncio.wait_for(anext(live), TIMEOUT)
        assert (first.begin_ts, first.end_ts, first.msgs) == (0, 10, [])
        checkpoint = positions_to_json(first.end_positions)
        await produce_script(backend, channels, [Event(0, False, 7, 3), Event(0, True, 20, 4)])
        expected = sorted([3, *(e.msg_id for e in after_tick)])
        rest = await read_until(live, len(expected))
        assert sorted(m.msg_id for p in rest for m in p.msgs) == expected
    async with tt_stream(backend) as resumed:
        await resumed.as_consumer(channels, "resumed", SubscriptionPosition.UNKNOWN)
        await resumed.seek(positions_from_json(checkpoint))
        again = await read_until(resumed, len(expected))
        assert again[0].begin_ts == 10 and again[-1].end_ts == 20
        assert sorted(m.msg_id for p in again for m in p.msgs) == expected
        assert resumed.barrier.stats.late_delivered == 1
        assert resumed.barrier.stats.resume_skipped == 0


async def test_late_message_rejected_by_policy(backend: BackendHarness) -> None:
    channels = backend.channels(1)
    script = [
        Event(0, True, 10, 1),
        Event(0, False, 7, 2),
        Event(0, False, 15, 3),
        Event(0, True, 20, 4),
    ]
    await produce_script(backend, channels, script)
    rejected: list[int] = []
    async with tt_stream(
        backend, late_policy="reject", on_late=lambda c, m, e: rejected.append(m.msg_id)
    ) as stream:
        await stream.as_consumer(channels, "sub", SubscriptionPosition.EARLIEST)
        packs = await read_until(stream, 1)
        assert [m.msg_id for p in packs for m in p.msgs] == [3]
        assert stream.barrier.stats.late_rejected == 1
    assert rejected == [2]


async def test_repeated_dml_within_a_pack_is_dropped(backend: BackendHarness) -> None:
    channels = backend.channels(2)
    script = [
        Event(0, False, 5, 1),
        Event(0, False, 5, 1),
        Event(1, False, 6, 1),
        Event(0, True, 10, 2),
        Event(1, True, 10, 3),
    ]
    await produce_script(backend, channels, script)
    async with tt_stream(backend) as stream:
        await stream.as_consumer(channels, "sub", SubscriptionPosition.EARLIEST)
        packs = await read_until(stream, 2)
        assert [key(m) for m in packs[0].msgs] == [(channels[0], 1), (channels[1], 1)]
        assert stream.barrier.stats.duplicates_dropped == 1


async def test_emitter_driven_producers_lose_nothing(backend: BackendHarness) -> None:
    channels = backend.channels(4)
    producer = MsgStream(backend.client(), repack=repack_by_first_key)
    await producer.as_producer(channels)
    sent: list[Key] = []

    async def worker(worker_id: int, emitter: TimeTickEmitter) -> None:
        for i in range(40):
            async with emitter.reserve() as ts:
                msg = to_message(Event(i % 4, False, ts, worker_id * 1000 + i))
                result = await producer.produce(MsgPack.of(msg))
                sent.extend((channel, msg.msg_id) for channel in result)
            await asyncio.sleep(0)

    async with tt_stream(backend) as consumer:
        await consumer.as_consumer(channels, "sub", SubscriptionPosition.LATEST)
        async with TimeTickEmitter(producer, interval_s=0.005) as emitter:
            await asyncio.gather(*(worker(w, emitter) for w in range(3)))
        assert emitter.ticks_sent >= 1
        packs = await read_until(consumer, len(sent))
    await producer.close()
    got = [key(m) for p in packs for m in p.msgs]
    assert sorted(got) == sorted(sent) and len(got) == 120
    check_packs(packs, channels)


async def test_pursuit_mode_merges_packs_when_lagging(backend: BackendHarness) -> None:
    channels = backend.channels(2)
    old = compose_ts(int(time.time() * 1000) - 60_000)
    script = [
        Event(c, tick, old + t * 10 + (0 if tick else -1), t * 10 + c * 2 + int(tick))
        for t in range(1, 6)
        for c in range(2)
        for tick in (False, True)
    ]
    await produce_script(backend, channels, script)
    async with tt_stream(backend, pursuit_lag_s=1.0) as stream:
        await stream.as_consumer(channels, "sub", SubscriptionPosition.EARLIEST)
        packs = await read_until(stream, 10)
        assert stream.pursuit_merges >= 1
    assert len(packs) < 5
    assert sorted(key(m) for p in packs for m in p.msgs) == sorted(
        (channels[e.channel], e.msg_id) for e in script if not e.tick
    )
    assert packs[0].begin_ts == 0 and packs[-1].end_ts == old + 50


async def test_seek_to_a_channel_not_consumed_is_an_error(backend: BackendHarness) -> None:
    channels = backend.channels(1)
    await produce_script(backend, channels, [Event(0, True, 10, 1)])
    async with tt_stream(backend) as stream:
        await stream.as_consumer(channels, "sub", SubscriptionPosition.EARLIEST)
        pack = await asyncio.wait_for(anext(stream), TIMEOUT)
        moved = [
            p.__class__(backend.channel("other"), p.msg_id, p.msg_group, p.timestamp)
            for p in pack.end_positions
        ]
        with pytest.raises(ValueError, match=r"not consumed|missing"):
            await stream.seek(moved)
        with pytest.raises(ValueError, match="all its channels at once"):
            await stream.seek([*pack.end_positions, *pack.end_positions])
        with pytest.raises(ValueError, match=r"missing \['"):
            await stream.seek([])


async def test_acking_a_pack_then_reopening_the_subscription_loses_nothing(
    backend: BackendHarness,
) -> None:
    channels = backend.channels(2)
    first = [Event(0, False, 10, 1), Event(0, True, 20, 2), Event(0, False, 30, 3)]
    await produce_script(backend, channels, [*first, Event(1, True, 20, 4)])
    async with tt_stream(backend) as stream:
        await stream.as_consumer(channels, "sub", SubscriptionPosition.EARLIEST)
        pack = await asyncio.wait_for(anext(stream), TIMEOUT)
        assert [key(m) for m in pack.msgs] == [(channels[0], 1)]
        await stream.ack(pack)
    await produce_script(backend, channels, [Event(0, True, 40, 5), Event(1, True, 40, 6)])
    async with tt_stream(backend) as reopened:
        await reopened.as_consumer(channels, "sub", SubscriptionPosition.EARLIEST)
        rest = await read_until(reopened, 1)
    assert [key(m) for p in rest for m in p.msgs] == [(channels[0], 3)]


async def latest_ids(backend: BackendHarness, channels: list[str]) -> dict[str, MessageID | None]:
    client = backend.client()
    try:
        return {c: await client.get_latest_msg_id(c) for c in channels}
    finally:
        await client.close()


async def read_to_the_end(stream: TtMsgStream) -> list[MsgPack]:
    """Every pack of a bounded stream, then the stream's end (timed out if it never ends)."""

    async def drain() -> list[MsgPack]:
        return [pack async for pack in stream]

    return await asyncio.wait_for(drain(), TIMEOUT)


# Produced before the stops are taken: channel 0 ticks at 10, 20 and 40 (records at 35
# and 45 above 30), channel 1 at 10 and 30. Every channel reached 30, so a reading bounded
# by these stops ends with the pack that closes at 30; 35 and 45 wait for a tick channel 1
# only gets past its stop.
BEFORE_STOPS = [
    Event(0, False, 5, 1),
    Event(1, False, 6, 2),
    Event(0, True, 10, 3),
    Event(1, True, 10, 4),
    Event(0, False, 15, 5),
    Event(0, True, 20, 6),
    Event(1, False, 25, 7),
    Event(0, False, 28, 8),
    Event(1, True, 30, 9),
    Event(0, False, 35, 10),
    Event(0, True, 40, 11),
    Event(0, False, 45, 12),
]
AFTER_STOPS = [Event(1, False, 33, 13), Event(1, True, 50, 14), Event(0, True, 50, 15)]


async def test_bounded_reading_ends_at_the_last_tick_every_channel_reached(
    backend: BackendHarness,
) -> None:
    channels = backend.channels(2)
    await produce_script(backend, channels, BEFORE_STOPS)
    stops = await latest_ids(backend, channels)
    await produce_script(backend, channels, AFTER_STOPS)  # past the stops: never read
    async with tt_stream(backend) as stream:
        await stream.as_consumer(channels, "sub", SubscriptionPosition.EARLIEST, stop_at=stops)
        packs = await read_to_the_end(stream)
        with pytest.raises(StopAsyncIteration):
            await anext(stream)  # ended for good
    assert packs[0].end_ts == 10 and packs[-1].end_ts == 30
    check_packs(packs, channels)
    assert [key(m)[1] for p in packs for m in p.msgs] == [1, 2, 5, 7, 8]

    # Resumed from the last pack's end, with the same stops: nothing more is due.
    async with tt_stream(backend) as resumed:
        await resumed.as_consumer(channels, "again", SubscriptionPosition.UNKNOWN, stop_at=stops)
        await resumed.seek(packs[-1].end_positions)
        assert await read_to_the_end(resumed) == []

    # Resumed from the first pack's end: the rest up to the stops, exactly once.
    async with tt_stream(backend) as resumed:
        await resumed.as_consumer(channels, "third", SubscriptionPosition.UNKNOWN, stop_at=stops)
        await resumed.seek(packs[0].end_positions)
        rest = await read_to_the_end(resumed)
    assert [key(m)[1] for p in rest for m in p.msgs] == [5, 7, 8]

    # Unbounded, the same channels go on past the stops.
    async with tt_stream(backend) as unbounded:
        await unbounded.as_consumer(channels, "all", SubscriptionPosition.EARLIEST)
        everything = await read_until(unbounded, 8)
    assert [key(m)[1] for p in everything for m in p.msgs] == [1, 2, 5, 7, 8, 13, 10, 12]


async def test_bounded_reading_of_an_empty_channel_delivers_nothing(
    backend: BackendHarness,
) -> None:
    channels = backend.channels(2)
    await produce_script(backend, channels, [Event(0, False, 5, 1), Event(0, True, 10, 2)])
    stops = await latest_ids(backend, channels)
    assert stops[channels[1]] is None
    async with tt_stream(backend) as stream:
        await stream.as_consumer(channels, "sub", SubscriptionPosition.EARLIEST, stop_at=stops)
        assert await read_to_the_end(stream) == []
    async with tt_stream(backend) as stream:
        await stream.as_consumer(
            channels[:1],
            "one",
            SubscriptionPosition.EARLIEST,
            stop_at={channels[0]: stops[channels[0]]},
        )
        packs = await read_to_the_end(stream)
    assert [[key(m)[1] for m in p.msgs] for p in packs] == [[1]]


async def test_bounded_reading_needs_one_stop_per_channel(backend: BackendHarness) -> None:
    channels = backend.channels(2)
    await produce_script(backend, channels, [Event(0, True, 10, 1), Event(1, True, 10, 2)])
    stops = await latest_ids(backend, channels)
    async with tt_stream(backend) as stream:
        with pytest.raises(StreamStateError, match=r"missing \['.*'\], not consumed \[\]"):
            await stream.as_consumer(channels, "sub", stop_at={channels[0]: stops[channels[0]]})
        with pytest.raises(StreamStateError, match=r"missing \[\], not consumed \['other'\]"):
            await stream.as_consumer(channels, "sub", stop_at={**stops, "other": None})
        assert stream.consumer_channels == []
