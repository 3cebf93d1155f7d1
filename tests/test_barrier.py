"""The time-tick barrier as a pure state machine: unit tests and a property test."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from msgstream import DeleteMsg, InsertMsg, MsgPack, MsgPosition, TimeTickMsg, TsMsg
from msgstream.timetick.barrier import LatePolicy, TickBarrier, merge_packs


class Feed:
    """Builds messages with positions (msg id = per-channel sequence number)."""

    def __init__(self) -> None:
        self.seq: dict[str, int] = {}
        self.msg_ids = 0

    def _stamp(self, channel: str, msg: TsMsg) -> TsMsg:
        n = self.seq.get(channel, 0)
        self.seq[channel] = n + 1
        msg.position = MsgPosition(channel, n.to_bytes(8, "big"), "sub", msg.timestamp)
        return msg

    def data(self, channel: str, ts: int, msg_id: int | None = None) -> TsMsg:
        if msg_id is None:
            self.msg_ids += 1
            msg_id = self.msg_ids
        return self._stamp(channel, DeleteMsg(msg_id=msg_id, timestamp=ts, collection_name="c"))

    def tick(self, channel: str, ts: int) -> TsMsg:
        return self._stamp(channel, TimeTickMsg(timestamp=ts))


def ids(pack: MsgPack) -> list[int]:
    return [m.msg_id for m in pack.msgs]


def test_identical_ticks_on_all_channels() -> None:
    barrier, feed = TickBarrier(["a", "b"]), Feed()
    barrier.push("a", feed.data("a", 3))
    barrier.push("b", feed.data("b", 2))
    barrier.push("a", feed.tick("a", 10))
    assert barrier.pop() is None
    barrier.push("b", feed.tick("b", 10))
    pack = barrier.pop()
    assert pack is not None
    assert (pack.begin_ts, pack.end_ts, ids(pack)) == (0, 10, [2, 1])
    assert barrier.pop() is None


def test_different_tick_values_min_wins_and_nothing_stalls() -> None:
    barrier, feed = TickBarrier(["a", "b"]), Feed()
    barrier.push("a", feed.data("a", 5))
    barrier.push("a", feed.tick("a", 10))
    barrier.push("b", feed.data("b", 12))
    barrier.push("b", feed.tick("b", 15))
    first = barrier.pop()
    assert first is not None and (first.end_ts, ids(first)) == (10, [1])
    barrier.push("a", feed.tick("a", 30))
    second = barrier.pop()
    assert second is not None and (second.begin_ts, second.end_ts, ids(second)) == (10, 15, [2])


def test_a_channel_without_tick_blocks_the_pack() -> None:
    barrier, feed = TickBarrier(["a", "b", "c"]), Feed()
    for channel in ("a", "b"):
        barrier.push(channel, feed.data(channel, 1))
        barrier.push(channel, feed.tick(channel, 100))
    barrier.push("c", feed.data("c", 1))
    assert barrier.end_ts() is None and barrier.pop() is None
    barrier.push("c", feed.tick("c", 50))
    pack = barrier.pop()
    assert pack is not None and pack.end_ts == 50 and len(pack.msgs) == 3


def test_empty_pack_when_time_advances() -> None:
    barrier, feed = TickBarrier(["a"]), Feed()
    barrier.push("a", feed.tick("a", 10))
    barrier.push("a", feed.data("a", 15))
    barrier.push("a", feed.tick("a", 20))
    first = barrier.pop()
    assert first is not None
    assert (first.begin_ts, first.end_ts, ids(first)) == (0, 20, [1])
    barrier.push("a", feed.tick("a", 30))
    empty = barrier.pop()
    assert empty is not None and (empty.begin_ts, empty.end_ts, empty.msgs) == (20, 30, [])


def test_leftovers_stay_buffered_in_order() -> None:
    barrier, feed = TickBarrier(["a", "b"]), Feed()
    barrier.push("a", feed.tick("a", 10))
    for ts in (40, 12, 35, 11):
        barrier.push("a", feed.data("a", ts))
    barrier.push("a", feed.tick("a", 50))
    barrier.push("b", feed.tick("b", 20))
    first = barrier.pop()
    assert first is not None and [m.timestamp for m in first.msgs] == [11, 12]
    assert first.end_positions[0].msg_id == (1).to_bytes(8, "big")  # the message at ts 40
    assert [p.msg_id for p in first.ack_positions] == [(0).to_bytes(8, "big")] * 2
    barrier.push("b", feed.tick("b", 60))
    second = barrier.pop()
    assert second is not None and [m.timestamp for m in second.msgs] == [35, 40]
    assert [p.msg_id for p in second.ack_positions] == [
        (5).to_bytes(8, "big"),  # everything read on a is done
        (0).to_bytes(8, "big"),  # b's tick at 60 is above the pack: only its tick 20 is done
    ]


def test_order_is_timestamp_then_channel_then_arrival() -> None:
    barrier, feed = TickBarrier(["a", "b", "c"]), Feed()
    barrier.push("c", feed.data("c", 5, msg_id=1))
    barrier.push("b", feed.data("b", 5, msg_id=2))
    barrier.push("b", feed.data("b", 5, msg_id=3))
    barrier.push("a", feed.data("a", 7, msg_id=4))
    barrier.push("a", feed.data("a", 5, msg_id=5))
    barrier.push("c", feed.data("c", 3, msg_id=6))
    for channel in ("a", "b", "c"):
        barrier.push(channel, feed.tick(channel, 9))
    pack = barrier.pop()
    assert pack is not None and ids(pack) == [6, 5, 2, 3, 1, 4]


def test_end_positions_point_at_first_unemitted_message_or_last_read() -> None:
    barrier, feed = TickBarrier(["a", "b"]), Feed()
    barrier.push("a", feed.data("a", 5))
    barrier.push("a", feed.tick("a", 10))
    barrier.push("a", feed.data("a", 25))
    barrier.push("b", feed.tick("b", 20))
    pack = barrier.pop()
    assert pack is not None
    a_end, b_end = pack.end_positions
    assert (a_end.msg_id, a_end.timestamp) == ((2).to_bytes(8, "big"), 10)
    assert (b_end.msg_id, b_end.timestamp) == ((0).to_bytes(8, "big"), 10)
    assert [p.msg_id for p in pack.start_positions] == [(0).to_bytes(8, "big")] * 2


def test_dml_repeating_a_msg_id_within_a_pack_is_dropped() -> None:
    barrier, feed = TickBarrier(["a", "b"]), Feed()
    barrier.push("a", feed.data("a", 3, msg_id=7))
    barrier.push("a", feed.data("a", 4, msg_id=7))
    barrier.push("b", feed.data("b", 3, msg_id=7))
    insert = InsertMsg(msg_id=8, timestamp=4, collection_name="c")
    insert.position = MsgPosition("a", b"x", "", 4)
    barrier.push("a", insert)
    barrier.push("a", feed.tick("a", 10))
    barrier.push("b", feed.tick("b", 10))
    pack = barrier.pop()
    assert pack is not None
    assert [(m.position.channel if m.position else "", m.msg_id) for m in pack.msgs] == [
        ("a", 7),
        ("b", 7),
        ("a", 8),
    ]
    assert barrier.stats.duplicates_dropped == 1


@pytest.mark.parametrize(("policy", "expected"), [("deliver", [9]), ("reject", [])])
def test_late_data_is_delivered_next_pack_or_rejected(
    policy: LatePolicy, expected: list[int]
) -> None:
    seen: list[int] = []
    barrier = TickBarrier(["a"], late_policy=policy, on_late=lambda c, m, e: seen.append(m.msg_id))
    feed = Feed()
    barrier.push("a", feed.tick("a", 10))
    assert barrier.pop() is not None
    barrier.push("a", feed.data("a", 4, msg_id=9))
    barrier.push("a", feed.tick("a", 20))
    pack = barrier.pop()
    assert pack is not None and ids(pack) == expected
    assert seen == [9]


def test_full_channel_is_still_read_while_time_waits_on_it() -> None:
    barrier, feed = TickBarrier(["a", "b"], channel_capacity=2), Feed()
    barrier.push("a", feed.tick("a", 10))
    for ts in (11, 12):
        barrier.push("a", feed.data("a", ts))
    # a is full and has ticked: time waits on b (no tick yet), not on a, so reading
    # more of a would only grow memory for as long as b stays silent.
    assert not barrier.wants("a")
    assert barrier.wants("b") and barrier.waiting_on() == ["b"]
    barrier.push("b", feed.tick("b", 5))
    assert barrier.pop() is not None
    assert not barrier.wants("a")  # a is ahead of b and full
    assert barrier.wants("b")


def test_bad_construction() -> None:
    with pytest.raises(ValueError, match="at least one"):
        TickBarrier([])
    with pytest.raises(ValueError, match="duplicate"):
        TickBarrier(["a", "a"])
    with pytest.raises(ValueError, match="not part"):
        TickBarrier(["a"]).push("b", TimeTickMsg(timestamp=1))
    with pytest.raises(ValueError, match="nothing"):
        merge_packs([])


# --- property: random producers, random interleavings ---------------------------------------

Script = list[list[tuple[bool, int, int]]]
"""Per channel: (is_tick, ts, msg_id) in that channel's order."""

