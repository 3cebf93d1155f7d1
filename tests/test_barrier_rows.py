"""The row barrier against the message-by-message barrier it replaced.

``ReferenceBarrier`` below is the time-tick barrier as it was before messages moved
through it as rows (``msgstream.wire.rows``): fed one decoded message at a time. The property
test feeds both the same random channels (late data, repeated msg_ids, stale ticks,
different tick values, non-DML data, small capacities, a resume), the row barrier
through ``push_rows`` in random chunks, and requires the same packs, positions, stats and
late reports, message for message.
"""

from __future__ import annotations

import logging
import operator
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from msgstream.errors import InvalidPositionError, LateMessageError
from msgstream.timetick.barrier import TickBarrier
from msgstream.wire.codec import decode, decode_batch, encode
from msgstream.wire.messages import DeleteMsg, DropCollectionMsg, InsertMsg, TimeTickMsg, TsMsg
from msgstream.wire.pack import MsgPack
from msgstream.wire.position import MsgPosition
from msgstream.wire.rows import Rows, decoded_rows
from msgstream.wire.schema import DataType, FieldData

log = logging.getLogger(__name__)

_TIME_TICK = TimeTickMsg.MSG_TYPE
_DML_TYPES = frozenset({InsertMsg.MSG_TYPE, DeleteMsg.MSG_TYPE})

LatePolicy = Literal["deliver", "reject"]
LateHandler = Callable[[str, TsMsg, LateMessageError], None]


@dataclass(slots=True)
class _Stats:
    packs: int = 0
    messages: int = 0
    late_delivered: int = 0
    late_rejected: int = 0
    duplicates_dropped: int = 0
    resume_skipped: int = 0


@dataclass(slots=True)
class _RefChannel:
    index: int
    name: str
    last_tick: int | None = None
    pending: deque[tuple[int, TsMsg, MsgPosition | None, int]] = field(default_factory=deque)
    """(ts, msg, position of the message read before it, its number among the messages
    read) read but not emitted, ticks included, in arrival order."""
    reads: int = 0
    """Messages read on the channel so far."""
    data_pending: int = 0
    bytes_pending: int = 0
    last_read: MsgPosition | None = None
    start: MsgPosition | None = None
    """Where the next pack starts on this channel."""
    resume_ts: int | None = None
    """After a seek: drop data with ts <= this until a tick above it is read..."""
    resume_until: int | None = None
    """...or until this many messages have been read (the position's ``examined``)."""


