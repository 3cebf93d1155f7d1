"""Slice planning and slice reading on the embedded store (no Spark).

Offsets must cut the channels into consecutive time slices that hold every row exactly
once, including messages stamped above a tick but sent before it, channels whose tick
values differ, row limits and Trigger.AvailableNow caps.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from msgstream import (
    Config,
    CreateCollectionMsg,
    DeleteMsg,
    InsertMsg,
    MessageID,
    SubscriptionPosition,
    TimeTickMsg,
    TopicNotFoundError,
    encode,
    new_ttmsgstream,
)
from msgstream.bridge_spark.data.clients import open_reader
from msgstream.bridge_spark.data.cursor import RawCursor, SkipStats
from msgstream.bridge_spark.data.frames import FrameKind, FrameSchema
from msgstream.bridge_spark.data.offsets import SliceOffset
from msgstream.bridge_spark.data.planner import RowFilter, SlicePlanner, _ChannelScan
from msgstream.bridge_spark.data.slices import ChannelSlice, read_slice
from msgstream.bridge_spark.data.workload import sample_schema
from msgstream.bridge_spark.errors import SchemaNotFoundError, SliceIncompleteError
from msgstream.contract.backend import ConsumedBatch, ConsumedMessage
from msgstream.wire.codec import peek_envelopes
from spark.data import Step, channel_names, produce_sample, produce_script, rocksmq_config

DELETES = FrameSchema(sample_schema(), FrameKind.DELETES)


class Harness:
    def __init__(
        self, config: Config, channels: Sequence[str], kind: FrameKind = FrameKind.DELETES
    ):
        self.config = config
        self.channels = list(channels)
        self.frame = FrameSchema(sample_schema(), kind)
        self.reader = open_reader(config)
        self.planner = SlicePlanner(
            self.reader.client, self.channels, "test-plan", RowFilter("demo", kind), timeout_s=5
        )

    async def close(self) -> None:
        await self.planner.close()
        await self.reader.client.close()

    async def next(self, start: SliceOffset, **kwargs: object) -> SliceOffset:
        self.reader.refresh()
        return await self.planner.next_offset(start, **kwargs)  # type: ignore[arg-type]

    async def rows(self, start: SliceOffset, end: SliceOffset) -> list[tuple[int, int, str]]:
        """(key, ts, channel) of every delete row in the slice, channel by channel."""
        out = []
        for channel in self.channels:
            part = ChannelSlice(
                channel,
                start.positions[channel],
                start.tick,
                end.tick,
                start.examined.get(channel, 0),
            )
            async for table in read_slice(self.reader.client, part, self.frame, "test-read"):
                out.extend(
                    zip(
                        table.column("pk").to_pylist(),
                        table.column("_ts").to_pylist(),
                        table.column("_channel").to_pylist(),
                        strict=True,
                    )
                )
        return out


@pytest.fixture
async def harness(tmp_path: Path) -> object:
    made: list[Harness] = []

    async def make(channels: Sequence[str], kind: FrameKind = FrameKind.DELETES) -> Harness:
        h = Harness(rocksmq_config(tmp_path / "store"), channels, kind)
        made.append(h)
        return h

    yield make
    for h in made:
        await h.close()


def data(channel: int, ts: int, key: int) -> Step:
    return Step(channel, ts, key=key)


def tick(channel: int, ts: int) -> Step:
    return Step(channel, ts, tick=True)


async def test_slices_hold_every_row_once_when_channels_tick_differently(
    tmp_path: Path, harness: object
) -> None:
    config = rocksmq_config(tmp_path / "store")
    channels = channel_names("dt", 3)
    steps = []
    key = 0
    for round_ in range(1, 7):  # channel c ticks at 10*round + c
        for c in range(3):
            for k in range(3):
                key += 1
                steps.append(data(c, 10 * round_ + c - 3 + k, key))
            steps.append(tick(c, 10 * round_ + c))
    await produce_script(config, channels, steps[: len(steps) // 2])
    h = await harness(channels)  # type: ignore[operator]
    start = SliceOffset.earliest(channels)
    first = await h.next(start)
    assert first.tick == 30  # channel 0 ticked 30, channel 1 only 31 and 2 only 32 later
    await produce_script(config, channels, steps[len(steps) // 2 :])
    second = await h.next(first)
    assert second.tick == 60
    assert await h.next(second) == second  # time did not advance: the same offset
    rows = await h.rows(start, first) + await h.rows(first, second)
    by_key = {s.key: s.ts for s in steps if not s.tick}
    assert sorted(r[0] for r in rows) == sorted(k for k, ts in by_key.items() if ts <= 60)
    assert all(by_key[k] == ts for k, ts, _ in rows)
    assert {k for k, ts, _ in await h.rows(start, first)} == {
        k for k, ts in by_key.items() if ts <= 30
    }


async def test_a_message_stamped_above_a_tick_but_sent_before_it(
    tmp_path: Path, harness: object
) -> None:
    config = rocksmq_config(tmp_path / "store")
    channels = channel_names("ahead", 2)
    await produce_script(
        config,
        channels,
        [
            data(0, 5, 1),
            data(0, 15, 2),  # stamped 15, sent before the tick 10 (allowed: 15 > 10)
            tick(0, 10),
            data(0, 12, 3),
            tick(1, 10),
            tick(0, 20),
            tick(1, 20),
        ],
    )
    h = await harness(channels)  # type: ignore[operator]
    start = SliceOffset.earliest(channels)
    first = await h.next(start, max_rows=1)
    assert first.tick == 10
    second = await h.next(first)
    assert second.tick == 20
    assert sorted(await h.rows(start, first)) == [(1, 5, channels[0])]
    assert sorted(await h.rows(first, second)) == [(2, 15, channels[0]), (3, 12, channels[0])]
    # The offset is the first message above tick 10: message 2, before the tick.
    assert first.positions[channels[0]] is not None


async def test_row_limit_takes_the_largest_tick_that_fits_and_never_splits_a_slice(
    tmp_path: Path, harness: object
) -> None:
    config = rocksmq_config(tmp_path / "store")
    channels = channel_names("lim", 2)
    steps = []
    key = 0
    for t, per_channel in ((10, 2), (20, 1), (30, 4), (40, 1)):
        for c in range(2):
            for _ in range(per_channel):
                key += 1
                steps.append(data(c, t - 1, key))
            steps.append(tick(c, t))
    await produce_script(config, channels, steps)  # slices hold 4, 2, 8, 2 rows
    h = await harness(channels)  # type: ignore[operator]
    start = SliceOffset.earliest(channels)
    assert (await h.next(start, max_rows=3)).tick == 10  # 4 rows: one slice, not split
    assert (await h.next(start, max_rows=6)).tick == 20
    assert (await h.next(start, max_rows=13)).tick == 20
    assert (await h.next(start, max_rows=14)).tick == 30
    assert (await h.next(start, max_rows=100)).tick == 40
    ticks = []
    offset = start
    total = 0
    while True:
        following = await h.next(offset, max_rows=5)
        if following == offset:
            break
        total += len(await h.rows(offset, following))
        ticks.append(following.tick)
        offset = following
    assert ticks == [10, 20, 30, 40]
    assert total == key


async def test_stop_ids_cap_what_is_read(tmp_path: Path, harness: object) -> None:
    config = rocksmq_config(tmp_path / "store")
    channels = channel_names("cap", 2)
    await produce_script(config, channels, [data(0, 1, 1), tick(0, 5), tick(1, 5)])
    h = await harness(channels)  # type: ignore[operator]
    caps = await h.planner.latest_ids()
    await produce_script(config, channels, [data(1, 6, 2), tick(0, 9), tick(1, 9)])
    start = SliceOffset.earliest(channels)
    capped = await h.next(start, stop_ids=caps)
    assert capped.tick == 5
    assert await h.next(capped, stop_ids=caps) == capped
    assert (await h.next(capped)).tick == 9
    empty = {channels[0]: caps[channels[0]], channels[1]: None}
    assert await h.next(start, stop_ids=empty) == start  # an empty channel holds time back


async def test_the_call_ending_an_available_now_run_reads_nothing(
    tmp_path: Path, harness: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once a call under stop ids has read every channel to its stop, the call from its
    answer is answered without reading; any other call still reads."""
    config = rocksmq_config(tmp_path / "store")
    channels = channel_names("settle", 2)
    steps = [data(0, 1, 1), tick(0, 5), tick(1, 5), data(1, 6, 2), tick(0, 9), tick(1, 9)]
    await produce_script(config, channels, steps)
    h = await harness(channels)  # type: ignore[operator]
    caps = await h.planner.latest_ids()
    await produce_script(config, channels, [data(0, 11, 3), tick(0, 12), tick(1, 12)])
    reads: list[str] = []
    read = RawCursor.read

    def counted(cursor: RawCursor, start: bytes | None) -> object:
        reads.append(cursor.channel)
        return read(cursor, start)

    monkeypatch.setattr(RawCursor, "read", counted)
    start = SliceOffset.earliest(channels)
    limited = [await h.next(start, stop_ids=caps, max_rows=1)]
    limited.append(await h.next(limited[0], stop_ids=caps, max_rows=1))
    assert [o.tick for o in limited] == [5, 9]
    assert len(reads) == 4  # the first call ended below the common tick: the second reads
    assert await h.next(limited[1], stop_ids=caps, max_rows=1) == limited[1]
    assert len(reads) == 4  # the second read to the stops and ended at the common tick
    whole = await h.next(start, stop_ids=caps)
    assert whole == limited[1]
    assert len(reads) == 6
    assert await h.next(whole, stop_ids=caps) == whole
    assert len(reads) == 6  # settled: nothing read
    other = {**caps, channels[0]: None}
    assert await h.next(whole, stop_ids=other) == whole
    assert len(reads) == 7  # other stop ids: read again (channel 0 empty then)
    assert (await h.next(whole)).tick == 12  # no stop ids: what came later is seen
    assert len(reads) == 9