LATE_IDS_FROM = 1_000_000
"""msg_ids of late messages (stamped at or below a tick sent before them) start here."""


@st.composite
def scripts(draw: st.DrawFn, late: bool = False) -> tuple[Script, list[int]]:
    """Random channels of data and ticks; with ``late``, some data after a tick is stamped
    at or below it (a producer breaking the tick's promise)."""
    channels = draw(st.integers(1, 8))
    msg_id = 0
    late_id = LATE_IDS_FROM
    script: Script = []
    for _ in range(channels):
        events: list[tuple[bool, int, int]] = []
        tick = 0
        for _ in range(draw(st.integers(0, 6))):
            if late and tick:
                for _ in range(draw(st.integers(0, 2))):
                    late_id += 1
                    events.append((False, draw(st.integers(1, tick)), late_id))
            for _ in range(draw(st.integers(0, 4))):
                msg_id += 1
                events.append((False, tick + draw(st.integers(1, 15)), msg_id))
            tick += draw(st.integers(1, 12))
            tick = max(tick, max((ts for t, ts, _ in events if not t), default=0))
            events.append((True, tick, 0))
        events.append((True, 1000, 0))
        script.append(events)
    order = draw(st.permutations([c for c, ev in enumerate(script) for _ in ev]))
    return script, order


