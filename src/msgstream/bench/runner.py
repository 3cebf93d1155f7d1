"""Running a produce benchmark: warm-up, measurement (interleaved sides), progress.

With several sides (msgstream and a raw baseline, ``--baseline raw``) the measurement is
cut into slices of ``slice_s`` seconds (or an equal share of ``--messages``) that
alternate between the sides, first one side first and then the other (ABBA...), so that
drift in the machine's speed hits both alike; each side gets the same total time at the
same rate. Each side warms up (unmeasured) before the first slice.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .recorder import Recorder, Stats
from .scheduler import Packs, Phase, run_phase
from .targets import Target
from .workload import MessageFactory, Workload


@dataclass
class Side:
    """One target of a run and what was measured on it."""

    target: Target
    name: str
    """The label in tables and charts (``msgstream``, ``raw aiokafka``, ``kafka``...)."""
    backend: str
    recorder: Recorder = field(default_factory=Recorder)
    measured_s: float = 0.0
    """Seconds this side spent in measured slices."""
    extra: dict[str, Any] = field(default_factory=dict)

    def stats(self) -> Stats:
        return self.recorder.stats()

    @property
    def msgs_per_s(self) -> float:
        return self.recorder.sent / self.measured_s if self.measured_s > 0 else 0.0

    @property
    def mb_per_s(self) -> float:
        return self.recorder.bytes / 1e6 / self.measured_s if self.measured_s > 0 else 0.0


ProgressHook = Callable[[Side, int, Stats, float], None]
"""Called once per interval with (the active side, messages so far, figures so far,
seconds so far)."""


@dataclass
class RunControl:
    """Shared by a run and whoever may stop it (signals)."""

    stopping: asyncio.Event = field(default_factory=asyncio.Event)
    stopped_by: str | None = None

    def stop(self, reason: str = "interrupted") -> None:
        if self.stopped_by is None:
            self.stopped_by = reason
        self.stopping.set()


def slices(workload: Workload, sides: int, slice_s: float) -> list[tuple[float | None, int | None]]:
    """The (duration, messages) of each side's slices of the measurement."""
    if sides == 1:
        return [(workload.duration_s if workload.messages is None else None, workload.messages)]
    if workload.messages is not None:
        count = max(1, min(10, workload.messages // max(1, workload.pack_size)))
        per = [workload.messages // count + (1 if i < workload.messages % count else 0)
               for i in range(count)]  # fmt: skip
        return [(None, n) for n in per]
    assert workload.duration_s is not None
    count = max(1, math.ceil(workload.duration_s / slice_s - 1e-9))
    return [(workload.duration_s / count, None)] * count


async def run_sides(
    sides: Sequence[Side],
    workload: Workload,
    channels: Sequence[str],
    *,
    control: RunControl | None = None,
    slice_s: float = 1.0,
    progress: ProgressHook | None = None,
    source_id: int = 0,
) -> None:
    """Open every side, warm each up, measure them in alternating slices, close them."""
    control = control or RunControl()
    messages = MessageFactory(workload, source_id=source_id)
    packs = {id(side): Packs(side.target, messages, workload) for side in sides}
    opened: list[Side] = []
    try:
        for side in sides:
            await side.target.open(channels)
            opened.append(side)
            packs[id(side)].build()
        if workload.warmup_s > 0:
            for side in sides:
                if control.stopping.is_set():
                    return
                await run_phase(
                    Phase(packs[id(side)], Recorder(), workload.warmup_s, None, control.stopping,
                          fail_fast=True)
                )  # fmt: skip
        started_ns = time.perf_counter_ns()
        epoch = time.time()
        for side in sides:
            side.recorder = Recorder(started_ns=started_ns, started_epoch_s=epoch)
        plan = slices(workload, len(sides), slice_s)
        for index, (duration, budget) in enumerate(plan):
            order = list(sides) if index % 2 == 0 else list(reversed(sides))
            for side in order:
                if control.stopping.is_set():
                    break
                await _measure(side, packs[id(side)], duration, budget, control, progress)
            if control.stopping.is_set():
                break
    finally:
        for side in sides:
            side.recorder.finish()
        for side in opened:
            await side.target.close()


async def _measure(
    side: Side,
    packs: Packs,
    duration: float | None,
    budget: int | None,
    control: RunControl,
    progress: ProgressHook | None,
) -> None:
    """One measured slice of ``side``, its recorder's intervals rolled on a ticker."""
    recorder = side.recorder
    workload = packs.workload
    recorder.roll()  # the time since its last slice is not this side's: an empty interval
    if recorder.intervals and recorder.intervals[-1].sent == 0:
        recorder.intervals.pop()
    began = time.perf_counter_ns()

    async def tick() -> None:
        while True:
            await asyncio.sleep(workload.interval_s)
            recorder.roll()
            if progress is not None:
                sent, stats = recorder.running_stats()
                progress(
                    side, sent, stats, side.measured_s + (time.perf_counter_ns() - began) / 1e9
                )

    ticker = asyncio.create_task(tick())
    try:
        await run_phase(Phase(packs, recorder, duration, budget, control.stopping))
    finally:
        ticker.cancel()
        await asyncio.gather(ticker, return_exceptions=True)
        side.measured_s += (time.perf_counter_ns() - began) / 1e9
        recorder.roll(merge_below_s=workload.interval_s / 2)
