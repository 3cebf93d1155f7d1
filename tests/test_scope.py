"""``concurrently``: side by side, results in order, the first failure raised as it is."""

from __future__ import annotations

import asyncio

import pytest

from msgstream.errors import TopicNotFoundError
from msgstream.scope import concurrently


async def _after(delay: float, value: int, log: list[str]) -> int:
    log.append(f"start {value}")
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
    loop = asyncio.get_running_loop()
    began = loop.time()
    got = await concurrently([_after(0.2, 1, log), _after(0.1, 2, log), _after(0.0, 3, log)])
    assert got == [1, 2, 3]
    assert log == ["start 1", "start 2", "start 3", "end 3", "end 2", "end 1"]
    assert loop.time() - began < 0.35  # one wait of 0.2 s, not three adding to 0.3 s


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
    task = asyncio.create_task(concurrently([_after(5, 1, log), _after(5, 2, log)]))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert log == ["start 1", "start 2", "cancelled 1", "cancelled 2"]
