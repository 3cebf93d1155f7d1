"""The time-tick barrier: a pure state machine that turns per-channel message streams
into time-aligned packs. No I/O, no clock: it is fed messages and asked for packs.

Per channel it keeps the last tick seen and everything read but not yet emitted (data
and ticks above the last emitted ``end_ts``, in arrival order). A pack is due when
``min(last tick of every channel)`` passes the last emitted ``end_ts``; it holds every
buffered data message with ``ts <= end_ts``, ordered by (ts, channel order, arrival).

The rules themselves (late, skipped after a seek, the common tick, retries) are
:mod:`msgstream.timetick.tick_rules`, shared with readers of precomputed time slices.

Messages are held as rows (:mod:`msgstream.wire.rows`): a channel's state is the log of every
row read since the oldest one still needed, in arrival order, with a cursor ``lo``
(everything before it has been through a pack cut) and the few rows before ``lo`` held
back because their timestamp was above that cut. Whole runs of rows move in at once
(:meth:`TickBarrier.push_rows`) and whole runs are cut into packs; row-by-row work is
only done where something unusual (a late message, a duplicate, a seek) needs it.

Memory is bounded per channel in messages (``channel_capacity``) and in payload bytes
(``channel_byte_limit``) of the data read but not yet emitted: a channel at a limit is
read no further unless time waits on it (see :meth:`TickBarrier.wants`). So a channel
that never ticks holds the others at their limits instead of letting them grow, and
:meth:`TickBarrier.report_stall` says so, once per stall.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import chain

from ..configuration.config import STREAM_DEFAULTS
from ..configuration.config import LatePolicy as LatePolicy  # the barrier's own name for it, too
from ..errors import InvalidPositionError, LateMessageError
from ..observability.logs import fields, get_logger
from ..wire.messages import TsMsg
from ..wire.pack import MsgPack
from ..wire.plans import KIND_DATA, KIND_DEAD, KIND_DML, KIND_TICK, ReadyPlan
from ..wire.position import MsgPosition
from ..wire.rows import Rows, message_rows
from .tick_rules import (
    Arrival,
    ChannelClock,
    FirstSeen,
    common_tick,
    resume_boundary,
    runs_have_repeats,
)

log = get_logger(__name__)

LateHandler = Callable[[str, TsMsg, LateMessageError], None]

_TRIM_ROWS = 1
"""Rows a channel's log may keep behind its oldest row still needed before it is cut:
delivered messages are let go at once (their payloads may be large), which costs a
move of the few rows still pending per channel and pack."""


@dataclass(slots=True)
class BarrierStats:
    """What the barrier did so far, message by message."""

    packs: int = 0
    messages: int = 0
    """Messages delivered in packs (time ticks are not delivered)."""
    late_delivered: int = 0
    """Messages timestamped at or below their channel's last tick, delivered anyway
    (``late_policy="deliver"``)."""
    late_rejected: int = 0
    """Late messages dropped (``late_policy="reject"``)."""
    duplicates_dropped: int = 0
    """Inserts and deletes dropped because their (source_id, msg_id) was delivered before."""
    resume_skipped: int = 0
    """Messages at or before the positions a seek resumed from, dropped."""


@dataclass(slots=True)
class _Channel:
    index: int
    name: str
    rows: Rows
    """Every row read since the oldest one still needed, in arrival order (ticks and
    dropped messages included, as ``KIND_TICK`` / ``KIND_DEAD`` rows)."""
    lo: int = 0
    """The first row no pack cut has looked at yet."""
    held: list[int] = field(default_factory=list)
    """Data rows before ``lo`` whose timestamp was above the cut that saw them."""
    clock: ChannelClock = field(default_factory=ChannelClock)
    data_pending: int = 0
    bytes_pending: int = 0
    """Payload bytes of the ``data_pending`` messages."""
    start: MsgPosition | None = None
    """Where the next pack starts on this channel."""


class TickBarrier:
    def __init__(
        self,
        channels: Sequence[str],
        *,
        late_policy: LatePolicy = STREAM_DEFAULTS.late_policy,
        on_late: LateHandler | None = None,
        channel_capacity: int = STREAM_DEFAULTS.tt_channel_buffer_size,
        channel_byte_limit: int = STREAM_DEFAULTS.tt_channel_buffer_bytes,
        backend: str = "",
        subscription: str = "",
    ) -> None:
        if not channels:
            raise ValueError("a time-tick barrier needs at least one channel")
        if len(set(channels)) != len(channels):
            raise ValueError(f"duplicate channels in {list(channels)}")
        self._channels = {name: _Channel(i, name, Rows(name)) for i, name in enumerate(channels)}
        self._order = list(self._channels.values())
        self.late_policy = late_policy
        self._on_late = on_late
        self.capacity = channel_capacity
        self.byte_limit = channel_byte_limit
        self._stall_reported = False
        self.emitted_end_ts = 0
        self.stats = BarrierStats()
        self._backend = backend
        self._subscription = subscription

    @property
    def channels(self) -> list[str]:
        return [c.name for c in self._order]

    def resume_from(self, positions: Sequence[MsgPosition]) -> None:
        """Prepare for messages read after a seek to ``positions`` (a pack's end positions)."""
        for position in positions:
            state = self._channel(position.channel)
            state.clock.resume(position.timestamp, position.examined)
            state.start = position
        if positions:
            self.emitted_end_ts = min(p.timestamp for p in positions)

    def _channel(self, name: str) -> _Channel:
        try:
            return self._channels[name]
        except KeyError:
            raise InvalidPositionError(f"channel {name!r} is not part of this barrier") from None

    def end_ts(self) -> int | None:
        """The time every channel has reached, or None while some channel has no tick."""
        return common_tick([c.clock.last_tick for c in self._order])

    def wants(self, channel: str) -> bool:
        """Whether reading more of ``channel`` is allowed now (bounded buffers).

        A channel below its limits (messages and bytes pending) may always be read; a
        full one only while time waits on it (it has no tick yet, or it holds the
        minimum tick), so the barrier can never deadlock on a full buffer: whichever
        channel holds time back can always be read until it ticks. A full channel that
        has ticked is not read while another channel has no tick yet, so a channel that
        never ticks cannot make the others grow without bound.
        """
        state = self._channel(channel)
        return (
            state.data_pending < self.capacity and state.bytes_pending < self.byte_limit
        ) or self._waits_on(state)

    def _waits_on(self, state: _Channel) -> bool:
        last_tick = state.clock.last_tick
        if last_tick is None:
            return True
        end = self.end_ts()
        return end is not None and last_tick <= end

    def last_ticks(self) -> list[int | None]:
        """Each channel's last tick (None before its first), in channel order."""
        return [state.clock.last_tick for state in self._order]

    def pending(self, channel: str) -> int:
        """``channel``'s data messages read but not yet emitted."""
        return self._channel(channel).data_pending

    def pending_bytes(self, channel: str) -> int:
        """Payload bytes of ``channel``'s messages read but not yet emitted."""
        return self._channel(channel).bytes_pending

    def waiting_on(self) -> list[str]:
        """The channels time waits on: those without a tick, else those whose last tick
        is the minimum. Reading them is what lets the next pack be cut."""
        return [state.name for state in self._order if self._waits_on(state)]

    def report_stall(self, blocked: Sequence[str]) -> None:
        """Hook: the stream must wait for input while ``blocked`` channels are held at
        their limits, i.e. time waits on channels with nothing read (e.g. a channel that
        never ticks). Logged once per stall (until the next pack is cut): as a warning
        while a channel time waits on has no tick yet, else (a channel merely behind) at
        debug level."""
        if self._stall_reported:
            return
        self._stall_reported = True
        waiting = self.waiting_on()
        silent = [c for c in waiting if self._channels[c].clock.last_tick is None]
        # No tick at all is what a channel that never ticks looks like; a channel that
        # has ticked but is read more slowly than the others is only behind for a while.
        log.log(
            logging.WARNING if silent else logging.DEBUG,
            "time-tick barrier stalled: waiting on channel(s) %s (%s); channel(s) %s are "
            "held at their buffer limits (%d messages, %d bytes each) until then",
            waiting,
            "no time tick read yet" if silent else f"last tick {self.end_ts()}",
            list(blocked),
            self.capacity,
            self.byte_limit,
            extra=self._log_fields(waiting[0] if len(waiting) == 1 else None),
        )

    def _log_fields(self, channel: str | None) -> dict[str, str | None]:
        return fields(self._backend, channel, self._subscription)

    # --- feeding ----------------------------------------------------------------------
    def push(self, channel: str, msg: TsMsg) -> None:
        """Feed one message read from ``channel`` (its ``position`` set)."""
        state = self._channels.get(channel) or self._channel(channel)
        self._push_row(state, message_rows(channel, msg), 0)

    def push_rows(self, channel: str, rows: Rows, lo: int) -> tuple[int, bool]:
        """Feed rows of ``channel`` from ``rows[lo]`` on, up to and including the next
        tick, as far as :meth:`wants` allows before each one.

        Returns how many rows were taken and whether the last one was a tick (then a
        pack may be due). The same as :meth:`push` of each message in turn, checking
        :meth:`wants` before each, and stopping after a tick.
        """
        state = self._channels.get(channel) or self._channel(channel)
        kinds, stamps = rows.kinds, rows.ts
        tick = kinds.find(KIND_TICK, lo)
        data_end = len(kinds) if tick < 0 else tick
        hi = data_end if tick < 0 else tick + 1
        clock = state.clock
        nbytes = sum(map(len, rows.payloads[lo:data_end]))
        if (
            clock.all_on_time(stamps, lo, data_end)
            and (tick < 0 or stamps[tick] > self.emitted_end_ts)
            and (
                (
                    state.data_pending + hi - lo <= self.capacity
                    and state.bytes_pending + nbytes < self.byte_limit
                )
                or self._waits_on(state)
            )
        ):  # no late, skipped or stale message, and room for all: take them as they are
            if state.start is None:
                state.start = rows.position(lo)
            state.rows.group = rows.group
            state.rows.extend(rows, lo, hi)
            state.data_pending += data_end - lo
            state.bytes_pending += nbytes
            if tick >= 0:
                clock.tick(stamps[tick])
            return hi - lo, tick >= 0
        state.rows.group = rows.group
        for index in range(lo, hi):
            if not self.wants(channel):
                return index - lo, False
            self._push_row(state, rows, index)
        return hi - lo, tick >= 0

    def _push_row(self, state: _Channel, rows: Rows, index: int) -> None:
        """Feed one row: the rules of the barrier, message by message."""
        log_rows = state.rows
        if state.start is None:
            state.start = rows.position(index)
        ts = rows.ts[index]
        kind = rows.kinds[index]
        clock = state.clock
        if kind == KIND_TICK:
            clock.tick(ts)
            log_rows.append_row(rows, index, KIND_TICK if ts > self.emitted_end_ts else KIND_DEAD)
            return
        arrival = clock.arrival(ts)
        if arrival is Arrival.SKIPPED:
            self.stats.resume_skipped += 1
            log_rows.append_row(rows, index, KIND_DEAD)
            return
        if arrival is Arrival.LATE:
            assert clock.last_tick is not None
            msg = rows.build(index)
            error = LateMessageError(state.name, msg.msg_id, ts, clock.last_tick)
            if self.late_policy == "reject":
                self.stats.late_rejected += 1
                log.error(
                    "%s; rejected (late_policy=reject)", error, extra=self._log_fields(state.name)
                )
                log_rows.append_row(rows, index, KIND_DEAD)
            else:
                self.stats.late_delivered += 1
                log.warning(
                    "%s; delivered in the next pack", error, extra=self._log_fields(state.name)
                )
                # Deliver the very object the callback saw.
                log_rows.append_row(rows, index, kind)
                log_rows.plans[-1] = ReadyPlan(msg)
                state.data_pending += 1
                state.bytes_pending += len(rows.payloads[index])
            self._report_late(state.name, msg, error)
            return
        log_rows.append_row(rows, index, kind)
        state.data_pending += 1
        state.bytes_pending += len(rows.payloads[index])

    def _report_late(self, channel: str, msg: TsMsg, error: LateMessageError) -> None:
        if self._on_late is None:
            return
        try:
            self._on_late(channel, msg, error)
        except Exception:  # the message is kept (or counted) already; a callback can't lose it
            log.exception(
                "on_late callback failed on channel %r", channel, extra=self._log_fields(channel)
            )

    # --- cutting packs --------------------------------------------------------------------
    def pop(self) -> MsgPack | None:
        """The next pack if time advanced, else None."""
        end = self.end_ts()
        if end is None or end <= self.emitted_end_ts:
            return None
        begin = self.emitted_end_ts
        stamps: list[int] = []
        msgs: list[TsMsg] = []
        start_positions: list[MsgPosition] = []
        end_positions: list[MsgPosition] = []
        ack_positions: list[MsgPosition] = []
        channels_with_data = 0
        for state in self._order:
            before = len(msgs)
            head = self._cut(state, end, stamps, msgs)
            channels_with_data += len(msgs) > before
            rows = state.rows
            last = len(rows) - 1
            # The first message on the channel not emitted yet (where a stream resumed
            # here reads from), and the one read before it.
            head_index, examined = resume_boundary(head, last)
            head_position = rows.position(head_index)
            assert head_position is not None, "a channel with a tick has read a message"
            done_index = head - 1 if head is not None else last
            done = rows.position(done_index) if done_index >= 0 else None
            if done is not None:
                ack_positions.append(done)
            start = state.start or head_position
            start_positions.append(start._replace(timestamp=begin, examined=0))
            # A stream resumed here skips only among the messages read so far: a late
            # one read after this cut is not in the pack, so it must not be skipped then.
            end_position = head_position._replace(timestamp=end, examined=examined)
            end_positions.append(end_position)
            state.start = end_position
            self._trim(state, done_index)
        if channels_with_data > 1 or stamps != sorted(stamps):
            # A stable sort on the timestamp alone: equal timestamps keep channel order,
            # then arrival order, as the rows were gathered channel by channel.
            order = sorted(range(len(stamps)), key=stamps.__getitem__)
            msgs = list(map(msgs.__getitem__, order))
        self.emitted_end_ts = end
        self._stall_reported = False
        self.stats.packs += 1
        self.stats.messages += len(msgs)
        return MsgPack(
            msgs=msgs,
            begin_ts=begin,
            end_ts=end,
            start_positions=start_positions,
            end_positions=end_positions,
            ack_positions=ack_positions,
        )

    def _cut(self, state: _Channel, end: int, stamps: list[int], msgs: list[TsMsg]) -> int | None:
        """Move the channel's messages with ``ts <= end`` (in arrival order) to
        ``stamps``/``msgs``; return the row of its first message not emitted, if any."""
        rows = state.rows
        kinds, ts = rows.kinds, rows.ts
        lo = state.lo
        # Everything up to the first tick above ``end`` is looked at: what follows that
        # tick has a larger timestamp (the channel's promise), so it stays.
        cut, at = len(kinds), lo
        while (tick := kinds.find(KIND_TICK, at)) >= 0:
            if ts[tick] > end:
                cut = tick
                break
            at = tick + 1
        if state.held:
            looked = -1  # rows held back by an earlier cut: row by row
        elif lo == cut:
            looked = lo  # nothing new to look at
        else:
            looked = self._cut_whole(state, lo, cut, end, stamps, msgs)
        if looked < 0:
            self._cut_each(state, chain(state.held, range(lo, cut)), end, stamps, msgs)
            looked = cut
        state.lo = looked
        head = state.held[0] if state.held else looked
        while head < len(kinds) and kinds[head] == KIND_DEAD:
            head += 1
        return head if head < len(kinds) else None

    def _cut_whole(
        self, state: _Channel, lo: int, cut: int, end: int, stamps: list[int], msgs: list[TsMsg]
    ) -> int:
        """Emit rows ``lo:cut`` in runs if nothing in them needs a look of its own.

        Up to the last tick (all ticks here are at or below ``end``) there must be only
        DML data and ticks, no timestamp above ``end`` and no repeated (source_id,
        msg_id); after it only data above ``end``, which stays (those rows are looked at
        again by the next cut, as row-by-row cutting would hold them back). Returns where
        the next cut starts, or -1 (having emitted nothing) if a row needs a look.
        """
        rows = state.rows
        kinds, ts = rows.kinds, rows.ts
        after = kinds.rfind(KIND_TICK, lo, cut) + 1 or lo
        if after < cut and (
            kinds.count(KIND_DML, after, cut) + kinds.count(KIND_DATA, after, cut) != cut - after
            or min(ts[after:cut]) <= end
        ):
            return -1
        if after == lo:
            return lo
        ticks = kinds.count(KIND_TICK, lo, after)
        if kinds.count(KIND_DML, lo, after) + ticks != after - lo or max(ts[lo:after]) > end:
            return -1
        runs: list[tuple[int, int]] = []  # the data between the ticks
        at = lo
        for _ in range(ticks):
            tick = kinds.find(KIND_TICK, at, after)
            if tick > at:
                runs.append((at, tick))
            at = tick + 1
        if runs_have_repeats(rows.sources, rows.msg_ids, runs):
            return -1
        count = nbytes = 0
        payloads = rows.payloads
        for a, b in runs:
            stamps += ts[a:b]
            msgs += rows.build_range(a, b)
            count += b - a
            nbytes += sum(map(len, payloads[a:b]))
        state.data_pending -= count
        state.bytes_pending -= nbytes
        return after

    def _cut_each(
        self,
        state: _Channel,
        candidates: Iterable[int],
        end: int,
        stamps: list[int],
        msgs: list[TsMsg],
    ) -> None:
        """Emit row by row: held rows first, then the new ones, in arrival order."""
        rows = state.rows
        kinds, ts = rows.kinds, rows.ts
        held: list[int] = []
        emitted: list[int] = []
        first = FirstSeen()
        sources, msg_ids = rows.sources, rows.msg_ids
        for index in candidates:
            kind = kinds[index]
            if kind in (KIND_TICK, KIND_DEAD):
                continue
            if ts[index] > end:
                held.append(index)
                continue
            state.data_pending -= 1
            state.bytes_pending -= len(rows.payloads[index])
            if kind == KIND_DML and not first.first(sources[index], msg_ids[index]):
                self.stats.duplicates_dropped += 1
                continue
            stamps.append(ts[index])
            emitted.append(index)
        msgs += rows.build_at(emitted)
        state.held = held

    def _trim(self, state: _Channel, done_index: int) -> None:
        """Forget rows before ``done_index`` (the last one an ack may still name)."""
        if done_index < _TRIM_ROWS:
            return
        state.rows.drop_front(done_index)
        state.lo -= done_index
        if state.held:
            state.held = [index - done_index for index in state.held]


def merge_packs(packs: Sequence[MsgPack]) -> MsgPack:
    """Join consecutive packs into one (pursuit mode)."""
    if not packs:
        raise ValueError("nothing to merge")
    if len(packs) == 1:
        return packs[0]
    return MsgPack(
        msgs=[m for p in packs for m in p.msgs],
        begin_ts=packs[0].begin_ts,
        end_ts=packs[-1].end_ts,
        start_positions=packs[0].start_positions,
        end_positions=packs[-1].end_positions,
        ack_positions=packs[-1].ack_positions,
    )
