"""``concurrently``: side by side, results in order, the first failure raised as it is;
``finish_in_thread``: a blocking call that a cancellation lets end."""

from __future__ import annotations

import asyncio
import gc
import threading

import pytest

from msgstream.errors import TopicNotFoundError
from msgstream.runtime.scope import concurrently, finish_in_thread


async def _after(
    delay: float, value: int, log: list[str], started: asyncio.Event | None = None
) -> int:
    log.append(f"start {value}")
    if started is not None:
        started.set()
    try:
        await asyncio.sleep(delay)
    except asyncio.CancelledError:
        log.append(f"cancelled {value}")
        raise
    log.append(f"end {value}")
    return value


async def _fails(delay: float, exc: BaseException) -> int:
    await asyncio.sleep(delay)
    raise exc


async def test_results_come_in_the_order_given_while_the_waits_overlap() -> None:
    log: list[str] = []
    got = await concurrently([_after(0.2, 1, log), _after(0.1, 2, log), _after(0.0, 3, log)])
    assert got == [1, 2, 3]
    # every wait began before any ended: one wait of 0.2 s, not three one after another
    assert log == ["start 1", "start 2", "start 3", "end 3", "end 2", "end 1"]


async def test_nothing_and_one_operation() -> None:
    log: list[str] = []
    assert await concurrently([]) == []
    assert await concurrently(_after(0, n, log) for n in [7]) == [7]
    assert log == ["start 7", "end 7"]


async def test_the_first_failure_is_raised_unwrapped_once_the_others_are_cancelled() -> None:
    log: list[str] = []
    error = TopicNotFoundError("no channel 'c2'")
    with pytest.raises(TopicNotFoundError) as raised:
        await concurrently([_after(5, 1, log), _fails(0.01, error), _after(0, 3, log)])
    assert raised.value is error
    assert log == ["start 1", "start 3", "end 3", "cancelled 1"]


async def test_the_first_to_fail_is_raised_and_of_two_at_once_the_first_given() -> None:
    first, second = ValueError("first"), KeyError("second")
    with pytest.raises(KeyError, match="second"):
        await concurrently([_fails(0.05, first), _fails(0.0, second)])
    with pytest.raises(ValueError, match="first"):
        await concurrently([_fails(0.0, first), _fails(0.0, second)])


async def test_cancelling_the_caller_cancels_every_operation() -> None:
    log: list[str] = []
    started = [asyncio.Event(), asyncio.Event()]
    task = asyncio.create_task(
        concurrently([_after(5, 1, log, started[0]), _after(5, 2, log, started[1])])
    )
    for event in started:
        await event.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert log == ["start 1", "start 2", "cancelled 1", "cancelled 2"]


async def test_finish_in_thread_returns_and_raises_what_the_call_does() -> None:
    here = threading.get_ident()
    got = await finish_in_thread(lambda a, b: (a, b, threading.get_ident() != here), 1, 2)
    assert got == (1, 2, True)  # in a worker thread
    with pytest.raises(TopicNotFoundError, match="gone"):
        await finish_in_thread(_raise, TopicNotFoundError("gone"))


def _raise(exc: BaseException) -> None:
    raise exc


@pytest.mark.parametrize("outcome", ["returns", "raises"])
async def test_a_cancelled_caller_waits_for_the_call_to_end(
    outcome: str, caplog: pytest.LogCaptureFixture
) -> None:
    started, release, ended = threading.Event(), threading.Event(), threading.Event()

    def call() -> int:
        started.set()
        release.wait(30)
        ended.set()
        if outcome == "raises":
            raise TopicNotFoundError("dropped: the caller was cancelled")
        return 1

    caller = asyncio.ensure_future(finish_in_thread(call))
    assert await asyncio.to_thread(started.wait, 30)
    caller.cancel()
    await asyncio.sleep(0.2)
    caller.cancel()  # a second cancellation does not cut the wait short either
    await asyncio.sleep(0.2)
    assert not caller.done()
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await caller
    assert ended.is_set()
    gc.collect()  # an error left unretrieved is logged when its future is collected
    assert not [r for r in caplog.records if "never retrieved" in r.getMessage()]
