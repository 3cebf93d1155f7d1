"""Checking a rocksmq store, and recovering what can be recovered (``msgstream doctor``).

:func:`check` never writes. It opens the store read-only, as RocksDB recovers it
(refusing a damaged write-ahead log), and reads every record. Where it cannot go on it
says why, then reads past the damage: past a damaged WAL record through RocksDB's
skip-any-corrupted-record recovery, and past a damaged table block by seeking further
ahead. (RocksDB's own ``RepairDB`` drops a whole table file that has one bad block.)
Per channel it reports how many messages are readable and which ids are lost: ids below
the channel's end, which the cursors, pages and the store's own index know, that no
record holds.

:func:`repair` does the same read into a new store beside the damaged one, records each
channel's lost ids there as holes (reads then pass over them instead of failing, and
they are never handed out again), and swaps the two: the damaged store is kept as
``PATH.damaged-<time>``. It runs only when asked, with the store closed everywhere.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from rocksdict import AccessType, DBRecoveryMode, Options, Rdict, WriteBatch

from ..log_client.store import FIRST_ID
from .errors import StoreCorruptedError, StoreLockedError
from .failures import check_store_path, store_error
from .ownership import OwnerLock, read_owner
from .wal import damaged_tails

_I64_MAX = (1 << 63) - 1


@dataclass
class ChannelHealth:
    channel: str
    cid: int
    messages: int = 0
    """Messages that can be read."""
    first_id: int | None = None
    end_id: int = FIRST_ID
    """The id after the highest id the store knows of (message, page, cursor or hole)."""
    floor: int = FIRST_ID
    """Ids below it were deleted by retention (not lost)."""
    lost: list[tuple[int, int]] = field(default_factory=list)
    """Id ranges (first, last) no record holds, newly found; ``holes`` were known before."""
    holes: list[tuple[int, int]] = field(default_factory=list)

    @property
    def lost_count(self) -> int:
        return sum(last - first + 1 for first, last in self.lost)


@dataclass
class Diagnosis:
    path: str
    problems: list[str] = field(default_factory=list)
    """What is damaged, file by file, in RocksDB's words."""
    channels: list[ChannelHealth] = field(default_factory=list)
    backup: str | None = None
    """After :func:`repair`: where the damaged store was moved."""
    next_cid: int = 1
    """Above every channel id seen (a repair must not hand one out again)."""

    @property
    def healthy(self) -> bool:
        return not self.problems and not any(c.lost for c in self.channels)


def _options(recovery: str) -> Options:
    options = Options(raw_mode=True)
    options.set_paranoid_checks(True)
    # Every table file is opened with the store: one its owner compacts away meanwhile
    # stays readable (a check may run while a service owns the store).
    options.set_max_open_files(-1)
    options.set_wal_recovery_mode(getattr(DBRecoveryMode, recovery)())
    return options


def _open_read_only(path: str, diagnosis: Diagnosis) -> Rdict:
    """The store as a normal open would see it; past a damaged WAL if need be."""
    tails = damaged_tails(path)
    for problem in tails:
        diagnosis.problems.append(
            f"write-ahead log {problem}; records after the damage are read past it"
        )
    try:
        if tails:
            raise _Damaged("damaged log tail")
        return Rdict(
            path, _options("tolerate_corrupted_tail_records"), access_type=AccessType.read_only()
        )
    except _Damaged:
        pass
    except Exception as exc:
        error = store_error(path, exc, "opening the store")
        if not isinstance(error, StoreCorruptedError):
            raise error from exc
        logs = sorted(n for n in os.listdir(path) if n.endswith(".log"))
        diagnosis.problems.append(
            f"write-ahead log ({', '.join(logs) or 'no .log file'}): "
            f"{' '.join(str(exc).split())}; records after the damage are read past it"
        )
    try:
        return Rdict(
            path, _options("skip_any_corrupted_record"), access_type=AccessType.read_only()
        )
    except Exception as exc:
        raise store_error(path, exc, "opening the store past its damaged log") from exc


def _status(it: object) -> str | None:
    try:
        it.status()  # type: ignore[attr-defined]
    except Exception as exc:
        return " ".join(str(exc).split())
    return None


