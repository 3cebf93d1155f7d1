"""Counting the turns another task gets: how a test sees that inline completions still
give the event loop back."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class Turns:
    """How many times the other task ran since the block began."""

    def __init__(self) -> None:
        self.count = 0


@asynccontextmanager
async def other_task_turns() -> AsyncIterator[Turns]:
    """Run a task that counts each turn the loop gives it, from the block's start to its
    end (it is cancelled then)."""
    turns = Turns()

    async def other_task() -> None:
        while True:
            await asyncio.sleep(0)
            turns.count += 1

    task = asyncio.ensure_future(other_task())
    await asyncio.sleep(0)
    turns.count = 0  # count from here
    try:
        yield turns
    finally:
        task.cancel()
