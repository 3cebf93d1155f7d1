"""Time-sliced yielding, so an ``await`` that completes inline still lets other tasks run.

A rocksmq or memory send, and a receive served from a consumer's buffer, finish without
waiting for anything. A loop of them would never give the event loop back: a
``TimeTickEmitter`` or a heartbeat in the same loop would starve. Such calls end with
``await cooperate()``, which yields once the loop has been held for :data:`SLICE_S` since the
last yield here. Yielding on every call would cost several microseconds per send (a
full loop turn); checking the clock costs tens of nanoseconds.
"""

from __future__ import annotations

import asyncio
from time import perf_counter

SLICE_S = 0.005
"""The longest run of inline completions before one of them yields to the event loop."""

_last_yield = perf_counter()


async def cooperate() -> None:
    """Yield to the event loop if it has been held for :data:`SLICE_S` (see module doc)."""
    if yield_due():
        await yield_now()


def yield_due() -> bool:
    """Whether the event loop has been held for :data:`SLICE_S` since the last yield
    here. ``if yield_due(): await yield_now()`` is :func:`cooperate` without creating a
    coroutine when no yield is due: for the paths where that is a measurable share (a
    one-message send)."""
    return perf_counter() - _last_yield >= SLICE_S


async def yield_now() -> None:
    """Yield to the event loop once, and count the next slice from now."""
    global _last_yield
    await asyncio.sleep(0)
    _last_yield = perf_counter()


def yielded() -> None:
    """Record that the caller just gave the event loop back (an ``await`` that suspended):
    the next :func:`cooperate` counts from here rather than yield again needlessly."""
    global _last_yield
    _last_yield = perf_counter()
