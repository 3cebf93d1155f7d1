"""The slice reader's rules (``SliceCut``) against the row-by-row reference barrier.

A reader of a precomputed time slice ``(begin, end]`` (a Spark task) reads one channel
from a boundary up to the first tick at or above ``end``. What it keeps must be what the
time-tick barrier itself would put in the pack ending at ``end``, had it resumed at that
boundary: the reference barrier of ``tests/test_barrier_rows.py`` is fed the same
messages, with a second channel that ticks exactly at ``end`` so its pack ends there.
Then, reading consecutive slices from the boundaries the planner picks delivers every
message at most once and every on-time Insert/Delete exactly once.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from msgstream.timetick.tick_rules import (
    Arrival,
    ChannelClock,
    FirstSeen,
    SliceCut,
    Verdict,
    common_tick,
    has_repeats,
    resume_boundary,
)
from msgstream.wire.messages import TimeTickMsg, TsMsg
from msgstream.wire.plans import KIND_DML, KIND_TICK, kind_of
from msgstream.wire.position import MsgPosition
from test_barrier_rows import GROUP, Event, ReferenceBarrier, channel_events, message, row_id

CHANNEL = "ch"
END = "_end"


def positioned(events: list[Event]) -> list[TsMsg]:
    out = []
    for index, event in enumerate(events):
        msg = message(event)
        msg.position = MsgPosition(CHANNEL, row_id(index), GROUP, msg.timestamp)
        out.append(msg)
    return out


def kind(event: Event) -> int:
    return kind_of(message(event).MSG_TYPE)


@dataclass
class Read:
    kept: list[int]
    """Indices of the messages the slice delivers, in reading order."""
    closed_at: int | None
    late: int


def read_slice(events: list[Event], start: int, begin: int, end: int) -> Read:
    cut = SliceCut(begin, end)
    kept: list[int] = []
    for index in range(start, len(events)):
        event = events[index]
        verdict = cut.take(kind(event), event.ts, event.source, event.msg_id)
        if verdict is Verdict.CLOSE:
            return Read(kept, index, cut.late)
        if verdict in (Verdict.KEEP, Verdict.KEEP_LATE):
            kept.append(index)
    return Read(kept, None, cut.late)


def reference_pack(events: list[Event], start: int, begin: int, end: int, stop: int) -> list[int]:
    """The reference barrier's pack ``(begin, end]`` of messages ``start..stop``."""
    barrier = ReferenceBarrier([CHANNEL, END])
    msgs = positioned(events)
    barrier.resume_from([MsgPosition(CHANNEL, row_id(start), GROUP, begin)])
    for msg in msgs[start : stop + 1]:
        barrier.push(CHANNEL, msg)
    tick = TimeTickMsg(msg_id=0, timestamp=end, source_id=0)
    tick.position = MsgPosition(END, b"e", GROUP, end)
    barrier.push(END, tick)
    pack = barrier.pop()
    assert pack is not None and (pack.begin_ts, pack.end_ts) == (begin, end)
    index = {id(m): i for i, m in enumerate(msgs)}
    return [index[id(m)] for m in pack.msgs]


@settings(max_examples=400, deadline=None)
@given(channel_events(0), st.data())
def test_a_slice_holds_what_the_barrier_resumed_at_its_boundary_packs(
    events: list[Event], data: st.DataObject
) -> None:
    start = data.draw(st.integers(0, len(events) - 1))
    begin = data.draw(st.integers(0, 60))
    end = data.draw(st.integers(begin + 1, 1000))
    read = read_slice(events, start, begin, end)
    assert read.closed_at is not None  # every channel ends with a tick at 1000
    expected = reference_pack(events, start, begin, end, read.closed_at)
    # the pack is ordered by timestamp (stably); the reader keeps reading order
    assert sorted(read.kept, key=lambda i: events[i].ts) == expected


def planner_boundary(events: list[Event], start: int, end: int) -> int:
    """Where the planner says the slice after ``end`` starts: the first message from
    ``start`` on stamped above ``end`` that is not a tick, else the last message."""
    for index in range(start, len(events)):
        if kind(events[index]) != KIND_TICK and events[index].ts > end:
            return index
    return len(events) - 1


@st.composite
def unique_ids(draw: st.DrawFn) -> list[Event]:
    """Channels whose messages all have distinct (source_id, msg_id): no retries."""
    events = draw(channel_events(0))
    return [Event(e.kind, e.ts, i, 0) for i, e in enumerate(events)]