class ReferenceBarrier:
    def __init__(
        self,
        channels: Sequence[str],
        *,
        late_policy: LatePolicy = "deliver",
        on_late: LateHandler | None = None,
        channel_capacity: int = 65536,
        channel_byte_limit: int = 64 * 1024 * 1024,
    ) -> None:
        if not channels:
            raise ValueError("a time-tick barrier needs at least one channel")
        if len(set(channels)) != len(channels):
            raise ValueError(f"duplicate channels in {list(channels)}")
        self._channels = {name: _RefChannel(i, name) for i, name in enumerate(channels)}
        self._order = list(self._channels.values())
        self.late_policy = late_policy
        self._on_late = on_late
        self.capacity = channel_capacity
        self.byte_limit = channel_byte_limit
        self.emitted_end_ts = 0
        self.stats = _Stats()

    @property
    def channels(self) -> list[str]:
        return [c.name for c in self._order]

    def resume_from(self, positions: Sequence[MsgPosition]) -> None:
        """Prepare for messages read after a seek to ``positions`` (a pack's end positions)."""
        for position in positions:
            state = self._channel(position.channel)
            state.resume_ts = position.timestamp
            state.resume_until = position.examined or None
            state.start = position
        if positions:
            self.emitted_end_ts = min(p.timestamp for p in positions)

    def _channel(self, name: str) -> _RefChannel:
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

        A channel below its limits (messages and encoded bytes pending) may always be
        read; a full one only while time waits on it (it has no tick yet, or it holds
        the minimum tick while every channel has one), so the barrier can never deadlock
        on a full buffer, and a channel without ticks does not let the others grow.
        """
        state = self._channel(channel)
        if state.data_pending < self.capacity and state.bytes_pending < self.byte_limit:
            return True
        if state.last_tick is None:
            return True
        end = self.end_ts()
        return end is not None and state.last_tick <= end

    def push(self, channel: str, msg: TsMsg) -> None:
        """Feed one message read from ``channel`` (its ``position`` set)."""
        state = self._channels.get(channel) or self._channel(channel)
        ts = msg.end_ts
        previous = state.last_read
        state.last_read = msg.position
        number = state.reads
        state.reads += 1
        if state.start is None:
            state.start = msg.position
        if state.resume_until is not None and number >= state.resume_until:
            state.resume_ts = state.resume_until = None  # past what the resumed cut had read
        if msg.MSG_TYPE == _TIME_TICK:
            if state.resume_ts is not None and ts > state.resume_ts:
                state.resume_ts = state.resume_until = None
            if state.last_tick is None or ts > state.last_tick:
                state.last_tick = ts
            if ts > self.emitted_end_ts:
                state.pending.append((ts, msg, previous, number))
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
                self._keep(state, ts, msg, previous, number)
            self._report_late(channel, msg, error)
            return
        state.pending.append((ts, msg, previous, number))  # _keep, inlined: the hot path
        state.data_pending += 1
        state.bytes_pending += msg.size

    @staticmethod
    def _keep(
        state: _RefChannel, ts: int, msg: TsMsg, previous: MsgPosition | None, number: int
    ) -> None:
        state.pending.append((ts, msg, previous, number))
        state.data_pending += 1
        state.bytes_pending += msg.size

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
            kept: list[tuple[int, TsMsg, MsgPosition | None, int]] = []
            seen: set[tuple[int, int]] = set()
            while pending:
                ts, msg, _, _ = pending[0]
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
                state.bytes_pending -= msg.size
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
            start_positions.append(start._replace(timestamp=begin, examined=0))
            # Messages read from the head on: a resumed stream skips only among them.
            examined = state.reads - (pending[0][3] if pending else state.reads - 1)
            end_position = head._replace(timestamp=end, examined=examined)
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


# --- random channels ------------------------------------------------------------------------

GROUP = "sub"


@dataclass(frozen=True)
class Event:
    kind: str  # tick, delete, delete_str, insert, drop
    ts: int
    msg_id: int = 0
    source: int = 0


def message(event: Event) -> TsMsg:
    header: dict[str, Any] = {
        "msg_id": event.msg_id,
        "timestamp": event.ts,
        "source_id": event.source,
    }
    if event.kind == "tick":
        return TimeTickMsg(**header)
    if event.kind == "delete":
        return DeleteMsg(**header, collection_name="c", primary_keys=[event.msg_id])
    if event.kind == "delete_str":
        return DeleteMsg(**header, collection_name="c", primary_keys=[f"k{event.msg_id}"])
    if event.kind == "insert":
        return InsertMsg(
            **header,
            collection_name="c",
            row_ids=[1, 2],
            row_timestamps=[event.ts - 1, event.ts],
            fields=[FieldData("x", DataType.FLOAT, [0.5, 1.5])],
        )
    return DropCollectionMsg(**header, collection_name="c")


@st.composite
def channel_events(draw: st.DrawFn, first_id: int) -> list[Event]:
    events: list[Event] = []
    tick = 0
    for _ in range(draw(st.integers(0, 5))):
        for _ in range(draw(st.integers(0, 4))):
            kind = draw(st.sampled_from(["delete", "delete", "delete_str", "insert", "drop"]))
            late = draw(st.integers(0, 9)) == 0
            ts = draw(st.integers(1, tick)) if late and tick else tick + draw(st.integers(1, 15))
            msg_id = first_id + draw(st.integers(0, 6))  # small pool: repeats happen
            events.append(Event(kind, ts, msg_id, draw(st.integers(0, 1))))
        stale = draw(st.integers(0, 9)) == 0
        step = draw(st.integers(1, 12))
        tick = max(1, tick - step) if stale and tick > 1 else tick + step
        events.append(Event("tick", tick))
    events.append(Event("tick", 1000))
    return events


@dataclass
class Script:
    channels: list[list[Event]]
    order: list[int]
    chunks: list[list[int]]
    capacity: int
    policy: LatePolicy
    byte_limit: int = 64 * 1024 * 1024


@st.composite
def scripts(draw: st.DrawFn) -> Script:
    count = draw(st.integers(1, 4))
    channels = [draw(channel_events(100 * c)) for c in range(count)]
    order = draw(st.lists(st.integers(0, count - 1), max_size=80))
    chunks = [draw(st.lists(st.integers(1, 6), min_size=1, max_size=8)) for _ in channels]
    capacity = draw(st.sampled_from([1, 2, 5, 65536]))
    policy = draw(st.sampled_from(["deliver", "reject"]))
    # Encoded messages here are 100 to 300 bytes: limits of about one and a few of them.
    byte_limit = draw(st.sampled_from([1, 150, 600, 64 * 1024 * 1024]))
    return Script(channels, order, chunks, capacity, policy, byte_limit)


def row_id(index: int) -> bytes:
    return b"r" + index.to_bytes(8, "big", signed=True)


class Feed:
    """One channel as a reader would buffer it: chunks of rows for the row barrier,
    and the same messages decoded one by one (positioned) for the reference."""

    def __init__(self, name: str, events: list[Event], start: int, sizes: list[int]) -> None:
        self.name = name
        payloads = [encode(message(e)) for e in events]
        self.chunks: deque[tuple[Rows, int]] = deque()
        self.messages: deque[TsMsg] = deque()
        index, turn = start, 0
        while index < len(events):
            size = sizes[turn % len(sizes)]
            turn += 1
            batch = payloads[index : index + size]
            decoded = decode_batch(batch)
            assert not decoded.bad
            ids = [row_id(i) for i in range(index, index + len(batch))]
            rows = decoded_rows(name, GROUP, decoded, batch, ids)
            self.chunks.append((rows, 0))
            for offset, payload in enumerate(batch):
                msg = decode(payload)
                msg.position = MsgPosition(name, row_id(index + offset), GROUP, msg.timestamp)
                self.messages.append(msg)
            index += len(batch)

    def take(self, count: int) -> None:
        rows, lo = self.chunks.popleft()
        if lo + count < len(rows):
            self.chunks.appendleft((rows, lo + count))


def shape(pack: MsgPack) -> tuple[Any, ...]:
    return (
        [(type(m).__name__, m.position, m.msg_id, m.timestamp, m.source_id) for m in pack.msgs],
        pack.begin_ts,
        pack.end_ts,
        pack.start_positions,
        pack.end_positions,
        pack.ack_positions,
    )


class Twins:
    """Both barriers, fed the same way, compared after every step."""

    def __init__(self, names: list[str], script: Script) -> None:
        self.late: tuple[list[Any], list[Any]] = ([], [])

        def reporter(into: list[Any]) -> LateHandler:
            return lambda c, m, e: into.append((c, m.msg_id, e.timestamp, e.last_tick))

        options: dict[str, Any] = {
            "late_policy": script.policy,
            "channel_capacity": script.capacity,
            "channel_byte_limit": script.byte_limit,
        }
        self.rows = TickBarrier(names, on_late=reporter(self.late[0]), **options)
        self.ref = ReferenceBarrier(names, on_late=reporter(self.late[1]), **options)
        self.packs: list[MsgPack] = []

    def step(self, feed: Feed) -> bool:
        """One run of rows (up to a tick, or as far as the barrier wants). False when
        nothing moved."""
        if not feed.chunks:
            return False
        wants = self.rows.wants(feed.name)
        assert wants == self.ref.wants(feed.name)
        if not wants:
            return False
        rows, lo = feed.chunks[0]
        taken, ticked = self.rows.push_rows(feed.name, rows, lo)
        feed.take(taken)
        expected, ref_ticked = 0, False
        while feed.messages and expected < taken:
            assert self.ref.wants(feed.name)
            msg = feed.messages.popleft()
            self.ref.push(feed.name, msg)
            expected += 1
            ref_ticked = isinstance(msg, TimeTickMsg)
        assert (taken, ticked) == (expected, ref_ticked)
        if ticked:
            self.pop()
        return taken > 0

    def pop(self) -> None:
        ours, theirs = self.rows.pop(), self.ref.pop()
        assert (ours is None) == (theirs is None)
        if ours is not None and theirs is not None:
            assert shape(ours) == shape(theirs)
            self.packs.append(ours)

    def check(self) -> None:
        ours, theirs = self.rows.stats, self.ref.stats
        assert (
            ours.packs,
            ours.messages,
            ours.late_delivered,
            ours.late_rejected,
            ours.duplicates_dropped,
            ours.resume_skipped,
        ) == (
            theirs.packs,
            theirs.messages,
            theirs.late_delivered,
            theirs.late_rejected,
            theirs.duplicates_dropped,
            theirs.resume_skipped,
        )
        assert self.late[0] == self.late[1]
        assert self.rows.end_ts() == self.ref.end_ts()


def run(twins: Twins, feeds: list[Feed], order: list[int]) -> None:
    for channel in order:
        twins.step(feeds[channel])
    while any([twins.step(feed) for feed in feeds]):
        pass
    twins.pop()
    twins.check()


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scripts(), st.data())
def test_rows_barrier_matches_the_message_barrier(script: Script, data: st.DataObject) -> None:
    names = [f"ch{i}" for i in range(len(script.channels))]
    twins = Twins(names, script)
    feeds = [
        Feed(name, events, 0, sizes)
        for name, events, sizes in zip(names, script.channels, script.chunks, strict=True)
    ]
    run(twins, feeds, script.order)
    if not twins.packs:
        return
    # Resume both from a pack's end positions, reading on from there.
    pack = data.draw(st.sampled_from(twins.packs))
    again = Twins(names, script)
    again.rows.resume_from(pack.end_positions)
    again.ref.resume_from(pack.end_positions)
    start = {
        p.channel: int.from_bytes(p.msg_id[1:], "big", signed=True) for p in pack.end_positions
    }
    feeds = [
        Feed(name, events, start[name], sizes[::-1])
        for name, events, sizes in zip(names, script.channels, script.chunks, strict=True)
    ]
    run(again, feeds, data.draw(st.lists(st.integers(0, len(names) - 1), max_size=40)))


def test_ticks_ahead_in_one_chunk_still_give_one_pack_per_tick() -> None:
    script = Script([], [], [], 65536, "deliver")
    names = ["a", "b"]
    twins = Twins(names, script)
    events = [Event("delete", 5, 1), Event("tick", 10), Event("delete", 15, 2), Event("tick", 20)]
    feeds = [Feed(name, events, 0, [len(events)]) for name in names]
    run(twins, feeds, [0, 0, 1, 1])
    assert [(p.begin_ts, p.end_ts, len(p.msgs)) for p in twins.packs] == [
        (0, 10, 2),
        (10, 20, 2),
    ]


def test_a_late_message_is_delivered_as_the_object_its_callback_saw() -> None:
    seen: list[TsMsg] = []
    barrier = TickBarrier(["a"], on_late=lambda c, m, e: seen.append(m))
    events = [Event("tick", 10), Event("delete", 4, 9), Event("tick", 20)]
    feed = Feed("a", events, 0, [3])
    rows, lo = feed.chunks[0]
    assert barrier.push_rows("a", rows, lo) == (1, True)
    assert barrier.pop() is not None
    assert barrier.push_rows("a", rows, 1) == (2, True)
    pack = barrier.pop()
    assert pack is not None and len(seen) == 1
    assert pack.msgs == seen and pack.msgs[0] is seen[0]
    assert barrier.stats.late_delivered == 1