async def test_a_scan_cut_at_its_message_bound_is_continued_by_the_next_call(
    tmp_path: Path, harness: object
) -> None:
    """A scan stops at the first tick after ``max_scan`` messages; under stop ids the
    next call goes on from there (it is not taken for the end of what is available)."""
    config = rocksmq_config(tmp_path / "store")
    channels = channel_names("bound", 2)
    steps = [step for t in (5, 10, 15) for step in (data(0, t - 1, t), tick(0, t), tick(1, t))]
    await produce_script(config, channels, steps)
    h = await harness(channels)  # type: ignore[operator]
    planner = SlicePlanner(
        h.reader.client, channels, "test-bound", RowFilter("demo", FrameKind.DELETES), max_scan=2
    )
    try:
        caps = await planner.latest_ids()
        offsets = [SliceOffset.earliest(channels)]
        while len(offsets) < 10:
            following = await planner.next_offset(offsets[-1], stop_ids=caps)
            if following == offsets[-1]:
                break
            offsets.append(following)
        assert [o.tick for o in offsets[1:]] == [5, 10, 15]
        keys = [k for a, b in itertools.pairwise(offsets) for k, _, _ in await h.rows(a, b)]
        assert keys == [5, 10, 15]
    finally:
        await planner.close()


async def test_no_progress_while_a_channel_has_no_tick(tmp_path: Path, harness: object) -> None:
    config = rocksmq_config(tmp_path / "store")
    channels = channel_names("still", 2)
    await produce_script(config, channels, [data(0, 1, 1), tick(0, 5), data(1, 2, 2)])
    h = await harness(channels)  # type: ignore[operator]
    start = SliceOffset.earliest(channels)
    assert await h.next(start) == start


