"""The time-tick barrier: a pure state machine that turns per-channel message streams
into time-aligned packs. No I/O, no clock: it is fed messages and asked for packs.

Per channel it keeps the last tick seen and everything read but not yet emitted (data
and ticks above the last emitted ``end_ts``, in arrival order). A pack is due when
``min(last tick of every channel)`` passes the last emitted ``end_ts``; it holds every
buffered data message with ``ts <= end_ts``, ordered by (ts, channel order, arrival).
"""

from __future__ import annotations

import logging
import operator
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from .errors import InvalidPositionError, LateMessageError
from .messages import DeleteMsg, InsertMsg, TimeTickMsg, TsMsg
from .pack import MsgPack
from .position import MsgPosition

log = logging.getLogger(__name__)

_TIME_TICK = TimeTickMsg.MSG_TYPE
_DML_TYPES = frozenset({InsertMsg.MSG_TYPE, DeleteMsg.MSG_TYPE})

LatePolicy = Literal["deliver", "reject"]
LateHandler = Callable[[str, TsMsg, LateMessageError], None]


@dataclass(slots=True)
class BarrierStats:
    packs: int = 0
    messages: int = 0
    late_delivered: int = 0
    late_rejected: int = 0
    duplicates_dropped: int = 0
    resume_skipped: int = 0


@dataclass(slots=True)
class _Channel:
    index: int
    name: str
    last_tick: int | None = None
    pending: deque[tuple[int, TsMsg, MsgPosition | None]] = field(default_factory=deque)
    """(ts, msg, position of the message read before it) read but not emitted, ticks
    included, in arrival order."""
    data_pending: int = 0
    last_read: MsgPosition | None = None
    start: MsgPosition | None = None
    """Where the next pack starts on this channel."""
    resume_ts: int | None = None
    """After a seek: drop data with ts <= this until a tick above it is read."""


class TickBarrier:
    def __init__(
        self,
        channels: Sequence[str],
        *,
        late_policy: LatePolicy = "deliver",
        on_late: LateHandler | None = None,
        channel_capacity: int = 65536,
    ) -> None:
        if not channels:
            raise ValueError("a time-tick barrier needs at least one channel")
        if len(set(channels)) != len(channels):
            raise ValueError(f"duplicate channels in {list(channels)}")
        self._channels = {name: _Channel(i, name) for i, name in enumerate(channels)}
        self._order = list(self._channels.values())
        self.late_policy = late_policy
        self._on_late = on_late
        self.capacity = channel_capacity
        self.emitted_end_ts = 0
        self.stats = BarrierStats()

    @property
    def channels(self) -> list[str]:
        return [c.name for c in self._order]

    def resume_from(self, positions: Sequence[MsgPosition]) -> None:
        """Prepare for messages read after a seek to ``positions`` (a pack's end positions)."""
        for position in positions:
            state = self._channel(position.channel)
            state.resume_ts = position.timestamp
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
        ticks = [c.last_tick for c in self._order]
        if any(t is None for t in ticks):
            return None
        return min(t for t in ticks if t is not None)

    def wants(self, channel: str) -> bool:
        """Whether reading more of ``channel`` is allowed now (bounded buffers).

        A channel below its capacity may always be read; a full one only while time
        waits on it (it has no tick yet, or it holds the minimum tick), so the barrier
        can never deadlock on a full buffer.
        """
        state = self._channel(channel)
        if state.data_pending < self.capacity:
            return True
        end = self.end_ts()
        return state.last_tick is None or end is None or state.last_tick <= end

    def push(self, channel: str, msg: TsMsg) -> None:
        """Feed one message read from ``channel`` (its ``position`` set)."""
        state = self._channels.get(channel) or self._channel(channel)
        ts = msg.end_ts
        previous = state.last_read
        state.last_read = msg.position
        if state.start is None:
            state.start = msg.position
        if msg.MSG_TYPE == _TIME_TICK:
            if state.resume_ts is not None and ts > state.resume_ts:
                state.resume_ts = None
            if state.last_tick is None or ts > state.last_tick:
                state.last_tick = ts
            if ts > self.emitted_end_ts:
                state.pending.append((ts, msg, previous))
            return
        if state.resume_ts is not None and ts <= state.resume_ts:
            self.stats.resume_skipped += 1
            return
        if state.last_tick is not None and ts <= state.last_tick:
            error = LateMessageError(channel, msg.msg_id, ts, state.last_tick)
            if self.late_policy == "reject":
                self.stats.late_rejected += 1
                log.error("%s; rejected (late_policy=reject)", error)
            else:
                self.stats.late_delivered += 1
                log.warning("%s; delivered in the next pack", error)
                self._keep(state, ts, msg, previous)
            self._report_late(channel, msg, error)
            return
        state.pending.append((ts, msg, previous))  # _keep, inlined: the hot path
        state.data_pending += 1

    @staticmethod
    def _keep(state: _Channel, ts: int, msg: TsMsg, previous: MsgPosition | None) -> None:
        state.pending.append((ts, msg, previous))
        state.data_pending += 1

    def _report_late(self, channel: str, msg: TsMsg, error: LateMessageError) -> None:
        if self._on_late is None:
            return
        try:
            self._on_late(channel, msg, error)
        except Exception:  # the message is kept (or counted) already; a callback can't lose it
            log.exception("on_late callback failed on channel %r", channel)

    def pop(self) -> MsgPack | None:
        """The next pack if time advanced, else None."""
        end = self.end_ts()
        if end is None or end <= self.emitted_end_ts:
            return None
        begin = self.emitted_end_ts
        out: list[tuple[int, int, TsMsg]] = []
        start_positions: list[MsgPosition] = []
        end_positions: list[MsgPosition] = []
        ack_positions: list[MsgPosition] = []
        for state in self._order:
            # Scan in arrival order up to the first tick above ``end``: everything after
            # that tick has a larger timestamp (the channel's promise), so it stays.
            pending = state.pending
            kept: list[tuple[int, TsMsg, MsgPosition | None]] = []
            seen: set[tuple[int, int]] = set()
            while pending:
                ts, msg, _ = pending[0]
                is_tick = msg.MSG_TYPE == _TIME_TICK
                if ts > end:
                    if is_tick:
                        break
                    kept.append(pending.popleft())
                    continue
                pending.popleft()
                if is_tick:
                    continue
                state.data_pending -= 1
                if msg.MSG_TYPE in _DML_TYPES:
                    key = (msg.source_id, msg.msg_id)
                    if key in seen:
                        self.stats.duplicates_dropped += 1
                        continue
                    seen.add(key)
                out.append((ts, state.index, msg))
            if kept:
                pending.extendleft(reversed(kept))
            head = pending[0][1].position if pending else state.last_read
            assert head is not None, "a channel with a tick has read a message"
            done = pending[0][2] if pending else state.last_read
            if done is not None:
                ack_positions.append(done)
            start = state.start or head
            start_positions.append(start._replace(timestamp=begin))
            end_position = head._replace(timestamp=end)
            end_positions.append(end_position)
            state.start = end_position
        out.sort(key=_ORDER_KEY)
        self.emitted_end_ts = end
        self.stats.packs += 1
        self.stats.messages += len(out)
        return MsgPack(
            msgs=[m for _, _, m in out],
            begin_ts=begin,
            end_ts=end,
            start_positions=start_positions,
            end_positions=end_positions,
            ack_positions=ack_positions,
        )


_ORDER_KEY = operator.itemgetter(0, 1)
"""Sort key of emitted messages: (timestamp, channel index); the sort is stable, so
arrival order breaks the remaining ties."""


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
