"""A stream's readers start small on a backlog: the first pack is cut once every channel
has shown a tick, not after each channel's first full batch was read and checked; the
batches then grow to the buffer's capacity, and every message comes once, in order."""

from __future__ import annotations

import asyncio

import pytest

from harness import BackendHarness
from msgstream import (
    DeleteMsg,
    MsgPack,
    MsgStream,
    SubscriptionPosition,
    TimeTickMsg,
    TsMsg,
    TtMsgStream,
    repack_by_first_key,
)
from msgstream.streams.reader import FIRST_READ, ChannelReader

TIMEOUT = 10.0
PER_CHANNEL = 3000
TICK_EVERY = 10

backends = pytest.mark.parametrize("backend", ["memory", "rocksmq"], indirect=True)


def backlog(channel: int) -> list[TsMsg]:
    """PER_CHANNEL small messages, a tick after every TICK_EVERY of them."""
    msgs: list[TsMsg] = []
    for i in range(PER_CHANNEL):
        ts = i + 1
        msgs.append(
            DeleteMsg(
                msg_id=channel * 100_000 + i,
                timestamp=ts,
                collection_name="c",
                primary_keys=[i],
                hash_keys=[channel],
            )
        )
        if ts % TICK_EVERY == 0:
            msgs.append(TimeTickMsg(timestamp=ts, hash_keys=[channel]))
    return msgs


def record_reads(reader: ChannelReader, sizes: list[int]) -> None:
    receive = reader._receive_nowait

    def recording(room: int) -> object:
        batch = receive(room)
        sizes.append(len(batch))
        return batch

    reader._receive_nowait = recording  # type: ignore[assignment,method-assign]


@backends
async def test_a_backlogs_first_pack_comes_before_full_reads(backend: BackendHarness) -> None:
    channels = backend.channels(4, "ramp")
    async with MsgStream(backend.client(), repack=repack_by_first_key) as producer:
        await producer.as_producer(channels)
        await producer.produce(MsgPack(msgs=[m for c in range(4) for m in backlog(c)]))
    stream = TtMsgStream(backend.client(), pursuit_lag_s=0)
    sizes: dict[str, list[int]] = {channel: [] for channel in channels}
    async with stream:
        await stream.as_consumer(channels, "sub", SubscriptionPosition.EARLIEST)
        for reader in stream._readers:  # before the reading tasks first run
            record_reads(reader, sizes[reader.channel])
        first = await asyncio.wait_for(anext(stream), TIMEOUT)
        assert first.end_ts == TICK_EVERY
        # Each channel's first tick is its 11th message: a read of 1 and one of
        # FIRST_READ hold it. Full first batches read 1 + 1,024 messages of each channel
        # before the stream could look (the readers run a few rounds before it does).
        assert stream.read_stats.received < 4 * 1024
        deletes = [m.msg_id for m in first.msgs]
        while len(deletes) < 4 * PER_CHANNEL:
            pack = await asyncio.wait_for(anext(stream), TIMEOUT)
            deletes += [m.msg_id for m in pack.msgs]
    assert sorted(deletes) == [c * 100_000 + i for c in range(4) for i in range(PER_CHANNEL)]
    for channel, read in sizes.items():
        grown = [size for size in read if size]
        assert grown[:3] == [1, FIRST_READ, 2 * FIRST_READ], channel
        assert max(grown) >= 16 * FIRST_READ, channel  # up to what the buffer has room for
