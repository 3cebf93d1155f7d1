"""``msgstream.runtime.cooperate``: inline completions yield once the loop has been held for a
slice, counted from the last time the loop was given back."""

from __future__ import annotations

import asyncio

import pytest

from helpers.loop_turns import other_task_turns
from msgstream.runtime import cooperate


async def _ran_before_returning(monkeypatch: pytest.MonkeyPatch, last_yield: float) -> bool:
    """Whether a callback scheduled now runs before ``cooperate()`` returns."""
    monkeypatch.setattr(cooperate, "_last_yield", last_yield)
    ran: list[bool] = []
    asyncio.get_running_loop().call_soon(ran.append, True)
    await cooperate.cooperate()
    return bool(ran)


async def test_a_held_loop_is_given_back(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cooperate, "SLICE_S", 60.0)
    assert await _ran_before_returning(monkeypatch, cooperate.perf_counter() - 61.0)


async def test_within_the_slice_nothing_yields(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cooperate, "SLICE_S", 60.0)
    assert not await _ran_before_returning(monkeypatch, cooperate.perf_counter())


async def test_a_suspension_the_caller_reports_restarts_the_slice(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(cooperate, "SLICE_S", 60.0)
    monkeypatch.setattr(cooperate, "_last_yield", cooperate.perf_counter() - 61.0)
    cooperate.yielded()  # e.g. a receive that waited for a message
    ran: list[bool] = []
    asyncio.get_running_loop().call_soon(ran.append, True)
    await cooperate.cooperate()
    assert ran == []


async def test_a_loop_of_one_message_produces_lets_other_tasks_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A one-message produce on an embedded backend completes inline, and checks whether a
    yield is due without a coroutine of its own: the loop must still be given back (on
    every call here: the slice is 0, so the test does not depend on speed)."""
    from msgstream import MsgPack, MsgStream, TimeTickMsg, config_from_dict, new_client

    monkeypatch.setattr(cooperate, "SLICE_S", 0.0)
    client = new_client(config_from_dict({"mq": {"type": "memory"}}, env={}))
    async with MsgStream(client) as stream:
        await stream.as_producer(["c"])
        async with other_task_turns() as turns:
            for stamp in range(1, 201):
                await stream.produce(MsgPack.of(TimeTickMsg(timestamp=stamp, hash_keys=[0])))
    assert turns.count >= 100  # at least every other produce let it run
