"""``async with`` for the runtime's long-lived objects, written once.

A class states what entering starts (:meth:`AsyncScope._enter`, nothing by default) and
what leaving ends (:meth:`AsyncScope._exit`, told whether the body finished cleanly);
the context-manager protocol itself lives here.
"""

from __future__ import annotations

import asyncio
import contextlib
from types import TracebackType
from typing import Any, Self


class AsyncScope:
    """Entering calls :meth:`_enter` and returns the object; leaving calls :meth:`_exit`."""

    __slots__ = ()

    async def __aenter__(self) -> Self:
        await self._enter()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._exit(clean=exc_type is None)

    async def _enter(self) -> None:
        """Start what the scope holds; most objects are live once built."""

    async def _exit(self, *, clean: bool) -> None:
        """End what the scope holds; ``clean`` is False when the body raised."""
        raise NotImplementedError


async def cancel_and_wait(task: asyncio.Task[Any] | None) -> None:
    """Cancel a background task a part owns and wait until it has ended (its
    ``CancelledError`` is the expected end, not an error); None does nothing."""
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
