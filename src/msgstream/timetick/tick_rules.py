"""The time-tick rules of one channel, as pure state machines: the one place that decides
what is late, what a resumed reader skips, where a cut ends and what a retry repeats.

A channel promises, with a time tick ``t``, that every later message on it is stamped
above ``t``. On that promise:

- the time every channel has reached is the smallest of their last ticks
  (:func:`common_tick`);
- a data message stamped at or below the last tick read on its channel is *late*: it is
  delivered with the next cut (or rejected, by a barrier's choice);
- after a seek to a boundary ``b`` (where an earlier cut ended), data stamped at or below
  ``b`` read before a tick above ``b`` was delivered before the boundary: it is *skipped*
  -- but only among the messages that cut had read, when the boundary says how many
  (``MsgPosition.examined``): what came after them was not delivered, so a late message
  there is delivered as late, never skipped. Where a boundary lies and what it examined
  is :func:`resume_boundary`, for a barrier's packs and a planner's slices alike;
- within one cut, an Insert or Delete repeating an earlier ``(source_id, msg_id)`` is a
  producer's retry: only the first is delivered (:class:`FirstSeen`).

:class:`~msgstream.timetick.barrier.TickBarrier` applies them to several channels read together
(its fast paths take whole runs of rows that these rules would take one by one, and the
property test in ``tests/test_barrier_rows.py`` holds it to a row-by-row reference);
:class:`SliceCut` applies them to one channel read from a boundary up to the tick that
closes a slice, as a reader of a precomputed time slice does (the Spark source's
executors). No I/O, no clock, no message objects: kinds, timestamps and ids in, verdicts
out.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from itertools import chain, repeat
from operator import add, mul

from ..wire.plans import KIND_DML, KIND_TICK


class Arrival(IntEnum):
    """How a data message stands against its channel's clock."""

    ON_TIME = 0
    SKIPPED = 1
    """Read after a seek, at or below the boundary, before a tick above it."""
    LATE = 2
    """Stamped at or below a tick read before it on the channel."""


@dataclass(slots=True)
class ChannelClock:
    """A channel's last tick and, after a seek, the boundary it resumed from.

    Call :meth:`tick` or :meth:`arrival` once for each message read, in order: after a
    seek they count the messages read against the boundary's ``examined``.
    """

    last_tick: int | None = None
    resume_ts: int | None = None
    """After a seek: data stamped at or below this is skipped until a tick above it (or
    until ``resume_left`` messages have been read)."""
    resume_left: int | None = None
    """After a seek to a boundary that says how many messages its cut had read: how many
    of them are still to be read; None: not known (the tick alone ends the skipping)."""

    def resume(self, ts: int, examined: int = 0) -> None:
        """Messages are read from a boundary ``ts`` next; ``examined`` (0: not known) of
        them, from the first, had been read by the cut that ended there."""
        self.resume_ts = ts
        self.resume_left = examined or None

    def _resume_bound(self) -> int | None:
        """The boundary the message being read is still skipped against, if any (and
        count it as read)."""
        left = self.resume_left
        if left is not None:
            if left == 0:  # past what the cut had read: nothing here was delivered
                self.resume_ts = self.resume_left = None
            else:
                self.resume_left = left - 1
        return self.resume_ts

    def passed(self) -> None:
        """A message the rules do not judge (an unreadable one) was read."""
        self._resume_bound()

    def tick(self, ts: int) -> None:
        """A time tick ``ts`` was read (a stale one, below the last, changes nothing)."""
        bound = self._resume_bound()
        if bound is not None and ts > bound:
            self.resume_ts = self.resume_left = None
        if self.last_tick is None or ts > self.last_tick:
            self.last_tick = ts

    def arrival(self, ts: int) -> Arrival:
        """How a data message stamped ``ts``, read now, stands."""
        bound = self._resume_bound()
        if bound is not None and ts <= bound:
            return Arrival.SKIPPED
        if self.last_tick is not None and ts <= self.last_tick:
            return Arrival.LATE
        return Arrival.ON_TIME

    def all_on_time(self, stamps: Sequence[int], lo: int, hi: int) -> bool:
        """Whether data messages stamped ``stamps[lo:hi]``, read now one after another,
        would each be :attr:`Arrival.ON_TIME` (:meth:`arrival`'s verdict, without the
        reading counted): no seek to skip after, and every one above the last tick. A
        reader's fast path takes such a run whole."""
        if self.resume_ts is not None:
            return False
        last_tick = self.last_tick
        return last_tick is None or hi == lo or min(stamps[lo:hi]) > last_tick


def resume_boundary(first_undelivered: int | None, last_read: int) -> tuple[int, int]:
    """Where reading resumes after a cut, and the boundary's ``examined``: messages are
    numbered in reading order; ``first_undelivered`` is the first one read that the cut
    did not deliver (data above its end; None: none), ``last_read`` the last one read
    (no earlier than the tick that closes the cut).

    Reading resumes at the first undelivered message, else at the last one read (no
    later: a late message written after it must be read again), and ``examined`` counts
    the messages from there through the last one read: those the cut had seen, among
    which a resumed reader skips what is stamped at or below the end
    (:meth:`ChannelClock.resume`). Returns ``(where, examined)``, ``where`` a number."""
    where = last_read if first_undelivered is None else first_undelivered
    return where, last_read - where + 1


