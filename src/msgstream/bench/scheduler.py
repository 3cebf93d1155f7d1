"""Sending a workload: the open-loop and closed-loop schedulers.

**Open loop** (``rate`` set): producer ``k`` of ``P`` owns a schedule of *intended* send
times, one pack every ``pack_size * P / rate`` seconds (producers staggered evenly). It
sleeps on an asyncio timer until a pack is due (no spinning) and sends it; when a send
takes longer than the schedule allows, the next packs are sent as soon as it returns
and their latency is still counted from their intended time. So a stall is charged to
every message that should have been sent meanwhile, not just the one that stalled:
coordinated omission is corrected (as in wrk2 and HdrHistogram's ``recordValue`` with an
expected interval, here by recording the real delays).

**Closed loop** (``rate`` None, ``--rate max``): each producer sends its next pack as soon
as the previous one is acknowledged; latency is from the send call to its return.

Latency is ``completion - intended`` (``perf_counter_ns``); a pack's latency counts once per
message in it. How late the timer let a producer start a send it was not held up for
(the event loop's timer resolution, ~1 ms on Linux) is recorded apart as the *schedule
lag*, the harness's own share.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from .recorder import Recorder
from .targets import Target
from .workload import MessageFactory, Workload


class Packs:
    """Where a target's packs come from: built as they are sent, or, with
    ``workload.prebuilt``, a pool of prepared packs per channel sent in turn.

    The pool belongs to one target for the whole run (its warm-up and every slice), and is
    built by :meth:`build` before anything is measured."""

    def __init__(self, target: Target, messages: MessageFactory, workload: Workload) -> None:
        self.target = target
        self.messages = messages
        self.workload = workload
        self._pools: dict[int, Iterator[Any]] = {}

    def build(self) -> None:
        """Prepare ``workload.prebuilt`` full packs for every channel (nothing without)."""
        if not self.workload.prebuilt:
            return
        for channel in range(self.workload.channels):
            pool = [self._fresh(channel, self.workload.pack_size)
                    for _ in range(self.workload.prebuilt)]  # fmt: skip
            self._pools[channel] = itertools.cycle(pool)

    def _fresh(self, channel: int, count: int) -> Any:
        return self.target.prepare(channel, self.messages.pack(channel, count))

    def take(self, channel: int, count: int) -> Any:
        """A prepared pack of ``count`` messages for ``channel`` (a short last pack of a
        budget is always built fresh)."""
        pool = self._pools.get(channel)
        if pool is None or count != self.workload.pack_size:
            return self._fresh(channel, count)
        return next(pool)


@dataclass
class Phase:
    """One stretch of sending on one target: a warm-up, or a (slice of a) measurement."""

    packs: Packs
    recorder: Recorder
    duration_s: float | None
    budget: int | None
    """Messages to send in all (None: until ``duration_s``)."""
    stopping: asyncio.Event = field(default_factory=asyncio.Event)
    fail_fast: bool = False
    """Raise the first send error (the warm-up does: a run that cannot send stops)."""
    on_send: Callable[[], None] | None = None


def _shares(total: int, parts: int) -> list[int]:
    return [total // parts + (1 if k < total % parts else 0) for k in range(parts)]


async def run_phase(phase: Phase) -> None:
    """Send the phase's messages from ``workload.producers`` concurrent tasks; returns when
    every task is done (its duration or budget reached, or ``stopping`` set; sends in flight
    complete and are recorded)."""
    workload = phase.packs.workload
    producers = workload.producers
    budgets: list[int | None] = [None] * producers
    if phase.budget is not None:
        budgets = list(_shares(phase.budget, producers))
    start = time.perf_counter_ns()
    end = None if phase.duration_s is None else start + int(phase.duration_s * 1e9)
    sleeping: dict[int, bool] = {}
    tasks = [
        asyncio.create_task(_produce(phase, k, start, end, budgets[k], sleeping))
        for k in range(producers)
        if budgets[k] != 0
    ]
    stop_waiter: asyncio.Task[Any] = asyncio.create_task(phase.stopping.wait())
    try:
        pending: set[asyncio.Task[Any]] = set(tasks)
        while pending:
            done, pending = await asyncio.wait(
                pending | {stop_waiter}, return_when=asyncio.FIRST_COMPLETED
            )
            pending.discard(stop_waiter)
            if stop_waiter in done:  # wake the sleeping producers; senders finish their send
                for k, task in enumerate(tasks):
                    if sleeping.get(k) and not task.done():
                        task.cancel()
                await asyncio.gather(*pending, return_exceptions=True)
                pending = set()
            for task in done - {stop_waiter}:
                if not task.cancelled() and task.exception() is not None:
                    raise task.exception()  # type: ignore[misc]
    finally:
        stop_waiter.cancel()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, stop_waiter, return_exceptions=True)


async def _produce(
    phase: Phase,
    k: int,
    start: int,
    end: int | None,
    budget: int | None,
    sleeping: dict[int, bool],
) -> None:
    packs = phase.packs
    workload = packs.workload
    recorder = phase.recorder
    target = packs.target
    channels = workload.channels_of(k)
    clock = time.perf_counter_ns
    if workload.rate is not None:
        period = int(workload.pack_size * workload.producers / workload.rate * 1e9)
        due = start + period * k // workload.producers
    else:
        period = 0
        due = start
    previous_done = start
    sent = 0
    turn = 0
    while not phase.stopping.is_set():
        count = workload.pack_size if budget is None else min(workload.pack_size, budget - sent)
        if count <= 0:
            return
        channel = channels[turn % len(channels)]
        turn += 1
        prepared = packs.take(channel, count)
        nbytes = count * packs.messages.message_bytes
        if period:
            if end is not None and due >= end:
                return
            now = clock()
            if due > now:
                sleeping[k] = True
                try:
                    await asyncio.sleep((due - now) / 1e9)
                except asyncio.CancelledError:
                    if phase.stopping.is_set():
                        return
                    raise
                finally:
                    sleeping[k] = False
            began = clock()
            if previous_done <= due:  # not held up by an earlier send: lag is the timer's
                recorder.record_lag(began - due)
            intended = due
            due += period
        else:
            began = intended = clock()
            if end is not None and began >= end:
                return
        target.due(intended)
        try:
            await target.send(channel, prepared)
        except Exception as exc:
            if phase.fail_fast:
                raise
            recorder.record_error(exc, count)
            previous_done = clock()
            await asyncio.sleep(0)  # a send failing at once must not starve the loop
        else:
            previous_done = clock()
            recorder.record(previous_done - intended, count, nbytes)
        sent += count
        if phase.on_send is not None:
            phase.on_send()