def run(
    barrier: TickBarrier,
    names: Sequence[str],
    script: Script,
    order: Sequence[int],
    start: Sequence[int] | None = None,
) -> list[MsgPack]:
    cursor = list(start) if start is not None else [0] * len(script)
    packs: list[MsgPack] = []
    for channel in order:
        if cursor[channel] >= len(script[channel]):
            continue
        index = cursor[channel]
        is_tick, ts, msg_id = script[channel][index]
        cursor[channel] += 1
        name = names[channel]
        msg: TsMsg = (
            TimeTickMsg(timestamp=ts)
            if is_tick
            else DeleteMsg(msg_id=msg_id, timestamp=ts, collection_name="c")
        )
        msg.position = MsgPosition(name, index.to_bytes(8, "big"), "", ts)
        barrier.push(name, msg)
        if is_tick:
            pack = barrier.pop()
            if pack is not None:
                packs.append(pack)
    return packs


@settings(max_examples=300, deadline=None)
@given(st.booleans().flatmap(lambda late: scripts(late=late)), st.data())
def test_every_message_once_in_its_slice_and_resume_anywhere(
    drawn: tuple[Script, list[int]], data: st.DataObject
) -> None:
    """Every message once, on time in its slice or late in a later one; a barrier resumed
    from any pack's end positions delivers exactly the rest, late messages included
    (wherever they fall against the positions and ticks, in any interleaving)."""
    script, order = drawn
    names = [f"ch{i}" for i in range(len(script))]
    packs = run(TickBarrier(names), names, script, order)
    emitted = [m.msg_id for p in packs for m in p.msgs]
    expected = sorted(msg_id for events in script for t, _, msg_id in events if not t)
    assert sorted(emitted) == expected
    previous = 0
    for pack in packs:
        assert pack.begin_ts == previous < pack.end_ts
        previous = pack.end_ts
        on_time = [m for m in pack.msgs if m.msg_id < LATE_IDS_FROM]
        assert all(pack.begin_ts < m.timestamp <= pack.end_ts for m in on_time)
        assert all(m.timestamp <= pack.end_ts for m in pack.msgs)

    k = data.draw(st.integers(0, len(packs) - 1))
    positions = packs[k].end_positions
    resumed = TickBarrier(names)
    resumed.resume_from(positions)
    start = [int.from_bytes(p.msg_id, "big") for p in positions]
    second_order = data.draw(
        st.permutations([c for c, ev in enumerate(script) for _ in range(len(ev) - start[c])])
    )
    rest = run(resumed, names, script, second_order, start)
    done = [m.msg_id for p in packs[: k + 1] for m in p.msgs]
    assert sorted([m.msg_id for p in rest for m in p.msgs]) == sorted(set(expected) - set(done))
    assert not rest or rest[0].begin_ts == packs[k].end_ts

    # Resuming a subscription after acknowledging the pack loses nothing.
    acked = {p.channel: int.from_bytes(p.msg_id, "big") + 1 for p in packs[k].ack_positions}
    after_ack = [acked.get(name, 0) for name in names]
    third_order = data.draw(
        st.permutations([c for c, ev in enumerate(script) for _ in range(len(ev) - after_ack[c])])
    )
    again = run(TickBarrier(names), names, script, third_order, after_ack)
    assert set(expected) - set(done) <= {m.msg_id for p in again for m in p.msgs}