def _seek(db: Rdict, key: bytes) -> Iterator[tuple[bytes, bytes]] | None:
    """Records from ``key`` on, or None when the block holding ``key`` is unreadable."""
    it = db.iter()
    it.seek(key)
    if not it.valid() and _status(it) is not None:
        return None

    def records() -> Iterator[tuple[bytes, bytes]]:
        while it.valid():
            yield it.key(), it.value()
            it.next()
        problem = _status(it)
        if problem is not None:
            raise _Damaged(problem)

    return records()


class _Damaged(Exception):
    pass


def _past(db: Rdict, after: bytes | None) -> tuple[bytes, Iterator[tuple[bytes, bytes]]] | None:
    """Where reading can go on after the damage that follows key ``after``: the next
    message id that can be sought (galloping, then bisecting), else the next key tag."""
    if after is not None and after[:1] == b"M" and len(after) >= 13:
        prefix, last = after[:5], int.from_bytes(after[5:13], "big", signed=True)
        step, bad = 1, last
        while last + step < _I64_MAX:
            probe = prefix + (last + step).to_bytes(8, "big", signed=True)
            if _seek(db, probe) is not None:
                good = last + step
                while good - bad > 1:  # the first id after the damaged block
                    middle = (good + bad) // 2
                    key = prefix + middle.to_bytes(8, "big", signed=True)
                    bad, good = (bad, middle) if _seek(db, key) is not None else (middle, good)
                key = prefix + good.to_bytes(8, "big", signed=True)
                found = _seek(db, key)
                assert found is not None
                return key, found
            bad = last + step
            step *= 2
            if step > 1 << 40:
                break
    tag = (after or b"\0")[0]
    for next_tag in range(tag + 1, 256):
        found = _seek(db, bytes([next_tag]))
        if found is not None:
            return bytes([next_tag]), found
    return None


def _records(db: Rdict, diagnosis: Diagnosis) -> Iterator[tuple[bytes, bytes]]:
    """Every record that can be read, in key order; damage is noted and read past."""
    found = _seek(db, b"\0")
    resume = _past(db, None) if found is None else (b"\0", found)
    last: bytes | None = None
    while resume is not None:
        _, records = resume
        try:
            for key, value in records:
                last = key
                yield key, value
            return
        except _Damaged as exc:
            diagnosis.problems.append(f"table data after key {last!r}: {exc}")
        resume = _past(db, last)


def _diagnose(db: Rdict, diagnosis: Diagnosis, copy: Callable[[bytes, bytes], None]) -> None:
    names: dict[int, str] = {}
    present: dict[int, list[list[int]]] = {}
    ends: dict[int, int] = {}
    floors: dict[int, int] = {}
    holes: dict[int, list[tuple[int, int]]] = {}

    def seen_end(cid: int, end: int) -> None:
        ends[cid] = max(ends.get(cid, FIRST_ID), end)

    for key, value in _records(db, diagnosis):
        copy(key, value)
        tag = key[:1]
        if tag == b"C":
            names[int.from_bytes(value[:4], "big")] = key[1:].decode(errors="replace")
            continue
        if tag == b"N":
            diagnosis.next_cid = max(diagnosis.next_cid, int.from_bytes(value[:4], "big"))
            continue
        if len(key) < 5:
            continue
        cid = int.from_bytes(key[1:5], "big")
        if tag == b"M":
            msg_id = int.from_bytes(key[5:13], "big", signed=True)
            runs = present.setdefault(cid, [])
            if runs and runs[-1][1] + 1 == msg_id:
                runs[-1][1] = msg_id
            else:
                runs.append([msg_id, msg_id])
            seen_end(cid, msg_id + 1)
        elif tag == b"P":
            seen_end(cid, int.from_bytes(value[:8], "big", signed=True) + 1)
        elif tag == b"S":
            seen_end(cid, int.from_bytes(value[:8], "big", signed=True))
        elif tag == b"L":
            floors[cid] = int.from_bytes(value[:8], "big", signed=True)
            seen_end(cid, floors[cid])
        elif tag == b"H":
            hole = (
                int.from_bytes(key[5:13], "big", signed=True),
                int.from_bytes(value[:8], "big", signed=True),
            )
            holes.setdefault(cid, []).append(hole)
            seen_end(cid, hole[1] + 1)
    for cid in sorted(set(names) | set(present) | set(ends)):
        diagnosis.next_cid = max(diagnosis.next_cid, cid + 1)
        if cid not in names:
            names[cid] = f"recovered-{cid}"
            diagnosis.problems.append(
                f"channel id {cid} has records but its name is lost; repair names it {names[cid]!r}"
            )
        health = ChannelHealth(names[cid], cid, floor=max(FIRST_ID, floors.get(cid, FIRST_ID)))
        health.end_id = max(ends.get(cid, FIRST_ID), health.floor)
        health.holes = holes.get(cid, [])
        runs = present.get(cid, [])
        health.messages = sum(last - first + 1 for first, last in runs)
        health.first_id = runs[0][0] if runs else None
        known = sorted([*(tuple(r) for r in runs), *health.holes])
        expect = health.floor
        for first, last in known:
            if first > expect:
                health.lost.append((expect, first - 1))
            expect = max(expect, last + 1)
        if expect < health.end_id:
            health.lost.append((expect, health.end_id - 1))
        diagnosis.channels.append(health)


