"""Checks that the event loop is never blocked: a heartbeat, a sampler and a watchdog.

``LoopWatch`` runs a task that wakes every :data:`BEAT_S`; the time between two wake-ups
is the time some callback held the loop. The machine is shared (2 cores, broker JVMs), so
wall time alone would blame the loop for the process being descheduled: a gap counts as
blocking when the loop's thread spent more than :data:`BLOCKED_S` of CPU in it (a busy
loop, a long computation), or when it lasted more than :data:`STALLED_S` of wall time (a
blocking call such as ``time.sleep`` or sync I/O).

The interpreter's cyclic garbage collector is not counted: a full collection scans every
object of the process (the whole test session's heap) and runs inside whichever callback
happened to allocate, so it says nothing about that callback. Its time is measured apart
(``gc.callbacks``) and reported.

A sampler thread reads the loop thread's CPU clock every :data:`SAMPLE_S`; once a gap has
used half the limit, it records the loop thread's stack, so a failure says where the loop
was held, not only for how long.

The watchdog is a ``SIGALRM`` timer re-armed by every beat: if no beat comes for
:data:`HUNG_S`, the loop is stuck (a busy loop never reaches an ``await``), and the signal
handler raises :class:`LoopHung` in the main thread, inside whatever is spinning, so the
test fails instead of hanging the suite.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import signal
import sys
import threading
import time
import traceback
from types import FrameType
from typing import Any

BEAT_S = 0.01
BLOCKED_S = 0.1
"""CPU (garbage collection aside) the loop's thread may spend between two beats."""
STALLED_S = 2.0
"""Wall time allowed between two beats, whatever the CPU (noise stays well below)."""
HUNG_S = 10.0
SAMPLE_S = 0.005


class LoopHung(Exception):
    """The event loop did not come back for :data:`HUNG_S` seconds."""


class LoopWatch:
    def __init__(self) -> None:
        self.longest_gap = 0.0
        """The most CPU the loop's thread spent between two beats, outside garbage
        collection, in seconds."""
        self.longest_wall_gap = 0.0
        self.gc_in_longest = 0.0
        """Garbage-collection CPU inside the gap of :attr:`longest_gap` (not counted)."""
        self.longest_gc = 0.0
        """The most garbage-collection CPU inside any one gap."""
        self.where = ""
        """The loop thread's stack, sampled inside the gap of :attr:`longest_gap`."""
        self._task: asyncio.Task[None] | None = None
        self._armed = False
        self._loop_thread = 0
        self._gc_in_gap = 0.0
        self._gc_started = 0.0
        self._gap_cpu_start = 0.0
        self._gap_stack = ""
        self._sampler: threading.Thread | None = None
        self._stopping = threading.Event()

    # --- garbage collection, measured apart -------------------------------------------
    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        if threading.get_ident() != self._loop_thread:
            return
        if phase == "start":
            self._gc_started = time.thread_time()
        else:
            self._gc_in_gap += time.thread_time() - self._gc_started

    # --- the sampler thread -----------------------------------------------------------
    def _sample(self) -> None:
        clock = time.pthread_getcpuclockid(self._loop_thread)
        while not self._stopping.wait(SAMPLE_S):
            used = time.clock_gettime(clock) - self._gap_cpu_start - self._gc_in_gap
            if used > BLOCKED_S / 2 and not self._gap_stack:
                frame = sys._current_frames().get(self._loop_thread)
                if frame is not None:
                    self._gap_stack = "".join(traceback.format_stack(frame, limit=12))

    # --- the watchdog -----------------------------------------------------------------
    def _alarm(self, signum: int, frame: FrameType | None) -> None:
        where = "" if frame is None else f" in {frame.f_code.co_filename}:{frame.f_lineno}"
        raise LoopHung(f"the event loop has been blocked for {HUNG_S:.0f} s{where}")

    def _rearm(self) -> None:
        if self._armed:
            signal.setitimer(signal.ITIMER_REAL, HUNG_S)

    # --- the heartbeat ----------------------------------------------------------------
    async def _beat(self) -> None:
        last = time.perf_counter()
        self._gap_cpu_start = time.thread_time()
        while True:
            self._rearm()
            await asyncio.sleep(BEAT_S)
            now, cpu = time.perf_counter(), time.thread_time()
            in_gc = self._gc_in_gap
            used = cpu - self._gap_cpu_start - in_gc
            if used > self.longest_gap:
                self.longest_gap, self.gc_in_longest = used, in_gc
                self.where = self._gap_stack
            self.longest_gc = max(self.longest_gc, in_gc)
            self.longest_wall_gap = max(self.longest_wall_gap, now - last - BEAT_S)
            last = now
            self._gap_stack, self._gc_in_gap = "", 0.0
            self._gap_cpu_start = time.thread_time()

    @property
    def blocked(self) -> bool:
        return self.longest_gap > BLOCKED_S or self.longest_wall_gap > STALLED_S

    def describe(self) -> str:
        where = f"; the loop was at:\n{self.where}" if self.where else ""
        return (
            f"the event loop was blocked: {self.longest_gap * 1000:.0f} ms of CPU between two "
            f"beats (limit {BLOCKED_S * 1000:.0f} ms; garbage collection in that gap, not "
            f"counted: {self.gc_in_longest * 1000:.0f} ms), longest wall-clock gap "
            f"{self.longest_wall_gap * 1000:.0f} ms (limit {STALLED_S * 1000:.0f} ms){where}"
        )

    @property
    def stack_sampled(self) -> bool:
        """The sampler has recorded the loop thread's stack in the current gap."""
        return bool(self._gap_stack)

    def start(self) -> None:
        self._loop_thread = threading.get_ident()
        # Before the sampler starts: it measures from here until the first beat.
        self._gap_cpu_start = time.thread_time()
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGALRM, self._alarm)
            self._armed = True
        gc.callbacks.append(self._on_gc)
        self._task = asyncio.get_running_loop().create_task(self._beat(), name="loop-watch")
        self._sampler = threading.Thread(target=self._sample, name="loop-watch", daemon=True)
        self._sampler.start()

    async def stop(self) -> None:
        if self._armed:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self._previous)
            self._armed = False
        self._stopping.set()
        if self._sampler is not None:
            self._sampler.join()
        with contextlib.suppress(ValueError):
            gc.callbacks.remove(self._on_gc)
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
