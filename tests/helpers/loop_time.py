"""An event loop on a clock of its own, for tests of code that times itself on the loop.

On such a loop (``looptime``), time moves only when every task waits for a timer, and then
straight to the next timer: sleeping 20 ms takes exactly 20 ms of the loop's time, running
code takes none. A test of timers and thresholds is then exact whatever the machine's load,
and takes no longer than its code. Only for code that waits on the loop alone (timers,
futures, events): I/O and threads would move on real time beside it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from typing import Any, ParamSpec

import looptime

P = ParamSpec("P")


@contextmanager
def loop_time(start: float = 1.0) -> Iterator[looptime.LoopTimeEventLoop]:
    """A new event loop whose ``time()`` starts at ``start``; closed on leaving.

    ``noop_cycles=0``: looptime can turn the loop a few times before it moves the clock, for
    callbacks that arrive from outside the loop; the code run here has none, so the clock
    moves as soon as nothing is ready to run."""
    loop = looptime.new_event_loop(start=start, noop_cycles=0)
    try:
        yield loop
    finally:
        loop.close()


def on_loop_time(test: Callable[P, Coroutine[Any, Any, None]]) -> Callable[P, None]:
    """An ``async def`` test made a plain one that runs it on a :func:`loop_time` loop
    (fixtures are passed as before)."""

    @functools.wraps(test)
    def run(*args: P.args, **kwargs: P.kwargs) -> None:
        with loop_time() as loop:
            loop.run_until_complete(test(*args, **kwargs))

    return run