def check(path: str) -> Diagnosis:
    """What is damaged in the store at ``path`` and what can be read; writes nothing."""
    path = os.path.abspath(path)
    check_store_path(path, create=False)
    diagnosis = Diagnosis(path)
    db = _open_read_only(path, diagnosis)
    try:
        _diagnose(db, diagnosis, lambda key, value: None)
    finally:
        db.close()
    return diagnosis


def repair(path: str) -> Diagnosis:
    """Rebuild the store at ``path`` from what can be read (see the module doc)."""
    path = os.path.abspath(path)
    check_store_path(path, create=False)
    with _locked(path):
        return _repair(path)


@contextlib.contextmanager
def _locked(path: str) -> Iterator[None]:
    """Hold the store's owner lock (no process sharing the store takes it over meanwhile)
    and its ``LOCK`` (RocksDB's own lock, a POSIX record lock) without opening the store:
    opening it writable would already change files the backup must keep."""
    owner = OwnerLock.try_acquire(path, "exclusive", announce=False)  # the backup is as found
    if owner is None:
        holder = read_owner(path)
        who = f"process {holder.pid}" if holder is not None else "another process"
        raise StoreLockedError(path, f"{who} owns the store; stop it before repairing")
    fd = os.open(os.path.join(path, "LOCK"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            raise StoreLockedError(
                path, "another process holds the store open; stop it before repairing"
            ) from exc
        yield
    finally:
        os.close(fd)
        owner.release()


def _repair(path: str) -> Diagnosis:
    diagnosis = Diagnosis(path)
    source = _open_read_only(path, diagnosis)
    fresh_path = f"{path}.repairing"
    shutil.rmtree(fresh_path, ignore_errors=True)
    create = Options(raw_mode=True)
    create.create_if_missing(True)
    fresh = Rdict(fresh_path, create)
    batch = WriteBatch(raw_mode=True)
    pending = 0

    def copy(key: bytes, value: bytes) -> None:
        nonlocal batch, pending
        batch.put(key, value)
        pending += 1
        if pending >= 10_000:
            fresh.write(batch)
            batch, pending = WriteBatch(raw_mode=True), 0

    try:
        _diagnose(source, diagnosis, copy)
        for health in diagnosis.channels:
            if health.channel.startswith("recovered-"):
                batch.put(b"C" + health.channel.encode(), health.cid.to_bytes(4, "big") + bytes(8))
            for first, last in health.lost:
                key = b"H" + health.cid.to_bytes(4, "big") + first.to_bytes(8, "big", signed=True)
                batch.put(key, last.to_bytes(8, "big", signed=True))
        batch.put(b"N", diagnosis.next_cid.to_bytes(4, "big"))
        fresh.write(batch)
        fresh.flush()
    finally:
        fresh.close()
        source.close()
    diagnosis.backup = f"{path}.damaged-{time.strftime('%Y%m%dT%H%M%S')}"
    os.rename(path, diagnosis.backup)
    os.rename(fresh_path, path)
    return diagnosis