@settings(max_examples=300, deadline=None)
@given(unique_ids(), st.data())
def test_consecutive_slices_deliver_each_message_once(
    events: list[Event], data: st.DataObject
) -> None:
    ticks = sorted({e.ts for e in events if e.kind == "tick"})
    ends = sorted(set(data.draw(st.lists(st.sampled_from(ticks), min_size=1, max_size=6))))
    delivered: list[int] = []
    start, begin = 0, 0
    for end in ends:
        read = read_slice(events, start, begin, end)
        assert read.closed_at is not None
        delivered += read.kept
        start, begin = planner_boundary(events, start, end), end
    assert len(delivered) == len(set(delivered))
    on_time = []
    last_tick = 0
    for index, event in enumerate(events):
        if event.kind == "tick":
            last_tick = max(last_tick, event.ts)
        elif event.ts > last_tick and event.ts <= ends[-1]:
            on_time.append(index)
    assert set(on_time) <= set(delivered)
    assert all(events[i].ts <= ends[-1] for i in delivered)


def test_a_tick_below_the_boundary_does_not_end_the_skipping() -> None:
    clock = ChannelClock(resume_ts=10)
    clock.tick(8)
    assert clock.arrival(9) is Arrival.SKIPPED  # read after the seek: an earlier slice's
    clock.tick(12)
    assert clock.arrival(9) is Arrival.LATE
    assert clock.arrival(13) is Arrival.ON_TIME
    clock.tick(11)  # stale: changes nothing
    assert clock.last_tick == 12


def test_skipping_ends_after_the_messages_the_cut_had_read() -> None:
    """A boundary that says its cut had read 3 messages: data at or below it is skipped
    among those 3 (delivered already) and late after them (in no pack yet)."""
    clock = ChannelClock()
    clock.resume(10, examined=3)
    clock.tick(10)  # 1: the closing tick itself, read again
    assert clock.arrival(9) is Arrival.SKIPPED  # 2: read by the cut, delivered
    assert clock.arrival(14) is Arrival.ON_TIME  # 3
    assert clock.arrival(9) is Arrival.LATE  # 4: read after the cut: late, not skipped
    assert clock.resume_ts is None and clock.resume_left is None
    unknown = ChannelClock()
    unknown.resume(10)  # examined not known: the tick rule alone, as before
    unknown.tick(10)
    for _ in range(5):
        assert unknown.arrival(9) is Arrival.SKIPPED


def test_a_slice_keeps_late_data_and_drops_retries_and_later_data() -> None:
    cut = SliceCut(10, 20)
    assert cut.take(KIND_DML, 5, 0, 1) is Verdict.PASS  # before a tick above 10: skipped
    assert cut.take(KIND_TICK, 15, 0, 0) is Verdict.PASS
    assert cut.take(KIND_DML, 12, 0, 2) is Verdict.KEEP_LATE
    assert cut.take(KIND_DML, 18, 0, 3) is Verdict.KEEP
    assert cut.take(KIND_DML, 18, 0, 3) is Verdict.PASS  # a retry
    assert cut.take(KIND_DML, 25, 0, 4) is Verdict.PASS  # a later slice's
    assert cut.take(KIND_TICK, 20, 0, 0) is Verdict.CLOSE
    assert cut.closed
    assert (cut.skipped, cut.late, cut.later, cut.duplicates) == (1, 1, 1, 1)


def test_common_tick_and_repeats() -> None:
    assert common_tick([3, None, 5]) is None
    assert common_tick([7, 3, 5]) == 3
    first = FirstSeen()
    assert first.first(1, 2) and not first.first(1, 2) and first.first(2, 2)
    assert has_repeats([0, 0, 0], [1, 2, 1])
    assert not has_repeats([0, 1], [1, 1])
    assert has_repeats([0, 1, 1], [1, 5, 5])


@settings(max_examples=300, deadline=None)
@given(
    last_tick=st.none() | st.integers(0, 30),
    resume=st.none() | st.tuples(st.integers(0, 30), st.integers(0, 4)),
    stamps=st.lists(st.integers(0, 40), max_size=6),
)
def test_a_run_all_on_time_is_what_arrival_says_of_each(
    last_tick: int | None, resume: tuple[int, int] | None, stamps: list[int]
) -> None:
    """The barrier's fast path asks the clock for a whole run; it may take the run only
    where the row-by-row rule would find every message on time (and, with no seek
    pending, exactly there)."""
    clock = ChannelClock(last_tick=last_tick)
    if resume is not None:
        clock.resume(*resume)
    before = (clock.last_tick, clock.resume_ts, clock.resume_left)
    whole = clock.all_on_time([99, *stamps, 99], 1, len(stamps) + 1)
    assert (clock.last_tick, clock.resume_ts, clock.resume_left) == before  # nothing counted
    each = all(clock.arrival(ts) is Arrival.ON_TIME for ts in stamps)
    assert not whole or each
    if resume is None:
        assert whole == each


def test_a_boundary_resumes_at_the_first_message_not_delivered_else_at_the_last_read() -> None:
    assert resume_boundary(None, 7) == (7, 1)  # all delivered: the last read, read again
    assert resume_boundary(3, 7) == (3, 5)  # messages 3..7 were read by the cut
    assert resume_boundary(7, 7) == (7, 1)
