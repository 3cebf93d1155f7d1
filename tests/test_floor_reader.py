"""benchmarks/floor_reader.py: the floor of the time-tick read figure hands out, pack for
pack, the messages a TtMsgStream hands out, counts them as the stream's rate does, and
stops at a payload whose checksum is wrong, a late message or a repeated msg_id rather
than count it."""

from __future__ import annotations

import sys
from collections.abc import Callable
from itertools import islice
from pathlib import Path

import numpy as np
import pytest
from rocksdict import AccessType, Options, Rdict

from msgstream import SubscriptionPosition, TtMsgStream
from msgstream.backends.rocksmq import RocksOptions, open_client
from msgstream.wire import envelope
from msgstream.wire.codec import sealed

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


async def test_the_floor_hands_out_a_time_tick_streams_packs(tmp_path: Path) -> None:
    path, data = await filled(tmp_path)
    expected = await stream_packs(path, data)
    assert len(expected) == PER_CHANNEL // PER_TICK
    assert all(len(msgs) == len(CHANNELS) * PER_TICK for _, msgs in expected)
    assert read_floor(path) == [msgs for _, msgs in expected]


async def test_the_floor_counts_the_data_it_hands_out(tmp_path: Path) -> None:
    path, data = await filled(tmp_path)
    assert tt_floor(path, PER_TICK, data) > 0
    assert tt_floor(path, PER_TICK, data, collector=False) > 0
    assert tt_floor(path, PER_TICK, data + 1) == 0.0  # it handed out exactly ``data``


def spoil(path: str, index: int, change: Callable[[bytes], bytes]) -> None:
    """Replace the payload of the ``index``-th stored message with ``change(payload)``."""
    db = Rdict(path, Options(raw_mode=True))
    try:
        key, value = list(islice(db.items(from_key=b"M"), index + 1))[index]
        db.put(key, change(value))
    finally:
        db.close()


def flip_last_byte(payload: bytes) -> bytes:
    return payload[:-1] + bytes([payload[-1] ^ 1])


def sealed_with(**fields: int) -> Callable[[bytes], bytes]:
    """A change that sets envelope ``fields`` and checksums the payload again."""

    def change(payload: bytes) -> bytes:
        env = np.frombuffer(payload[: envelope.SIZE], envelope.DTYPE).copy()
        for name, value in fields.items():
            env[name] = value
        head = env.tobytes()[: envelope.CRC_OFFSET]
        tail = payload[envelope.SIZE :]
        return sealed(head, (tail,))

    return change


@pytest.mark.parametrize(
    ("index", "change", "refusal"),
    [
        (0, flip_last_byte, "checksum"),
        # The second tick's first message stamped at the first tick: late.
        (PER_TICK + 1, sealed_with(timestamp=PER_TICK + 1), "late"),
        # The first tick's second message with the first one's msg_id: a repeat.
        (1, sealed_with(msg_id=1), "repeats"),
    ],
    ids=["checksum", "late", "repeat"],
)
async def test_the_floor_stops_at_what_a_reader_must_not_hand_out(
    tmp_path: Path, index: int, change: Callable[[bytes], bytes], refusal: str
) -> None:
    path, _ = await filled(tmp_path)
    read_floor(path)  # whole, it reads
    spoil(path, index, change)
    with pytest.raises(ValueError, match=refusal):
        read_floor(path)
