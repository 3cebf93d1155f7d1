"""Memory is bounded in bytes: receive buffers and the time-tick barrier stop reading a
channel at their byte limits (backpressure on the reader), so large messages or a
channel that never ticks cannot grow memory; once the silent channel ticks, every
message is delivered exactly once, in order."""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from typing import Any

import pytest

from harness import BackendHarness
from msgstream import (
    DeleteMsg,
    MsgPack,
    MsgPosition,
    MsgStream,
    SubscriptionPosition,
    TimeTickMsg,
    TsMsg,
    TtMsgStream,
    encode,
    repack_by_first_key,
)
from msgstream.configuration.config import config_from_dict
from msgstream.errors import ConfigError
from msgstream.streams.factory import new_msgstream, new_ttmsgstream
from msgstream.timetick.barrier import TickBarrier
from msgstream.wire.rows import RowQueue, Rows

TIMEOUT = 10.0
PAD = "x" * 4000  # a message of about 4 KB
READER_BYTES = 20_000
BARRIER_BYTES = 30_000
PER_CHANNEL = 40  # 160 KB a channel: far above both limits
TICK_EVERY = 4

backends = pytest.mark.parametrize("backend", ["memory", "rocksmq"], indirect=True)


def big(channel: int, msg_id: int, ts: int) -> DeleteMsg:
    return DeleteMsg(
        msg_id=msg_id, timestamp=ts, collection_name=PAD, primary_keys=[msg_id], hash_keys=[channel]
    )


MSG_BYTES = len(encode(big(0, 1, 1)))


def channel_script(channel: int) -> list[TsMsg]:
    """PER_CHANNEL big messages, a tick after every TICK_EVERY of them (ts 1, 2, ...)."""
    msgs: list[TsMsg] = []
    ts = 0
    for i in range(PER_CHANNEL):
        ts += 1
        msgs.append(big(channel, channel * 1000 + i, ts))
        if (i + 1) % TICK_EVERY == 0:
            ts += 1
            msgs.append(TimeTickMsg(timestamp=ts, hash_keys=[channel]))
    return msgs


async def produce(backend: BackendHarness, channels: list[str], msgs: list[TsMsg]) -> None:
    async with MsgStream(backend.client(), repack=repack_by_first_key) as producer:
        await producer.as_producer(channels)
        await producer.produce(MsgPack(msgs=msgs))


class WatchedQueue(RowQueue):
    """A reader's buffer that records the most bytes it ever held."""

    def __init__(self, peaks: dict[str, int], channel: str) -> None:
        super().__init__()
        self.peaks, self.channel = peaks, channel

    def append(self, rows: Rows) -> None:
        super().append(rows)
        self.peaks[self.channel] = max(self.peaks[self.channel], self.nbytes)


def watch_barrier(barrier: TickBarrier, peaks: dict[str, int], stalled: asyncio.Event) -> None:
    push_rows, report_stall = barrier.push_rows, barrier.report_stall

    def pushing(channel: str, rows: Rows, lo: int) -> tuple[int, bool]:
        result = push_rows(channel, rows, lo)
        peaks[channel] = max(peaks[channel], barrier.pending_bytes(channel))
        return result

    def reporting(blocked: Any) -> None:
        report_stall(blocked)
        stalled.set()

    barrier.push_rows = pushing  # type: ignore[method-assign]
    barrier.report_stall = reporting  # type: ignore[method-assign]