def common_tick(last_ticks: Iterable[int | None]) -> int | None:
    """The time every channel has reached: the smallest last tick, or None while some
    channel has none."""
    ticks = list(last_ticks)
    if None in ticks:
        return None
    return min(ticks)  # type: ignore[type-var]


@dataclass(slots=True)
class FirstSeen:
    """The Insert/Delete messages of one cut that repeat an earlier ``(source_id, msg_id)``."""

    _seen: set[tuple[int, int]] = field(default_factory=set)

    def first(self, source_id: int, msg_id: int) -> bool:
        """Whether this is the first message of the cut with this key (then noted)."""
        key = (source_id, msg_id)
        if key in self._seen:
            return False
        self._seen.add(key)
        return True


def has_repeats(sources: Sequence[int], msg_ids: Sequence[int]) -> bool:
    """Whether two of the messages ``(sources[i], msg_ids[i])`` share a key, checked on
    ints (no tuple per message): on msg_id alone when one source sent them all, as is
    common. The bulk form of :class:`FirstSeen` for a barrier's whole runs."""
    if not msg_ids:
        return False
    if sources.count(sources[0]) == len(sources):
        return len(set(msg_ids)) != len(msg_ids)
    # source_id and msg_id are int64: one int per pair, without collisions.
    keys = set(map(add, map(mul, sources, repeat(1 << 64)), msg_ids))
    return len(keys) != len(msg_ids)


def runs_have_repeats(
    sources: Sequence[int], msg_ids: Sequence[int], runs: Sequence[tuple[int, int]]
) -> bool:
    """:func:`has_repeats` over the rows of ``runs`` (``(lo, hi)`` ranges) together."""
    if len(runs) == 1:
        lo, hi = runs[0]
        return has_repeats(sources[lo:hi], msg_ids[lo:hi])
    return has_repeats(
        list(chain.from_iterable(sources[a:b] for a, b in runs)),
        list(chain.from_iterable(msg_ids[a:b] for a, b in runs)),
    )


class Verdict(IntEnum):
    """What a slice reader does with one message (see :meth:`SliceCut.take`)."""

    KEEP = 0
    """Data of this slice: deliver it."""
    KEEP_LATE = 1
    """Late data, delivered with this slice (report it)."""
    PASS = 2
    """Not this slice's: a tick, data of an earlier or later slice, or a retry."""
    CLOSE = 3
    """The tick that closes the slice: stop reading, this message included."""


class SliceCut:
    """One channel's share of the time slice ``(begin, end]``, read message by message
    from a boundary of ``begin`` (where the previous slice's reading may resume: every
    earlier message is stamped at or below ``begin``) up to the first tick at or above
    ``end``.

    It is the barrier's pack for ``end`` as a barrier resumed at that boundary would cut
    it: data skipped after the seek, late data delivered, data above ``end`` left for a
    later slice, retries dropped. Reading every slice of a channel from consecutive
    boundaries delivers each message at most once.

    It counts what it passed over: ``skipped`` (an earlier slice's, read before a tick
    above ``begin``), ``later`` (above ``end``), ``duplicates``, and the ``late`` data
    it delivered.
    """

    __slots__ = ("_first", "clock", "closed", "duplicates", "end", "late", "later", "skipped")

    def __init__(self, begin: int, end: int, examined: int = 0) -> None:
        self.end = end
        self.clock = ChannelClock()
        self.clock.resume(begin, examined)
        self.closed = False
        self._first = FirstSeen()
        self.skipped = self.late = self.later = self.duplicates = 0

    def unreadable(self) -> None:
        """A message whose header could not be read was read: it counts against the
        boundary's ``examined`` (the planner that counted them read it too)."""
        self.clock.passed()

    def take(self, kind: int, ts: int, source_id: int, msg_id: int) -> Verdict:
        """The verdict on the next message read: its row kind (``msgstream.wire.plans``),
        barrier timestamp (``end_ts``) and envelope ids."""
        clock = self.clock
        if kind == KIND_TICK:
            clock.tick(ts)
            if ts >= self.end:
                self.closed = True
                return Verdict.CLOSE
            return Verdict.PASS
        arrival = clock.arrival(ts)
        if arrival is Arrival.SKIPPED:
            self.skipped += 1
            return Verdict.PASS
        if ts > self.end:  # on time (a late one is at or below a tick below end)
            self.later += 1
            return Verdict.PASS
        late = arrival is Arrival.LATE
        self.late += late
        if kind == KIND_DML and not self._first.first(source_id, msg_id):
            self.duplicates += 1
            return Verdict.PASS
        return Verdict.KEEP_LATE if late else Verdict.KEEP
