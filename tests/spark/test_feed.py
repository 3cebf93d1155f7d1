"""The batcher's read-ahead of packs (bridge_spark.data.feed), on a scripted stream."""

from __future__ import annotations

import asyncio

import pytest

from msgstream import MsgPack, TimeTickMsg
from msgstream.bridge_spark.data.feed import PackFeed


def pack(ts: int, size: int) -> MsgPack:
    tick = TimeTickMsg(msg_id=ts, timestamp=ts)
    tick.size = size
    return MsgPack(msgs=[tick], begin_ts=ts - 1, end_ts=ts)


class Script:
    """A stream whose first ``ready`` packs are there at once; the next wait for ``more``."""

    def __init__(self, packs: list[MsgPack], ready: int, end: BaseException) -> None:
        self.packs = packs
        self.ready = ready
        self.end = end
        self.more = asyncio.Event()
        self.taken = 0

    def __aiter__(self) -> Script:
        return self

    async def __anext__(self) -> MsgPack:
        if self.taken >= self.ready:
            await self.more.wait()
        if self.taken == len(self.packs):
            raise self.end
        self.taken += 1
        return self.packs[self.taken - 1]


async def test_ready_packs_come_in_one_step_then_the_stream_end() -> None:
    packs = [pack(ts, 10) for ts in range(1, 6)]
    script = Script(packs, ready=3, end=StopAsyncIteration())
    feed = PackFeed(script, byte_limit=1000)
    try:
        assert feed.get_nowait() is None  # nothing is read before the loop turns
        await feed.wait()
        assert [feed.get_nowait() for _ in range(4)] == [*packs[:3], None]
        script.ready = len(packs)
        script.more.set()
        await feed.wait()
        assert [feed.get_nowait() for _ in range(2)] == packs[3:]
        with pytest.raises(StopAsyncIteration):
            feed.get_nowait()
    finally:
        await feed.close()


async def test_reading_ahead_stops_at_the_byte_limit_until_packs_are_taken() -> None:
    packs = [pack(ts, 40) for ts in range(1, 6)]
    script = Script(packs, ready=5, end=StopAsyncIteration())
    feed = PackFeed(script, byte_limit=100)
    try:
        await feed.wait()
        await asyncio.sleep(0)
        assert script.taken == 3  # 120 bytes held: the limit plus less than one pack
        assert feed.get_nowait() is packs[0]
        await asyncio.sleep(0)
        assert script.taken == 4
    finally:
        await feed.close()


async def test_a_stream_error_comes_after_the_packs_read_before_it() -> None:
    packs = [pack(1, 10)]
    script = Script(packs, ready=2, end=RuntimeError("broker gone"))
    script.more.set()
    feed = PackFeed(script, byte_limit=1000)
    try:
        await feed.wait()
        assert feed.get_nowait() is packs[0]
        with pytest.raises(RuntimeError, match="broker gone"):
            feed.get_nowait()
        await feed.wait()  # an error is something to take: no waiting
    finally:
        await feed.close()


async def test_close_stops_the_reading_task() -> None:
    script = Script([pack(1, 10)], ready=0, end=StopAsyncIteration())
    feed = PackFeed(script, byte_limit=1000)
    await asyncio.sleep(0)
    await feed.close()
    script.ready = 1
    script.more.set()
    await asyncio.sleep(0)
    assert script.taken == 0