@backends
async def test_a_channel_that_never_ticks_holds_the_others_at_their_byte_limits(
    backend: BackendHarness, caplog: pytest.LogCaptureFixture
) -> None:
    channels = backend.channels(4, "silent")
    loud, silent = channels[:3], channels[3]
    await produce(backend, channels, [m for c in range(3) for m in channel_script(c)])
    stream = TtMsgStream(
        backend.client(),
        receive_buffer_bytes=READER_BYTES,
        channel_buffer_bytes=BARRIER_BYTES,
        pursuit_lag_s=0,
    )
    reader_peaks: dict[str, int] = defaultdict(int)
    barrier_peaks: dict[str, int] = defaultdict(int)
    stalled = asyncio.Event()
    async with stream:
        await stream.as_consumer(channels, "sub", SubscriptionPosition.EARLIEST)
        for reader in stream._readers:  # before the reading tasks first run
            reader.buffer = WatchedQueue(reader_peaks, reader.channel)
        watch_barrier(stream.barrier, barrier_peaks, stalled)
        first = asyncio.create_task(anext(stream))
        with caplog.at_level(logging.WARNING, logger="msgstream.barrier"):
            # The stall is reported after every arrival; wait for the one after which
            # every loud channel's reader is full (it then stops reading).
            while not all(stream._reader(c).full for c in loud):
                await asyncio.wait_for(stalled.wait(), TIMEOUT)
                stalled.clear()
        assert not first.done() and stream.barrier.stats.packs == 0
        # Bounded: read only what the limits allow, not the 40 messages of each channel.
        for channel in loud:
            assert READER_BYTES <= reader_peaks[channel] <= READER_BYTES + MSG_BYTES
            assert BARRIER_BYTES <= barrier_peaks[channel] <= BARRIER_BYTES + MSG_BYTES
        per_channel = (READER_BYTES + BARRIER_BYTES) // MSG_BYTES + 2
        assert stream.read_stats.received <= 3 * (per_channel + per_channel // TICK_EVERY)
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 1 and f"[{silent!r}]" in warnings[0]
        assert "no time tick read yet" in warnings[0] and all(c in warnings[0] for c in loud)

        await produce(backend, channels, channel_script(3))
        packs = [await asyncio.wait_for(first, TIMEOUT)]
        seen = len(packs[0].msgs)
        while seen < 4 * PER_CHANNEL:
            packs.append(await asyncio.wait_for(anext(stream), TIMEOUT))
            seen += len(packs[-1].msgs)
    got: dict[str, list[int]] = defaultdict(list)
    previous_end = 0
    for pack in packs:
        assert pack.begin_ts == previous_end < pack.end_ts
        previous_end = pack.end_ts
        for msg in pack.msgs:
            assert msg.position is not None and pack.begin_ts < msg.end_ts <= pack.end_ts
            got[msg.position.channel].append(msg.msg_id)
    assert got == {
        name: [c * 1000 + i for i in range(PER_CHANNEL)] for c, name in enumerate(channels)
    }
    for channel in loud:  # the bounds held while draining as well
        assert reader_peaks[channel] <= READER_BYTES + MSG_BYTES
        assert barrier_peaks[channel] <= BARRIER_BYTES + MSG_BYTES


@backends
async def test_a_msgstream_reader_stops_at_its_byte_limit(backend: BackendHarness) -> None:
    (channel,) = backend.channels(1, "bytes")
    await produce(backend, [channel], [big(0, i, i + 1) for i in range(PER_CHANNEL)])
    stream = MsgStream(backend.client(), receive_buffer_bytes=READER_BYTES)
    async with stream:
        await stream.as_consumer([channel], "sub", SubscriptionPosition.EARLIEST)
        reader = stream._reader(channel)
        ids = [(await asyncio.wait_for(anext(stream), TIMEOUT)).msgs[0].msg_id]
        while not reader.full:
            stream._arrived.clear()
            await asyncio.wait_for(stream._arrived.wait(), TIMEOUT)
        # The message count cap (1024) would let all 40 in; the byte limit holds 5.
        held = -(-READER_BYTES // MSG_BYTES)
        assert len(reader.buffer) == held and reader.buffer.nbytes == held * MSG_BYTES
        assert stream.read_stats.received == held + 1
        while len(ids) < PER_CHANNEL:  # taking messages lets the reader go on
            ids.append((await asyncio.wait_for(anext(stream), TIMEOUT)).msgs[0].msg_id)
    assert ids == list(range(PER_CHANNEL))


def test_the_stall_is_logged_once_per_stall(caplog: pytest.LogCaptureFixture) -> None:
    def tick(channel: str, ts: int) -> TimeTickMsg:
        return TimeTickMsg(timestamp=ts, position=MsgPosition(channel, b"%d" % ts, "g", ts))

    barrier = TickBarrier(["a", "b"], channel_byte_limit=1)
    barrier.push("a", tick("a", 5))
    assert barrier.waiting_on() == ["b"]
    with caplog.at_level(logging.DEBUG, logger="msgstream.barrier"):
        barrier.report_stall(["a"])
        barrier.report_stall(["a"])
        assert len(caplog.records) == 1
        barrier.push("b", tick("b", 3))
        assert barrier.pop() is not None
        assert barrier.waiting_on() == ["b"]  # b holds the minimum tick now
        barrier.report_stall(["a"])
    assert [r.levelname for r in caplog.records] == ["WARNING", "DEBUG"]
    assert [r.getMessage() for r in caplog.records] == [
        "time-tick barrier stalled: waiting on channel(s) ['b'] (no time tick read yet); "
        "channel(s) ['a'] are held at their buffer limits (65536 messages, 1 bytes each) "
        "until then",
        "time-tick barrier stalled: waiting on channel(s) ['b'] (last tick 3); channel(s) "
        "['a'] are held at their buffer limits (65536 messages, 1 bytes each) until then",
    ]


@pytest.mark.parametrize("key", ["receive_buffer_bytes", "tt_channel_buffer_bytes"])
def test_byte_limit_keys_are_validated(key: str) -> None:
    with pytest.raises(ConfigError) as exc:
        config_from_dict({"msgstream": {key: 0}}, env={})
    assert exc.value.key == f"msgstream.{key}"
    assert config_from_dict({"msgstream": {key: 4096}}, env={}).msgstream.__dict__[key] == 4096


async def test_byte_limits_of_streams_are_validated() -> None:
    config = config_from_dict({"mq": {"type": "memory"}}, env={})
    with pytest.raises(ValueError, match="receive_buffer_bytes must be >= 1, got 0"):
        new_msgstream(config, receive_buffer_bytes=0)
    with pytest.raises(ValueError, match="channel_buffer_bytes must be >= 1, got 0"):
        new_ttmsgstream(config, channel_buffer_bytes=0)