async def test_offsets_satisfy_the_tt_stream_resume_contract(
    tmp_path: Path, harness: object
) -> None:
    """A TtMsgStream seeking to a planned offset yields exactly the rows after it."""
    config = rocksmq_config(tmp_path / "store")
    channels = channel_names("resume", 3)
    produced = await produce_sample(config, channels, 600, msgs_per_tick=5)
    h = await harness(channels, FrameKind.INSERTS)  # type: ignore[operator]
    start = SliceOffset.earliest(channels)
    middle = await h.next(start, max_rows=250)
    assert 0 < middle.tick < produced.last_tick
    before = [row[0] for row in await h.rows(start, middle)]
    assert 0 < len(before) <= 250
    positions = middle.to_positions("resume")
    assert positions is not None
    after: list[int] = []
    async with new_ttmsgstream(config) as stream:
        await stream.as_consumer(channels, "resume", SubscriptionPosition.UNKNOWN)
        await stream.seek(positions)
        async for pack in stream:
            assert pack.begin_ts >= middle.tick
            for msg in pack.msgs:
                if isinstance(msg, InsertMsg):
                    after.extend(msg.row_ids.tolist())
            if pack.end_ts >= produced.last_tick:
                break
    assert sorted(before + after) == sorted(produced.inserted)


