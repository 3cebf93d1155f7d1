"""A reader's buffer (``RowQueue``) against a plain model of it.

``popleft`` builds the messages of a run of rows at once and hands them out one at a
time; ``advance`` (the barrier's way of taking rows) and ``clear`` (a seek) may come
between. Whatever the order, every message taken is the next row's, whole and with its
position, and the row count and byte count are exact after every step.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from msgstream.wire import checksum, envelope
from msgstream.wire.codec import decode, decode_batch, encode
from msgstream.wire.messages import DeleteMsg, InsertMsg, TimeTickMsg, TsMsg
from msgstream.wire.position import MsgPosition
from msgstream.wire.rows import RUN, RowQueue, Rows, decoded_rows

CHANNEL, GROUP = "ch", "sub"


def message(kind: int, n: int) -> TsMsg:
    if kind == 0:
        return TimeTickMsg(msg_id=n, timestamp=n + 1)
    if kind == 1:
        return DeleteMsg(msg_id=n, timestamp=n + 1, collection_name="c", primary_keys=[n])
    return InsertMsg(  # rows stamped apart: its begin_ts and end_ts differ
        msg_id=n,
        timestamp=n + 1,
        collection_name="c",
        row_ids=[n, n + 1],
        row_timestamps=[n + 3, n + 1],
    )


def chunk(kinds: list[int], first: int) -> Rows:
    """Rows of messages ``first``, ``first + 1``, ... of the given kinds, as a reader
    keeps them."""
    payloads = [encode(message(kind, first + i)) for i, kind in enumerate(kinds)]
    decoded = decode_batch(payloads)
    assert not decoded.bad
    return decoded_rows(
        CHANNEL, GROUP, decoded, payloads, [b"%08d" % (first + i) for i in range(len(kinds))]
    )


kinds_of_a_chunk = st.lists(st.sampled_from([0, 1, 1, 1, 2]), min_size=1, max_size=2 * RUN + 5)
step = st.one_of(
    st.tuples(st.just("append"), kinds_of_a_chunk),
    st.tuples(st.just("popleft"), st.integers(1, RUN + 3)),
    st.tuples(st.just("advance"), st.sampled_from([1, 2, RUN - 2, RUN - 1, RUN, RUN + 1])),
    st.tuples(st.just("take"), st.sampled_from([1, 3, RUN - 1, RUN + 1, 500])),
    st.tuples(st.just("clear"), st.none()),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(step, min_size=1, max_size=30))
def test_the_queue_hands_out_every_row_in_order(steps: list[tuple[str, object]]) -> None:
    queue = RowQueue()
    model: deque[tuple[bytes, bytes]] = deque()  # (payload, id) per row not yet taken
    heads: deque[int] = deque()  # rows left in each chunk, oldest first
    n = 0
    for op, arg in steps:
        if op == "append":
            assert isinstance(arg, list)
            rows = chunk(arg, n)
            n += len(arg)
            queue.append(rows)
            model.extend(zip(rows.payloads, rows.ids, strict=True))
            heads.append(len(arg))
        elif op == "popleft":
            assert isinstance(arg, int)
            for _ in range(min(arg, len(model))):
                payload, row_id = model.popleft()
                msg = queue.popleft()
                expected = decode(payload)
                assert type(msg) is type(expected)
                assert (msg.msg_id, msg.timestamp) == (expected.msg_id, expected.timestamp)
                assert encode(msg) == payload
                assert msg.position == MsgPosition(CHANNEL, row_id, GROUP, expected.timestamp)
                heads[0] -= 1
                if not heads[0]:
                    heads.popleft()
        elif op == "take" and heads:
            assert isinstance(arg, int)
            msgs, begin_ts, end_ts = queue.take(arg)
            assert 1 <= len(msgs) <= min(arg, heads[0])  # never past the head chunk
            expected = [
                (decode(payload), row_id) for payload, row_id in (model.popleft() for _ in msgs)
            ]
            for msg, (original, row_id) in zip(msgs, expected, strict=True):
                assert encode(msg) == encode(original)
                assert msg.position == MsgPosition(CHANNEL, row_id, GROUP, original.timestamp)
            assert begin_ts == min(original.begin_ts for original, _ in expected)
            assert end_ts == max(original.end_ts for original, _ in expected)
            heads[0] -= len(msgs)
            if not heads[0]:
                heads.popleft()
        elif op == "advance" and heads:
            assert isinstance(arg, int)
            count = min(arg, heads[0])  # advance takes at most the head chunk's rest
            queue.advance(count)
            for _ in range(count):
                model.popleft()
            heads[0] -= count
            if not heads[0]:
                heads.popleft()
        elif op == "clear":
            queue.clear()
            model.clear()
            heads.clear()
        assert len(queue) == len(model)
        assert queue.nbytes == sum(len(payload) for payload, _ in model)
        assert bool(queue) == bool(model)


def test_a_run_is_built_with_one_plan_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """32 Deletes, a tick, 10 Deletes: popleft builds the 32 at once, then the tick
    alone, then the 10."""
    queue = RowQueue()
    rows = chunk([1] * RUN + [0] + [1] * 10, 0)
    plan_class = type(rows.plans[0])
    calls: list[int] = []
    build_many = plan_class.build_many

    def counted(self: Any, msg_ids: list[int], *rest: Any) -> list[TsMsg]:
        calls.append(len(msg_ids))
        return build_many(self, msg_ids, *rest)

    monkeypatch.setattr(plan_class, "build_many", counted)
    queue.append(rows)
    taken = [queue.popleft() for _ in range(RUN + 11)]
    assert [msg.msg_id for msg in taken] == list(range(RUN + 11))
    assert isinstance(taken[RUN], TimeTickMsg)
    assert calls == [RUN, 10]
    assert len(queue) == 0 and queue.nbytes == 0


def test_rows_taken_past_a_built_run_drop_it() -> None:
    """One message taken (a run of 32 built), then rows taken by ``advance`` up to and
    past the run's end: the next message is the next row's, not one built before."""
    for taken in (RUN - 2, RUN - 1, RUN):
        queue = RowQueue()
        queue.append(chunk([1] * (2 * RUN), 0))
        assert queue.popleft().msg_id == 0
        queue.advance(taken)
        assert queue.popleft().msg_id == 1 + taken
        assert len(queue) == 2 * RUN - 2 - taken


def test_a_ticks_range_is_its_timestamp_whatever_its_envelope_says() -> None:
    """The decoder gives a message other than an Insert or a Delete its timestamp as its
    time range; a batch's range follows it, not the envelope's fields (which a foreign
    producer may fill otherwise)."""
    tick = encode(TimeTickMsg(msg_id=1, timestamp=500))
    fields = list(envelope.STRUCT.unpack_from(tick))
    fields[envelope.index("begin_ts")] = 7
    fields[envelope.index("end_ts")] = 9_000
    patched = bytearray(envelope.STRUCT.pack(*fields) + tick[envelope.SIZE :])
    at = envelope.CRC_OFFSET
    crc = checksum.crc32(patched[at + 4 :], checksum.crc32(patched[:at]))
    patched[at : at + 4] = crc.to_bytes(4, "little")
    payloads = [bytes(patched), encode(message(1, 2))]
    decoded = decode_batch(payloads)
    assert not decoded.bad
    assert decode(payloads[0]).time_range() == (500, 500)
    rows = decoded_rows(CHANNEL, GROUP, decoded, payloads, [b"a", b"b"])
    assert rows.time_span(0, 1) == (500, 500)
    assert rows.time_span(0, 2) == (3, 500)  # the Delete's range is (3, 3)
