"""benchmarks/floor_reader.py: the floor of the time-tick read figure hands out, pack for
pack, the messages a TtMsgStream hands out (and each pack's ticks), counts what it reads
as the raw scan does, and refuses a payload whose checksum is wrong rather than count it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from rocksdict import AccessType, Options, Rdict

from msgstream import SubscriptionPosition, TtMsgStream
from msgstream.backends.rocksmq import RocksOptions, open_client

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from bench_rocksmq import fill_channels
from floor_reader import floor_packs, tt_floor

CHANNELS = [f"tt-{i}" for i in range(4)]
PER_TICK = 5
PER_CHANNEL = 20


async def filled(tmp_path: Path) -> tuple[str, int]:
    """A store of four channels, four ticks of five messages each; its path and how many
    data messages it holds."""
    path = str(tmp_path / "mq")
    return path, await fill_channels(path, CHANNELS, PER_CHANNEL, PER_TICK)


async def stream_packs(path: str, data: int) -> list[tuple[int, list[tuple[int, int]]]]:
    """Each pack a TtMsgStream reads from ``path``: its end and its (msg_id, timestamp)s."""
    stream = TtMsgStream(open_client(path, RocksOptions()), pursuit_lag_s=0)
    await stream.as_consumer(CHANNELS, "floor-check", SubscriptionPosition.EARLIEST)
    packs: list[tuple[int, list[tuple[int, int]]]] = []
    seen = 0
    async for pack in stream:
        packs.append((pack.end_ts, [(m.msg_id, m.timestamp) for m in pack.msgs]))
        seen += len(pack.msgs)
        if seen == data:
            break
    await stream.close()
    return packs


def read_floor(path: str) -> list[list[tuple[int, int]]]:
    db = Rdict(path, Options(raw_mode=True), access_type=AccessType.read_only())
    try:
        return [[(m.msg_id, m.timestamp) for m in pack] for pack in floor_packs(db, PER_TICK)]
    finally:
        db.close()


async def test_the_floor_hands_out_a_time_tick_streams_packs_and_their_ticks(
    tmp_path: Path,
) -> None:
    path, data = await filled(tmp_path)
    expected = await stream_packs(path, data)
    floor = read_floor(path)
    assert len(expected) == PER_CHANNEL // PER_TICK
    assert len(floor) == len(expected)
    for (end_ts, msgs), pack in zip(expected, floor, strict=True):
        assert len(msgs) == len(CHANNELS) * PER_TICK
        assert pack[: len(msgs)] == msgs  # the data, merged by time, in the stream's order
        assert [stamp for _, stamp in pack[len(msgs) :]] == [end_ts] * len(CHANNELS)


async def test_the_floor_counts_every_stored_message_ticks_included(tmp_path: Path) -> None:
    path, data = await filled(tmp_path)
    stored = data + len(CHANNELS) * (PER_CHANNEL // PER_TICK)
    assert tt_floor(path, PER_TICK, stored) > 0
    assert tt_floor(path, PER_TICK, stored, collector=False) > 0
    assert tt_floor(path, PER_TICK, stored + 1) == 0.0  # it read exactly ``stored``


async def test_the_floor_refuses_a_payload_whose_checksum_is_wrong(tmp_path: Path) -> None:
    path, _ = await filled(tmp_path)
    db = Rdict(path, Options(raw_mode=True))
    try:
        key, value = next(iter(db.items(from_key=b"M")))
        db.put(key, value[:-1] + bytes([value[-1] ^ 1]))
    finally:
        db.close()
    with pytest.raises(ValueError, match="checksum"):
        read_floor(path)
