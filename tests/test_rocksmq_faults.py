"""rocksmq under faults: damaged files, a full disk, unusable paths, a held lock, and a
producer that never waits. Each failure is a typed error naming the store's path; nothing
acknowledged is dropped without one."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Literal

import pytest

from helpers.mounts import tmpfs
from helpers.rocksmq_child import Child
from liveness import LoopWatch
from msgstream import (
    DeleteMsg,
    DiskFullError,
    MsgPack,
    MsgStream,
    StoreCorruptedError,
    StoreLockedError,
    StorePathError,
    SubscriptionPosition,
    TimeTickEmitter,
)
from msgstream.backends.log_client.client import RocksmqMessageID
from msgstream.backends.rocksmq import RocksOptions, RocksStore, open_client
from msgstream.backends.rocksmq.wal import BLOCK, _record_end
from test_rocksmq_durability import CHANNELS, produce_and_kill

EARLIEST = SubscriptionPosition.EARLIEST


def damage(path: Path, at: int, garbage: bytes) -> None:
    with path.open("r+b") as handle:
        handle.seek(at)
        handle.write(garbage)


def biggest(directory: Path, suffix: str) -> Path:
    return max(directory.glob(f"*{suffix}"), key=lambda p: p.stat().st_size)


def last_block_records(wal: Path) -> tuple[int, list[int]]:
    """Where the log's last block starts, and the offsets in it of the whole, sound
    records it opens with (read as RocksDB's log reader and the doctor read them)."""
    size = wal.stat().st_size
    start = (size - 1) // BLOCK * BLOCK
    block = wal.read_bytes()[start:]
    starts: list[int] = []
    at = 0
    while (end := _record_end(block, at)) is not None:
        starts.append(at)
        at = end
    return start, starts


def last_block_of_records(wal: Path) -> tuple[int, list[int]]:
    """:func:`last_block_records`, with at least two records in the block: where the
    kill left the last block almost empty (one record or a part of one), the log is cut
    a block earlier, as if the writer had died then."""
    last_block, starts = last_block_records(wal)
    if len(starts) < 2:
        os.truncate(wal, last_block)
        last_block, starts = last_block_records(wal)
    assert len(starts) >= 2, f"{wal.name}: fewer than two records in its last two blocks"
    return last_block, starts


def killed_store_with_a_damaged_wal(path: Path) -> dict[str, list[tuple[int, int]]]:
    """A store whose writer was SIGKILLed after 3000 acks, with garbage mid-log; returns
    the acknowledged ``(id, seq)`` pairs per channel."""
    acked = produce_and_kill(path, sync=False, min_acks=3000)
    wal = biggest(path, ".log")
    damage(wal, wal.stat().st_size // 2, b"\xde\xad\xbe\xef" * 64)
    return acked


def store_with_a_damaged_table(path: Path) -> tuple[list[bytes], Path]:
    """20,000 messages of channel ``ch`` flushed to one table file, 64 bytes zeroed a third
    of the way in; returns the payloads and the table file."""
    store = RocksStore(str(path))
    payloads = [b"%06d" % i + os.urandom(94) for i in range(20_000)]
    store.ensure_channel("ch")
    for start in range(0, len(payloads), 1000):
        store.append("ch", payloads[start : start + 1000], {})
    store.flush()
    store.close()
    table = biggest(path, ".sst")
    damage(table, table.stat().st_size // 3, b"\0" * 64)
    return payloads, table


# --- the write-ahead log ---------------------------------------------------------------------
def test_garbage_in_the_middle_of_the_wal_fails_the_open(tmp_path: Path) -> None:
    """RocksDB's default recovery drops everything after a damaged WAL record, silently."""
    path = tmp_path / "store"
    acked = killed_store_with_a_damaged_wal(path)
    assert sum(map(len, acked.values())) >= 3000
    with pytest.raises(StoreCorruptedError, match="msgstream doctor") as info:
        RocksStore(str(path))
    assert info.value.path == str(path)
    assert "found damage: Corruption: " in str(info.value)  # the kind depends on where it lands
    with pytest.raises(StoreCorruptedError):
        open_client(str(path))


def test_damage_in_the_last_wal_block_with_sound_records_after_it_fails_the_open(
    tmp_path: Path,
) -> None:
    """RocksDB takes a bad record in a log's last 32 KiB block for a torn write and drops
    it and everything after it silently; sound records after it mean damage instead."""
    path = tmp_path / "store"
    produce_and_kill(path, sync=False, min_acks=3000)
    wal = biggest(path, ".log")
    last_block, starts = last_block_of_records(wal)
    # The checksum of a record a third of the way in: every record after it stays sound.
    # (Garbage at a fixed offset could hit the block's only whole record, and then it is
    # a torn write that nothing sound follows.)
    damage(wal, last_block + starts[len(starts) // 3], b"\xde\xad\xbe\xef")
    with pytest.raises(StoreCorruptedError, match=r"sound record\(s\) follow it") as info:
        RocksStore(str(path))
    assert wal.name in str(info.value) and "msgstream doctor" in str(info.value)
    assert wal.exists()  # refused before RocksDB could replay (and delete) the log


def test_a_torn_last_wal_record_is_dropped_and_the_rest_opens(tmp_path: Path) -> None:
    """A power loss can tear the last record (never acknowledged under ``sync=True``):
    that alone must not stop the store from opening, and everything before it stays."""
    path = tmp_path / "store"
    acked = produce_and_kill(path, sync=False, min_acks=500)
    wal = biggest(path, ".log")
    os.truncate(wal, wal.stat().st_size - 7)
    store = RocksStore(str(path))
    try:
        for channel in CHANNELS:
            records = store.read(channel, 0, 1_000_000)
            ids = [r.msg_id for r in records]
            assert ids == list(range(1, len(ids) + 1))
            assert len(ids) >= len(acked[channel]) - 8  # at most the torn send's batch
            assert [r.payload for r in records] == [
                f"{channel}:{i}".encode() for i in range(len(ids))
            ]
    finally:
        store.close()


# --- table files -------------------------------------------------------------------------
async def test_a_damaged_table_block_is_an_error_at_read_naming_the_ids(tmp_path: Path) -> None:
    """RocksDB's iterator stops at a damaged block without an error: reads must not end
    there as if the channel did."""
    path = tmp_path / "store"
    payloads, _ = store_with_a_damaged_table(path)

    client = open_client(str(path))
    try:
        consumer = await client.subscribe("ch", "sub", EARLIEST)
        read: list[bytes] = []

        async def read_all() -> None:
            while True:
                read.append((await asyncio.wait_for(consumer.receive(), 5)).payload)

        with pytest.raises(StoreCorruptedError, match=r"channel 'ch' ids \d+\.\.20000") as info:
            await read_all()
        assert 0 < len(read) < len(payloads)
        assert read == payloads[: len(read)]
        assert info.value.path == str(path)
        assert "block checksum mismatch" in str(info.value)
        assert info.value.lost.startswith("channel 'ch' ids")
    finally:
        await client.close()


# --- paths and locks -----------------------------------------------------------------------
def test_a_path_that_is_a_file_or_under_a_file_is_a_path_error(tmp_path: Path) -> None:
    file = tmp_path / "file"
    file.write_text("not a store")
    with pytest.raises(StorePathError, match="file, not a directory") as info:
        open_client(str(file))
    assert info.value.path == str(file)
    with pytest.raises(StorePathError, match="is a file, so no directory can be made under it"):
        open_client(str(file / "store"))


def test_a_path_on_a_read_only_filesystem_is_a_path_error(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "ro", "1m", read_only=True) as mount:
        with pytest.raises(StorePathError, match=r"not permitted.*Read-only file system") as info:
            open_client(str(mount / "store"))
        assert info.value.path == str(mount / "store")


def test_read_only_or_inspecting_opens_never_create_a_store(tmp_path: Path) -> None:
    missing = tmp_path / "typo"
    for options in (RocksOptions(read_only=True), RocksOptions(create=False)):
        with pytest.raises(StorePathError, match="no rocksmq store here"):
            open_client(str(missing), options)
    assert not missing.exists()


@pytest.mark.parametrize(
    ("theirs", "ours", "says"),
    [
        (
            "exclusive",
            "auto",
            "holds it with rocksmq.sharing: exclusive; set rocksmq.sharing: auto",
        ),
        ("auto", "exclusive", "owns it and rocksmq.sharing is exclusive here: set rocksmq.sharing"),
        ("exclusive", "exclusive", "owns it and rocksmq.sharing is exclusive here"),
    ],
)
def test_a_store_another_process_keeps_to_itself_is_a_lock_error_naming_the_key(
    tmp_path: Path, theirs: str, ours: Literal["auto", "exclusive"], says: str
) -> None:
    path = tmp_path / "store"
    child = Child("ack", str(path), "ch", "3", "1", theirs)
    try:
        assert child.line() == "ACKED 1"
        with pytest.raises(StoreLockedError) as info:
            open_client(str(path), sharing=ours)
        assert info.value.path == str(path)
        assert f"process {child.proc.pid} {says}" in str(info.value)
    finally:
        child.close()


def test_a_store_rocksdb_holds_without_sharing_is_a_lock_error(tmp_path: Path) -> None:
    """A process that opened RocksDB without taking the owner lock (an older msgstream)."""
    path = tmp_path / "store"
    holder = Child(
        "import sys; from rocksdict import Rdict; db = Rdict(sys.argv[1]); print('OPEN', "
        "flush=True); sys.stdin.readline()",
        str(path),
        script="-c",
    )
    try:
        assert holder.line() == "OPEN"
        with pytest.raises(StoreLockedError, match="without sharing it") as info:
            open_client(str(path))
        assert info.value.path == str(path)
        assert "rocksmq.sharing: read_only" in str(info.value)
        assert "LOCK" not in str(info.value)  # said in words, not RocksDB's raw text
    finally:
        holder.close()


# --- a full disk -------------------------------------------------------------------------
async def test_a_full_disk_is_a_typed_error_and_writes_resume_once_space_is_freed(
    tmp_path: Path,
) -> None:
    with tmpfs(tmp_path / "small", "6m") as mount:
        filler = mount / "filler"
        filler.write_bytes(b"\0" * 4_500_000)
        client = open_client(str(mount / "store"))
        try:
            producer = await client.create_producer("ch")
            acked = []

            async def fill() -> None:
                for i in range(1000):
                    acked.append(await producer.send(b"%04d" % i + b"x" * 50_000))

            with pytest.raises(DiskFullError, match="disk holding the store is full") as info:
                await fill()
            assert info.value.path == str(mount / "store")
            assert 0 < len(acked) < 1000
            with pytest.raises(DiskFullError, match="still full"):
                await producer.send(b"still full")
            filler.unlink()
            after = [await producer.send(b"after-%d" % i) for i in range(3)]  # same client
            last = RocksmqMessageID.of(acked[-1]).value
            assert after == [RocksmqMessageID(last + 1 + i) for i in range(3)]
            consumer = await client.subscribe("ch", "sub", EARLIEST)
            got = [await asyncio.wait_for(consumer.receive(), 5) for _ in range(len(acked) + 3)]
            assert [m.msg_id for m in got] == [*acked, *after]
            assert [m.payload[:4] for m in got[: len(acked)]] == [
                b"%04d" % i for i in range(len(acked))
            ]
        finally:
            await client.close()


# --- producers that never wait ---------------------------------------------------------------
async def test_a_tight_produce_loop_lets_the_emitter_tick(tmp_path: Path) -> None:
    """rocksmq sends complete inline: a loop of them must still give the loop back, so the
    emitter keeps ticking (it sent none during 88k sends before) and nothing is blocked."""
    client = open_client(str(tmp_path / "store"))
    watch = LoopWatch()
    async with MsgStream(client) as stream:
        await stream.as_producer(["a", "b"])
        emitter = TimeTickEmitter(stream, interval_s=0.01)
        watch.start()
        async with emitter:
            started = time.perf_counter()
            sends = 0
            while time.perf_counter() - started < 1.0:
                async with emitter.reserve() as ts:
                    delete = DeleteMsg(
                        msg_id=sends,
                        timestamp=ts,
                        collection_name="c",
                        primary_keys=[sends],
                        hash_keys=[sends % 2],
                    )
                    await stream.produce(MsgPack.of(delete))
                sends += 1
        await watch.stop()
    assert sends > 1000
    assert emitter.ticks_sent >= 10  # an interval of 10 ms over one second of sending
    assert not watch.blocked, watch.describe()
