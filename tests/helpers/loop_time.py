"""An event loop on a clock of its own, for tests of code that times itself on the loop.

On such a loop (``looptime``), time moves only when every task waits for a timer, and then
straight to the next timer: sleeping 20 ms takes exactly 20 ms of the loop's time, running
code takes none. A test of timers and thresholds is then exact whatever the machine's load,
and takes no longer than its code. Only for code that waits on the loop alone (timers,
futures, events): I/O and threads would move on real time beside it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import looptime


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
