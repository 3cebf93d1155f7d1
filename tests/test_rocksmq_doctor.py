"""``msgstream doctor``: a read-only check that names the damage, and a repair that keeps
everything readable, records what was lost, and leaves a store that reads without error."""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path

import pytest

from msgstream import StoreCorruptedError, SubscriptionPosition
from msgstream.backends.rocksmq import RocksStore, open_client
from msgstream.cli.main import main
from test_rocksmq_durability import CHANNELS, produce_and_kill
from test_rocksmq_faults import (
    biggest,
    damage,
    killed_store_with_a_damaged_wal,
    last_block_of_records,
    store_with_a_damaged_table,
)

EARLIEST = SubscriptionPosition.EARLIEST


def fingerprint(path: Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(path.iterdir())
        if p.is_file() and not p.name.startswith("LOG")
    }


def doctor(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, object]]:
    code = main(["doctor", *args, "--json"])
    out = capsys.readouterr().out
    return code, json.loads(out)


def channel_report(report: dict[str, object], name: str) -> dict[str, object]:
    channels = report["channels"]
    assert isinstance(channels, list)
    (found,) = [c for c in channels if c["channel"] == name]
    assert isinstance(found, dict)
    return found


async def read_all(path: Path, channel: str) -> list[tuple[int, bytes]]:
    client = open_client(str(path))
    try:
        consumer = await client.subscribe(channel, "check", EARLIEST)
        out = []
        while batch := consumer.receive_nowait(10_000):
            out += [(int(m.msg_id), m.payload) for m in batch]  # type: ignore[call-overload]
        return out
    finally:
        await client.close()


def test_a_healthy_store_is_reported_healthy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "store"
    store = RocksStore(str(path))
    store.ensure_channel("a")
    store.append("a", [b"x"] * 5, {})
    store.put_subscription("a", "s", 3)
    store.close()
    code, report = doctor(capsys, str(path))
    assert code == 0
    assert report["healthy"] is True and report["problems"] == []
    a = channel_report(report, "a")
    assert (a["messages"], a["first_id"], a["end_id"], a["lost"]) == (5, 1, 6, [])


def test_a_damaged_wal_is_named_then_repaired(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "store"
    killed_store_with_a_damaged_wal(path)
    wal = biggest(path, ".log")
    before = fingerprint(path)

    code, report = doctor(capsys, str(path))
    assert code == 1
    assert report["healthy"] is False
    (problem,) = report["problems"]  # type: ignore[misc]
    assert problem.startswith(f"write-ahead log ({wal.name}): Corruption: ")
    assert fingerprint(path) == before  # the check wrote nothing
    readable = {c: channel_report(report, c)["messages"] for c in CHANNELS}

    code, repaired = doctor(capsys, str(path), "--repair")
    assert code == 0
    backup = Path(str(repaired["backup"]))
    assert backup.name.startswith("store.damaged-") and fingerprint(backup) == before
    for channel in CHANNELS:
        records = asyncio.run(read_all(path, channel))
        assert len(records) == readable[channel]
        assert all(payload == f"{channel}:{i - 1}".encode() for i, payload in records)
    code, again = doctor(capsys, str(path))  # lost ids are now known holes, not damage
    assert (code, again["healthy"], again["problems"]) == (0, True, [])


def test_a_damaged_table_block_is_located_then_read_past(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "store"
    payloads, table = store_with_a_damaged_table(path)

    code, report = doctor(capsys, str(path))
    assert code == 1
    (problem,) = report["problems"]  # type: ignore[misc]
    assert "block checksum mismatch" in problem and table.name in problem
    ch = channel_report(report, "ch")
    ((first, last),) = ch["lost"]  # type: ignore[misc]
    assert 1 < first <= last < 20_000
    assert ch["messages"] == 20_000 - (last - first + 1)
    assert ch["end_id"] == 20_001

    with pytest.raises(StoreCorruptedError, match=rf"ids {first}\.\.20000 cannot be read"):
        asyncio.run(read_all(path, "ch"))
    assert main(["doctor", str(path), "--repair"]) == 0
    capsys.readouterr()
    records = asyncio.run(read_all(path, "ch"))
    assert [i for i, _ in records] == [*range(1, first), *range(last + 1, 20_001)]
    assert all(payload == payloads[i - 1] for i, payload in records)

    client = open_client(str(path))  # lost ids are never handed out again
    producer = asyncio.run(client.create_producer("ch"))
    assert int(asyncio.run(producer.send(b"new"))) == 20_001  # type: ignore[call-overload]
    asyncio.run(client.close())


def test_inspect_on_a_damaged_store_fails_instead_of_showing_it_empty(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "store"
    killed_store_with_a_damaged_wal(path)
    config = tmp_path / "msgstream.yaml"
    config.write_text(f"rocksmq:\n  path: {path}\n", encoding="utf-8")
    assert main(["inspect", "--config", str(config)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.strip().splitlines()
    assert line.startswith(f"error: rocksmq store at '{path}': opening the store found damage")
    assert line.endswith("to see what is damaged and what can be recovered")


def test_damage_in_the_last_wal_block_is_repaired_keeping_what_follows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "store"
    acked = produce_and_kill(path, sync=False, min_acks=3000)
    wal = biggest(path, ".log")
    last_block, starts = last_block_of_records(wal)
    # The checksum of a record a third of the way in: every record after it stays sound.
    damage(wal, last_block + starts[len(starts) // 3], b"\xde\xad\xbe\xef")
    code, report = doctor(capsys, str(path))
    assert code == 1
    assert any("sound record(s) follow it" in p for p in report["problems"])  # type: ignore[attr-defined]
    assert main(["doctor", str(path), "--repair"]) == 0
    capsys.readouterr()
    kept = {channel: asyncio.run(read_all(path, channel)) for channel in CHANNELS}
    # RocksDB's recovery drops the rest of the damaged block, sound records included: the
    # repair keeps everything before the damage, in order and intact, and says so.
    assert 0 < sum(map(len, kept.values())) < sum(map(len, acked.values()))
    for channel, records in kept.items():
        assert [i for i, _ in records] == list(range(1, len(records) + 1))
        assert all(payload == f"{channel}:{i - 1}".encode() for i, payload in records)
    code, again = doctor(capsys, str(path))
    assert (code, again["problems"]) == (0, [])


@pytest.mark.parametrize("kind", ["empty directory", "other files", "missing", "a file"])
@pytest.mark.parametrize("repair", [False, True])
def test_a_path_that_is_no_store_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str, repair: bool
) -> None:
    """Exit 2 (a wrong argument), not 1 (a damaged store), with one line naming the path;
    nothing is written there, not even by --repair."""
    path = tmp_path / "not-a-store"
    if kind == "empty directory":
        path.mkdir()
    elif kind == "other files":
        path.mkdir()
        (path / "notes.txt").write_text("hello", encoding="utf-8")
    elif kind == "a file":
        path.write_text("hello", encoding="utf-8")
    before = sorted(tmp_path.rglob("*"))
    code = main(["doctor", str(path), "--json", *(["--repair"] if repair else [])])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.out == ""
    (line,) = captured.err.strip().splitlines()
    problem = (
        "this is a file, not a directory (rocksmq.path names a directory)"
        if kind == "a file"
        else "no rocksmq store here (nothing was created; check the path)"
    )
    assert line == f"error: rocksmq store at '{path}': {problem}"
    assert sorted(tmp_path.rglob("*")) == before
