"""``async with`` for the runtime's long-lived objects, written once.

A class states what entering starts (:meth:`AsyncScope._enter`, nothing by default) and
what leaving ends (:meth:`AsyncScope._exit`, told whether the body finished cleanly);
the context-manager protocol itself lives here, beside the ways a part runs work of its
own: tasks in the background (:func:`cancel_and_wait` ends one) and side by side
(:func:`concurrently`), and a blocking call in a thread that a cancellation lets end
(:func:`finish_in_thread`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterable
from types import TracebackType
from typing import Any, Self, TypeVar

_T = TypeVar("_T")


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


async def concurrently(operations: Iterable[Awaitable[_T]]) -> list[_T]:
    """Await ``operations`` side by side; their results, in order.

    For per-channel calls that each wait on the network (a broker's end offsets, a
    consumer's start, a fetch): N channels cost about one round trip, not N.

    The first to fail cancels the others and is raised once they have ended -- as it is,
    not inside an ``ExceptionGroup`` as :class:`asyncio.TaskGroup` would raise it, so
    callers still catch typed errors. Cancelling the caller cancels them all.
    """
    awaiting = list(operations)
    if len(awaiting) <= 1:
        return [await operation for operation in awaiting]
    tasks = [asyncio.ensure_future(operation) for operation in awaiting]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    finally:
        unfinished = [task for task in tasks if not task.done()]
        for task in unfinished:
            task.cancel()
        await asyncio.gather(*unfinished, return_exceptions=True)
    failures = [t.exception() for t in tasks if not t.cancelled()]
    for failure in failures:
        if failure is not None:
            raise failure
    return [task.result() for task in tasks]


async def finish_in_thread(fn: Callable[..., _T], *args: Any) -> _T:
    """``fn(*args)`` in a worker thread, awaited to its end even when the caller is
    cancelled: the cancellation is raised once the call has returned (its result or
    error is then dropped).

    For blocking work with effects that must not go on after whatever the caller does
    next (a durable write, a job handing data on): ``asyncio.to_thread`` raises the
    cancellation at once and leaves its thread running (as does
    ``anyio.to_thread.run_sync`` under a plain ``Task.cancel``)."""
    call = asyncio.ensure_future(asyncio.to_thread(fn, *args))
    try:
        return await asyncio.shield(call)
    except asyncio.CancelledError:
        while not call.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait({call})
        raise  # the call's error, if any, was marked retrieved by the cancelled shield
