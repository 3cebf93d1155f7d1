"""Graceful stop: ``MsgStream.stop()`` ends iteration after the pack being handled, and
``StopOnSignals`` calls it on SIGINT/SIGTERM so the code after the loop still runs."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest

from msgstream import (
    Config,
    DeleteMsg,
    MsgPack,
    StopOnSignals,
    SubscriptionPosition,
    TimeTickMsg,
    TtMsgStream,
    config_from_dict,
    new_msgstream,
    new_ttmsgstream,
    positions_from_json,
    positions_to_json,
)

EARLIEST = SubscriptionPosition.EARLIEST
WAIT_S = 60
"""How long what must happen may take (a deadline, never a pause): a loaded machine is slow."""


def config(tmp_path: Path) -> Config:
    return config_from_dict({"rocksmq": {"path": str(tmp_path / "store")}}, env={})


def consumer(tmp_path: Path) -> TtMsgStream:
    """A TtMsgStream that hands out one pack per tick: the packs' timestamps are far behind
    the wall clock, which would otherwise make it merge them to catch up."""
    return new_ttmsgstream(config(tmp_path), pursuit_lag_s=0)


async def produce_packs(tmp_path: Path, packs: int) -> None:
    async with new_msgstream(config(tmp_path)) as producer:
        await producer.as_producer(["a"])
        for i in range(packs):
            ts = (i + 1) * 10
            delete = DeleteMsg(
                msg_id=i, timestamp=ts - 1, collection_name="c", primary_keys=[i], hash_keys=[0]
            )
            await producer.produce(MsgPack.of(delete))
            await producer.broadcast(MsgPack.of(TimeTickMsg(msg_id=i, timestamp=ts)))


async def test_stop_ends_the_loop_after_the_pack_being_handled(tmp_path: Path) -> None:
    await produce_packs(tmp_path, 5)
    async with consumer(tmp_path) as stream:
        await stream.as_consumer(["a"], "s", EARLIEST)
        handled = []
        async for pack in stream:
            handled.append(pack.msgs[0].msg_id)
            assert len(handled) <= 2, "stop() did not end the loop"
            if len(handled) == 2:
                stream.stop()
            await stream.ack(pack.end_positions)  # the stream is still open
        assert handled == [0, 1]
        assert stream.stopped and not stream.closed
        with pytest.raises(StopAsyncIteration):
            await anext(stream)
    # the acknowledged packs are not handed out again
    async with consumer(tmp_path) as again:
        await again.as_consumer(["a"], "s", EARLIEST)
        pack = await asyncio.wait_for(anext(again), WAIT_S)
        assert pack.msgs[0].msg_id == 2


async def test_stop_wakes_a_loop_waiting_for_packs(tmp_path: Path) -> None:
    await produce_packs(tmp_path, 1)
    async with consumer(tmp_path) as stream:
        await stream.as_consumer(["a"], "s", EARLIEST)
        handled = []
        first = asyncio.Event()

        async def consume() -> None:
            async for pack in stream:
                handled.append(pack.msgs[0].msg_id)
                first.set()

        task = asyncio.create_task(consume())
        await asyncio.wait_for(first.wait(), WAIT_S)  # the one pack is handled,
        await asyncio.sleep(0.2)  # and the loop goes on to wait for the next
        assert not task.done()
        stream.stop()
        await asyncio.wait_for(task, WAIT_S)
        assert handled == [0]


@pytest.mark.parametrize(
    ("sent", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)], ids=["TERM", "INT"]
)
async def test_a_signal_stops_the_stream_and_the_positions_are_saved(
    tmp_path: Path, sent: signal.Signals, code: int
) -> None:
    await produce_packs(tmp_path, 3)
    saved = tmp_path / "positions.json"
    async with (
        consumer(tmp_path) as stream,
        StopOnSignals(stream) as stop,
    ):
        await stream.as_consumer(["a"], "s", EARLIEST)
        handled = []
        async for pack in stream:
            handled.append(pack.msgs[0].msg_id)
            os.kill(os.getpid(), sent)  # as `docker stop` or Ctrl-C would, mid-pack
            await asyncio.sleep(0.05)  # the handler runs; this pack is still finished
            saved.write_text(positions_to_json(pack.end_positions))
        assert stop.stopping.is_set()
    assert handled == [0]
    assert stop.received is sent and stop.exit_code == code
    assert [p.timestamp for p in positions_from_json(saved.read_text())] == [10]
    # the handlers are gone: the loop's signal handling is what it was
    loop = asyncio.get_running_loop()
    assert not loop.remove_signal_handler(signal.SIGTERM)


async def test_no_signal_exits_0_and_add_stops_a_late_stream(tmp_path: Path) -> None:
    class Recorder:
        stops = 0

        def stop(self) -> None:
            self.stops += 1

    early, late = Recorder(), Recorder()
    async with StopOnSignals(early, signals=[signal.SIGUSR1]) as stop:
        assert stop.exit_code == 0
        os.kill(os.getpid(), signal.SIGUSR1)
        await asyncio.wait_for(stop.stopping.wait(), WAIT_S)
        stop.add(late)
    assert (early.stops, late.stops) == (1, 1)
    assert stop.exit_code == 128 + signal.SIGUSR1.value