async def test_missing_channel_and_missing_schema_are_named(
    tmp_path: Path, harness: object
) -> None:
    config = rocksmq_config(tmp_path / "store")
    channels = channel_names("sch", 2)
    await produce_sample(config, channels, 20, create=False)
    h = await harness(channels)  # type: ignore[operator]
    with pytest.raises(SchemaNotFoundError) as caught:
        await h.planner.find_schema("demo")
    assert str(caught.value) == (
        f"no CreateCollectionMsg for collection 'demo' in channels {channels}; "
        "give the collection schema explicitly"
    )
    ghost = await harness([channels[0], "sch-ghost"])  # type: ignore[operator]
    with pytest.raises(TopicNotFoundError) as missing:
        await ghost.planner.open()
    assert str(missing.value) == "channel 'sch-ghost' does not exist on backend 'rocksmq'"


async def test_a_slice_whose_closing_tick_is_gone_is_an_error(
    tmp_path: Path, harness: object
) -> None:
    config = rocksmq_config(tmp_path / "store")
    channels = channel_names("gone", 1)
    await produce_script(config, channels, [data(0, 1, 1), tick(0, 5)])
    h = await harness(channels)  # type: ignore[operator]
    part = ChannelSlice(channels[0], None, 0, 9)
    with pytest.raises(SliceIncompleteError) as caught:
        async for _ in read_slice(h.reader.client, part, DELETES, "x", timeout_s=1):
            pass
    assert str(caught.value) == (
        "channel 'gone-0': no time tick at or above 9 after MessageID earliest; the slice "
        "(0, 9] cannot be completed (deleted by retention?)"
    )


async def test_a_late_message_is_delivered_once_with_the_slice_it_is_read_in(
    tmp_path: Path, harness: object
) -> None:
    """As a time-tick stream delivers a late message with its next pack: key 2, stamped 8
    after channel 0 ticked 15, lands in the slice (10, 20], and in no other."""
    config = rocksmq_config(tmp_path / "store")
    channels = channel_names("late", 2)
    offsets = [SliceOffset.earliest(channels)]
    stages = [
        [data(0, 25, 1), tick(0, 10), tick(1, 10)],
        [tick(0, 15), data(0, 8, 2), tick(0, 20), tick(1, 20)],
        [tick(0, 30), tick(1, 30)],
    ]
    await produce_script(config, channels, stages[0])
    h = await harness(channels)  # type: ignore[operator]
    for stage in stages:
        if stage is not stages[0]:
            await produce_script(config, channels, stage)
        offsets.append(await h.next(offsets[-1]))
    assert [o.tick for o in offsets] == [0, 10, 20, 30]
    slices = [await h.rows(a, b) for a, b in itertools.pairwise(offsets)]
    assert slices == [[], [(2, 8, "late-0")], [(1, 25, "late-0")]]


@pytest.mark.parametrize("above", [False, True], ids=["tick-first", "data-above-first"])
async def test_a_late_message_written_after_its_slice_was_planned_is_not_lost(
    tmp_path: Path, harness: object, above: bool
) -> None:
    """Key 2, stamped 7, is written after the slice (0, 10] was planned and read (after
    the tick 10 that closed it): it is in no slice yet, so the next slice delivers it
    (late) -- whether that slice starts at the closing tick or at data above 10 read
    before it (key 3, delivered with it)."""
    config = rocksmq_config(tmp_path / "store")
    channels = channel_names("after", 2)
    before = [data(0, 15, 3)] if above else []
    await produce_script(config, channels, [data(0, 5, 1), *before, tick(0, 10), tick(1, 10)])
    h = await harness(channels)  # type: ignore[operator]
    start = SliceOffset.earliest(channels)
    first = await h.next(start)
    assert first.tick == 10
    assert first.examined == {channels[0]: 2 if above else 1, channels[1]: 1}
    assert await h.rows(start, first) == [(1, 5, "after-0")]
    await produce_script(config, channels, [data(0, 7, 2), tick(0, 20), tick(1, 20)])
    second = await h.next(first)
    expected = [(3, 15, "after-0")] if above else []
    assert await h.rows(first, second) == [*expected, (2, 7, "after-0")]
    again = SliceOffset.from_spark(first.to_spark(), channels)  # as Spark hands it back
    assert again == first and await h.rows(again, second) == [*expected, (2, 7, "after-0")]


