"""The loop watch itself: it must catch what it is there to catch, say where, and not blame
the loop for garbage collection or for an idle wait."""

from __future__ import annotations

import asyncio
import gc
import time

import liveness
from liveness import LoopWatch


def _spin_for(seconds: float, watch: LoopWatch | None = None) -> None:
    """Hold the loop's thread on the CPU (what a busy loop in a callback does) for
    ``seconds``, and, given a ``watch``, until its sampler has recorded the stack: on a
    loaded machine the sampler thread may not be scheduled inside a short gap."""
    started = time.thread_time()
    deadline = time.monotonic() + 5
    while time.thread_time() - started < seconds or (
        watch is not None and not watch.stack_sampled and time.monotonic() < deadline
    ):
        pass


async def test_a_callback_that_holds_the_cpu_is_caught_with_its_stack() -> None:
    watch = LoopWatch()
    watch.start()
    await asyncio.sleep(0.05)
    _spin_for(liveness.BLOCKED_S * 2, watch)
    await asyncio.sleep(0.05)
    await watch.stop()
    assert watch.blocked
    assert watch.longest_gap >= liveness.BLOCKED_S * 2
    assert "_spin_for" in watch.where
    assert "ms of CPU between two beats (limit 100 ms" in watch.describe()


async def test_a_blocking_sleep_is_caught_as_a_stall() -> None:
    watch = LoopWatch()
    watch.start()
    await asyncio.sleep(0.02)
    time.sleep(liveness.STALLED_S + 0.3)  # noqa: ASYNC251 (the point of the test)
    await asyncio.sleep(0.02)
    await watch.stop()
    assert watch.blocked
    assert watch.longest_wall_gap > liveness.STALLED_S
    assert watch.longest_gap < liveness.BLOCKED_S  # asleep, not on the CPU


async def test_awaiting_is_not_blocking() -> None:
    watch = LoopWatch()
    watch.start()
    for _ in range(20):
        await asyncio.sleep(0.005)
        _spin_for(0.002)
    await watch.stop()
    assert not watch.blocked, watch.describe()
    assert watch.where == ""


async def test_garbage_collection_is_measured_apart() -> None:
    """A full collection over a big heap runs in whatever callback allocated: it is
    reported, not counted as the callback's CPU."""
    heap = [[i] for i in range(3_000_000)]  # ~3 million tracked objects to scan
    watch = LoopWatch()
    watch.start()
    await asyncio.sleep(0.02)
    started = time.thread_time()
    gc.collect()
    collecting = time.thread_time() - started
    await asyncio.sleep(0.02)
    await watch.stop()
    del heap
    assert collecting > 0.05  # the heap is big enough for the collection to matter
    assert watch.longest_gc >= collecting * 0.9
    assert watch.longest_gap < collecting * 0.5 + 0.02