# --- the column-wise scan notes exactly what the message loop notes ---------------------

_KINDS = st.sampled_from(["tick", "insert", "delete", "create", "broken"])


def _payload(kind: str, ts: int, key: int) -> bytes:
    if kind == "tick":
        return encode(TimeTickMsg(msg_id=key + 1, timestamp=ts))
    if kind == "delete":
        return encode(
            DeleteMsg(
                msg_id=key + 1,
                timestamp=ts,
                collection_name="demo",
                primary_keys=[key],
                row_timestamps=[ts],
            )
        )
    if kind == "insert":
        return encode(InsertMsg(
            msg_id=key + 1, timestamp=ts, collection_name="demo", partition_name="_default",
            row_ids=[key, key + 1], row_timestamps=[ts - 1, ts], fields=[],
        ))  # fmt: skip
    if kind == "create":
        return encode(
            CreateCollectionMsg(
                msg_id=key + 1, timestamp=ts, collection_name="demo", schema=sample_schema()
            )
        )
    return b"not a msgstream payload at all, long enough for an envelope: " + bytes(8)


class _Cursor:
    channel = "c"


def _scan_fields(scan: _ChannelScan) -> tuple[object, ...]:
    return (
        scan.ticks, scan.tick_ids, scan.tick_at, scan.record_ids, scan.record_ts,
        scan.record_at, scan.row_ts, scan.row_counts, scan.scanned, scan.running, scan.cut,
    )  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(
    steps=st.lists(st.tuples(_KINDS, st.integers(1, 60)), max_size=60),
    begin=st.integers(0, 30),
    batch=st.integers(1, 17),
    max_scan=st.integers(1, 70),
    count_rows=st.booleans(),
)
def test_the_column_wise_scan_notes_what_the_message_loop_notes(
    steps: list[tuple[str, int]], begin: int, batch: int, max_scan: int, count_rows: bool
) -> None:
    """Ticks, records, row counts, positions and the scan bound, batch by batch, with
    unreadable payloads in some batches (those go message by message)."""
    payloads = [_payload(kind, ts, i) for i, (kind, ts) in enumerate(steps)]
    ids = [i.to_bytes(8, "big") for i in range(len(payloads))]
    messages = [ConsumedMessage("c", _Id(i), payload, {}) for i, payload in enumerate(payloads)]

    def planner() -> SlicePlanner:
        made = SlicePlanner.__new__(SlicePlanner)
        made.rows = RowFilter("demo", FrameKind.CHANGES)
        made.max_scan = max_scan
        made.skipped = SkipStats()
        made._count_rows = count_rows
        return made

    cursor: Any = _Cursor()
    by_columns, by_messages = planner(), planner()
    columns, each = _ChannelScan(running=begin), _ChannelScan(running=begin)
    for first in range(0, len(payloads), batch):
        part = ConsumedBatch(
            "c", payloads[first : first + batch], ids[first : first + batch],
            messages[first : first + batch].__getitem__,
        )  # fmt: skip
        envelopes = peek_envelopes(part.payloads)
        if envelopes is None:
            going = by_columns._feed_each(cursor, columns, part, begin)
        else:
            going = by_columns._feed_columns(cursor, columns, part, envelopes, begin)
        assert going == by_messages._feed_each(cursor, each, part, begin)
        assert _scan_fields(columns) == _scan_fields(each)
        if not going:
            break
    assert by_columns.skipped == by_messages.skipped


class _Id(MessageID):
    def __init__(self, value: int) -> None:
        self.value = value

    def sort_key(self) -> int:
        return self.value

    def to_bytes(self) -> bytes:
        return self.value.to_bytes(8, "big")

    @classmethod
    def parse(cls, data: bytes) -> _Id:
        return cls(int.from_bytes(data, "big"))
