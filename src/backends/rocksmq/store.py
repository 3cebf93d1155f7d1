"""rocksmq: the embedded log on one RocksDB (through rocksdict).

Key layout (all big-endian, so a channel's messages are one sequential range)::

    b"C" + channel name          -> channel id u32 | created_ms u64
    b"N"                         -> next channel id u32
    b"M" + cid u32 + msg id i64 + flag u8 -> payload           (flag 0: no properties)
                                          -> u32 len | json | payload   (flag 1)
    b"P" + cid u32 + first id    -> last id i64 | bytes u64 | closed_ms u64   (closed pages)
    b"S" + cid u32 + sub name    -> next id i64 | last_active_ms u64          (cursors)
    b"L" + cid u32               -> i64: every id below it was deleted by retention

The ``L`` mark keeps ids from being reused once retention has deleted every message of
a channel (the next id is otherwise derived from the last message or page on open).

    b"H" + cid u32 + first id    -> last id i64: ids lost to damage, recorded by a repair
    b"Q" + producer u64          -> seq u64 | cid u32 | first id i64 | count u32 | active ms u64

A ``Q`` record is the last send of a producer in another process (a shared store's
owner appends for it, :meth:`RocksStore.append_once`), written in the same batch as the
messages: a send retried after its owner died is answered with the ids it got instead
of being stored twice. Records idle for :data:`PRODUCER_IDLE_MS` are dropped.

A send is one WriteBatch (ids allocated under a lock), acknowledged once RocksDB has
written it to the WAL (fsynced too with ``sync=True``). Messages are grouped into pages
for retention; the open page of a channel is rebuilt from its messages on open.

Durability: with ``sync=False`` an acknowledged message survives a crash of the process
(the WAL write is in the kernel) but not of the machine; with ``sync=True`` it survives
power loss too. A torn last WAL record (the write a power loss interrupted, never
acknowledged under ``sync=True``) is dropped on open; any other damage to the WAL fails
the open with :class:`StoreCorruptedError` instead of RocksDB's default of silently
dropping everything after it. Every read checks that the ids it returns are all the ids
the channel holds in that range, so a damaged table block, which makes RocksDB's
iterator stop early without an error, is reported rather than read past.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import struct
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import chain, repeat
from operator import getitem
from types import MappingProxyType
from typing import NamedTuple, cast

import orjson
from rocksdict import (
    AccessType,
    DBRecoveryMode,
    Options,
    Rdict,
    ReadOptions,
    WriteBatch,
    WriteOptions,
)

from msgstream.contract.backend import NO_PROPERTIES
from msgstream.errors import SendOutcomeUnknownError, StreamClosedError, TopicNotFoundError
from msgstream.observability.logs import fields, get_logger

from ..log_client.store import (
    FIRST_ID,
    LogStore,
    Properties,
    Record,
    StoredBatch,
    StoredSubscription,
    now_ms,
)
from .errors import DiskFullError, StoreCorruptedError, StoreError
from .failures import check_store_path, store_error
from .holds import Holds
from .retention import Page, RetentionPolicy, expired_pages
from .secondary import SecondaryDir
from .settings import RocksmqConfig
from .wal import damaged_tails

log = get_logger(__name__)

_U32 = struct.Struct(">I")
_CHANNEL = struct.Struct(">IQ")
_MSG_KEY = struct.Struct(">cIqB")
"""A message's full key; its first 13 bytes (``_msg_key``) order and seek by id, and the
trailing flag says whether properties lead the value, so a plain payload is stored as
is (no copy on write or read)."""
_ID_KEY = struct.Struct(">cIq")
_PAGE = struct.Struct(">qQQ")
_SUB = struct.Struct(">qQ")
_I64 = struct.Struct(">q")
_CID_PREFIX = struct.Struct(">cI")
_PRODUCER_KEY = struct.Struct(">cQ")
_PRODUCER = struct.Struct(">QIqIQ")
PRODUCER_IDLE_MS = 3_600_000
"""A producer's last-send record is kept this long after its last send: a retry comes
within one operation timeout, long before."""
_MAX_ID = (1 << 63) - 1
_PLAIN, _WITH_PROPS = 0, 1
_ID_BYTES = slice(5, 13)
"""Where a message key holds its id (8 bytes, big-endian, signed)."""
_FLAG_BYTE = 13
_part = cast(Callable[[bytes, slice], bytes], getitem)
"""``key[a:b]``, for C-level maps."""
_EMPTY: Properties = MappingProxyType({})


def _msg_key(cid: int, msg_id: int) -> bytes:
    """The 13-byte prefix of message ``msg_id``'s key: where seeks and ranges start."""
    return _ID_KEY.pack(b"M", cid, msg_id)


def _within_channel(cid: int) -> ReadOptions:
    """Read options that stop an iterator at the end of channel ``cid``'s messages. Keep
    them until the iteration is done: RocksDB holds a pointer to the bound."""
    bounds = ReadOptions()
    bounds.set_iterate_upper_bound(_CID_PREFIX.pack(b"M", cid + 1))
    return bounds


def _encode_props(payload: bytes, properties: Properties) -> bytes:
    props = orjson.dumps(dict(properties))
    return _U32.pack(len(props)) + props + payload


def _decode_props(value: bytes) -> tuple[bytes, Properties]:
    (size,) = _U32.unpack_from(value)
    return value[4 + size :], orjson.loads(value[4 : 4 + size])


class _LastSend(NamedTuple):
    """A producer's last send (see the ``Q`` records)."""

    seq: int
    cid: int
    first_id: int
    messages: int


@dataclass(slots=True)
class _OpenPage:
    first_id: int
    size: int = 0


@dataclass(frozen=True, slots=True)
class RocksOptions:
    sync: bool = False
    page_size: int = RocksmqConfig().page_size_bytes
    retention: RetentionPolicy = field(default_factory=lambda: RetentionPolicy(-1, -1))
    subscription_idle_expiry_ms: int = -1
    read_only: bool = False
    poll_interval_s: float = 0.05
    """How often a read-only store looks for the writer's new messages."""
    create: bool = True
    """Create a missing store (writable opens only; ``msgstream inspect`` never creates)."""
    recovery: str = "tolerate_corrupted_tail_records"
    """RocksDB's WAL recovery mode (a ``DBRecoveryMode`` name). Only ``msgstream doctor
    --repair`` opens with another one, to recover past damage."""


_CATCH_UP_TRIES = 5
_REVIVE_MIN_FREE = 1 << 20
"""Free bytes needed before a store that hit a full disk is reopened."""


class RocksStore(LogStore):
    backend_name = "rocksmq"

    def __init__(self, path: str, options: RocksOptions | None = None) -> None:
        super().__init__()
        self.path = path
        self.options = options or RocksOptions()
        self.read_only = self.options.read_only
        self._lock = threading.RLock()
        self._secondary_dir: SecondaryDir | None = None
        # rocksdict creates a missing directory even for a secondary: check first.
        check_store_path(path, create=self.options.create and not self.read_only)
        damage = damaged_tails(path)
        if damage and self.options.recovery == "tolerate_corrupted_tail_records":
            raise StoreCorruptedError(
                path,
                f"opening the store found damage in its write-ahead log: {'; '.join(damage)}; "
                f"run `msgstream doctor {path}` to see what is damaged and what can be "
                "recovered",
            )
        self._full = False
        self.last_deleted: dict[str, int] = {}
        """Messages each channel lost in the last retention round (for metrics)."""
        """A write hit a full disk: RocksDB refuses every write after that until reopened."""
        self._lost: StoreError | None = None
        """Why the store is unusable, when reopening it after a full disk failed."""
        self._db = self._open_db()
        self._write_options = WriteOptions()
        self._write_options.sync = self.options.sync
        self._sync_write_options = WriteOptions()
        self._sync_write_options.sync = True
        self._last_sends: dict[int, _LastSend] = {}
        self._closed = False
        self._caught_up_at = float("-inf")
        self._open_consumers: dict[tuple[str, str], int] = {}
        self._volatile_subs: dict[tuple[str, str], StoredSubscription] = {}
        self.holds = Holds(path)
        """Subscriptions of read-only processes, which retention honours too."""
        try:
            self._load()
        except Exception as exc:
            self._db.close()
            raise store_error(path, exc, "loading the store's index") from exc

    def _open_db(self) -> Rdict:
        db_options = Options(raw_mode=True)
        db_options.set_paranoid_checks(True)
        db_options.set_wal_recovery_mode(getattr(DBRecoveryMode, self.options.recovery)())
        try:
            if self.read_only:
                assert self._secondary_dir is None
                self._secondary_dir = SecondaryDir()
                db_options.set_max_open_files(-1)
                access = AccessType.secondary(self._secondary_dir.name)
                return Rdict(self.path, db_options, access_type=access)
            db_options.create_if_missing(self.options.create)
            return Rdict(self.path, db_options)
        except Exception as exc:
            if self._secondary_dir is not None:
                self._secondary_dir.cleanup()
                self._secondary_dir = None
            raise store_error(self.path, exc, "opening the store") from exc

    def _failed(self, exc: Exception, doing: str) -> StoreError:
        """The error for a failed write; after a full disk, the next write reopens."""
        error = store_error(self.path, exc, doing)
        if isinstance(error, DiskFullError):
            self._full = True
        return error

    def _revive(self) -> None:
        """Reopen the store after a full disk, once there is room again (RocksDB keeps
        failing every write with the first error until then; rocksdict cannot call its
        ``Resume``). Opening replays the WAL into a table file, so it needs about the
        WAL's size free: short of that the store stays open for reads. Under the lock."""
        free = _free_bytes(self.path)
        needed = _REVIVE_MIN_FREE + _wal_bytes(self.path)
        if free < needed:
            raise DiskFullError(
                self.path,
                f"the disk holding the store is still full ({free} bytes free, about "
                f"{needed} needed to reopen); writes resume by themselves once space is freed",
            )
        with contextlib.suppress(Exception):
            self._db.close()
        try:
            self._db = self._open_db()
            self._load()
        except Exception as exc:
            self._lost = store_error(self.path, exc, "reopening the store after a full disk")
            raise self._lost from exc
        self._full = False
        log.warning(
            "rocksmq store at %s reopened after its disk was full; writes resume",
            self.path,
            extra=fields("rocksmq"),
        )

    def _put(self, key: bytes, value: bytes, doing: str) -> None:
        with self._lock:
            self._check_open()
            if self._full:
                self._revive()
            try:
                self._db.put(key, value, self._write_options)
            except Exception as exc:
                raise self._failed(exc, doing) from exc

    def _write(self, batch: WriteBatch, doing: str, options: WriteOptions | None = None) -> None:
        with self._lock:
            self._check_open()
            if self._full:
                self._revive()
            try:
                self._db.write(batch, options or self._write_options)
            except Exception as exc:
                raise self._failed(exc, doing) from exc

    # --- loading ----------------------------------------------------------------------
    def _load(self) -> None:
        """(Re)build the in-memory indexes: channels, next ids and open pages."""
        self._cids: dict[str, int] = {}
        self._next: dict[int, int] = {}
        self._floor: dict[int, int] = {}
        self._holes: dict[int, list[tuple[int, int]]] = {}
        self._open_pages: dict[int, _OpenPage] = {}
        for key, value in self._scan(b"C"):
            cid, _ = _CHANNEL.unpack(value)
            self._cids[key[1:].decode()] = cid
        raw_next = self._db.get(b"N")
        self._next_cid = _U32.unpack(raw_next)[0] if raw_next else 1
        for key, value in self._scan(b"H"):
            first = int.from_bytes(key[5:13], "big", signed=True)
            self._holes.setdefault(_U32.unpack(key[1:5])[0], []).append(
                (first, _I64.unpack(value)[0])
            )
        for cid in self._cids.values():
            self._floor[cid] = self._deleted_below(cid)
            self._next[cid] = self._find_next_id(cid)
            if self.read_only:
                continue  # no appends nor retention: skip the scan of the open page
            pages = self._pages(cid)
            page = _OpenPage(pages[-1].last_id + 1 if pages else self._deleted_below(cid))
            page.size = self._stored_bytes(cid, page.first_id)
            self._open_pages[cid] = page

    def _stored_bytes(self, cid: int, from_id: int) -> int:
        """The bytes of channel ``cid``'s messages from ``from_id`` on (an open page holds
        up to ``page_size`` of them): summed in C-level maps, no Python code a message."""
        bounds = _within_channel(cid)
        values = self._db.values(from_key=_msg_key(cid, from_id), read_opt=bounds)
        total = sum(map(len, cast(Iterator[bytes], values)))
        del values, bounds
        return total

    def _find_next_id(self, cid: int) -> int:
        it = self._db.iter()
        it.seek_for_prev(_msg_key(cid, _MAX_ID))
        holes_end = max((last + 1 for _, last in self._holes.get(cid, ())), default=FIRST_ID)
        if it.valid() and it.key()[:5] == _CID_PREFIX.pack(b"M", cid):
            return max(int.from_bytes(it.key()[5:13], "big", signed=True) + 1, holes_end)
        pages = self._pages(cid)
        return max(pages[-1].last_id + 1 if pages else self._deleted_below(cid), holes_end)

    def _deleted_below(self, cid: int) -> int:
        """The id below which retention deleted everything (FIRST_ID if it never ran)."""
        raw = self._db.get(_CID_PREFIX.pack(b"L", cid))
        return max(FIRST_ID, _I64.unpack(raw)[0]) if raw else FIRST_ID

    def _scan(self, prefix: bytes, start: bytes | None = None) -> Iterator[tuple[bytes, bytes]]:
        """Every (key, value) under ``prefix`` from ``start`` on, lazily (an open page may
        hold up to ``page_size`` bytes)."""
        it = self._db.iter()
        it.seek(start or prefix)
        while it.valid():
            key = it.key()
            if not key.startswith(prefix):
                break
            yield key, it.value()
            it.next()

    def _pages(self, cid: int) -> list[Page]:
        pages = []
        for key, value in self._scan(_CID_PREFIX.pack(b"P", cid)):
            first = int.from_bytes(key[5:], "big", signed=True)
            last, size, closed = _PAGE.unpack(value)
            pages.append(Page(first, last, size, closed))
        return pages

    def _check_open(self) -> None:
        if self._closed:
            raise StreamClosedError(f"rocksmq store at {self.path!r}")
        if self._lost is not None:
            raise self._lost

    def _cid(self, channel: str) -> int:
        try:
            return self._cids[channel]
        except KeyError:
            raise TopicNotFoundError(channel, self.backend_name, self.list_channels()) from None

    # --- channels ---------------------------------------------------------------------
    def has_channel(self, channel: str) -> bool:
        if channel not in self._cids and self.read_only:
            self.catch_up()  # the writer may have created it since this store opened
        return channel in self._cids

    def ensure_channel(self, channel: str) -> None:
        self._check_open()
        with self._lock:
            if channel in self._cids:
                return
            cid = self._next_cid
            batch = WriteBatch(raw_mode=True)
            batch.put(b"C" + channel.encode(), _CHANNEL.pack(cid, now_ms()))
            batch.put(b"N", _U32.pack(cid + 1))
            self._write(batch, f"creating channel {channel!r}")
            self._next_cid = cid + 1
            self._cids[channel] = cid
            self._next[cid] = FIRST_ID
            self._floor[cid] = FIRST_ID
            self._open_pages[cid] = _OpenPage(FIRST_ID)

    def list_channels(self) -> list[str]:
        return sorted(self._cids)

    def delete_channel(self, channel: str) -> None:
        self._check_open()
        with self._lock:
            cid = self._cids.pop(channel, None)
            if cid is None:
                return
            batch = WriteBatch(raw_mode=True)
            batch.delete(b"C" + channel.encode())
            for tag in (b"M", b"P", b"S", b"L", b"H"):
                batch.delete_range(_CID_PREFIX.pack(tag, cid), _CID_PREFIX.pack(tag, cid + 1))
            self._write(batch, f"deleting channel {channel!r}")
            self._next.pop(cid, None)
            self._floor.pop(cid, None)
            self._holes.pop(cid, None)
            self._open_pages.pop(cid, None)

    # --- records ----------------------------------------------------------------------
    def append(
        self,
        channel: str,
        payloads: Sequence[bytes],
        properties: Properties,
        sent_by: tuple[int, int] | None = None,
        sync: bool = False,
    ) -> range:
        """Store ``payloads``; ``sent_by`` (producer, seq) records the send in the same
        batch (see :meth:`append_once`); ``sync`` fsyncs this write whatever
        ``options.sync`` says."""
        self._check_open()
        with self._lock:
            return self._append_locked(channel, payloads, properties, sent_by, sync)

    def append_one(self, channel: str, payload: bytes) -> int:
        """:meth:`append` of one payload without properties: one ``put`` under the lock,
        without the batch path's sequences. A payload that closes its page takes
        :meth:`append`'s path, which records the page in the same write."""
        self._check_open()
        with self._lock:
            if self._full:
                self._revive()
            cid = self._cid(channel)
            page = self._open_pages[cid]
            size = len(payload)
            if page.size + size >= self.options.page_size:
                return self._append_locked(channel, (payload,), NO_PROPERTIES, None, False)[0]
            first = self._next[cid]
            try:
                self._db.put(_MSG_KEY.pack(b"M", cid, first, _PLAIN), payload, self._write_options)
            except Exception as exc:
                raise self._failed(exc, f"writing to channel {channel!r}") from exc
            self._next[cid] = first + 1
            page.size += size
            return first

    def _append_locked(
        self,
        channel: str,
        payloads: Sequence[bytes],
        properties: Properties,
        sent_by: tuple[int, int] | None,
        sync: bool,
    ) -> range:
        """:meth:`append`, the store open and its lock held."""
        if self._full:
            self._revive()
        cid = self._cid(channel)
        first = self._next[cid]
        count = len(payloads)
        last = first + count - 1
        if properties:
            values: Sequence[bytes] = [_encode_props(p, properties) for p in payloads]
            flag = _WITH_PROPS
        else:
            values, flag = payloads, _PLAIN
        size = sum(map(len, values))
        page = self._open_pages[cid]
        closing = page.size + size >= self.options.page_size
        write_options = self._sync_write_options if sync else self._write_options
        if count == 1 and not closing and sent_by is None:  # atomic, cheaper than a batch
            try:
                self._db.put(_MSG_KEY.pack(b"M", cid, first, flag), values[0], write_options)
            except Exception as exc:
                raise self._failed(exc, f"writing to channel {channel!r}") from exc
        else:
            batch = WriteBatch(raw_mode=True)
            if count == 1:  # an idempotent send of one message: no map, no loop
                batch.put(_MSG_KEY.pack(b"M", cid, first, flag), values[0])
            else:  # keys built by a C-level map(); the loop only calls put()
                ids = range(first, last + 1)
                keys = map(_MSG_KEY.pack, repeat(b"M"), repeat(cid), ids, repeat(flag))
                put = batch.put
                for key, value in zip(keys, values, strict=True):
                    put(key, value)
            if closing:
                batch.put(
                    page_key(cid, page.first_id), _PAGE.pack(last, page.size + size, now_ms())
                )
            if sent_by is not None:
                producer, seq = sent_by
                batch.put(
                    _PRODUCER_KEY.pack(b"Q", producer),
                    _PRODUCER.pack(seq, cid, first, count, now_ms()),
                )
            try:  # under the lock, open and not full: checked above
                self._db.write(batch, write_options)
            except Exception as exc:
                raise self._failed(
                    exc, f"writing {count} message(s) to channel {channel!r}"
                ) from exc
            if sent_by is not None:
                self._last_sends[sent_by[0]] = _LastSend(sent_by[1], cid, first, count)
        self._next[cid] = last + 1
        if closing:
            self._open_pages[cid] = _OpenPage(last + 1)
        else:
            page.size += size
        return range(first, last + 1)

    def append_once(
        self,
        channel: str,
        payloads: Sequence[bytes],
        properties: Properties,
        producer: int,
        seq: int,
        sync: bool = False,
    ) -> range:
        """:meth:`append` for send ``seq`` of ``producer`` (a producer's sends come one at a
        time, numbered up from 1): a send already stored -- retried because its answer was
        lost with its owner -- returns the ids it got instead of being stored again. A
        send older than the producer's last one, or one that does not match what was
        stored under its number, raises :class:`SendOutcomeUnknownError`."""
        with self._lock:
            self._check_open()
            last = self._last_send(producer)
            if last is not None and seq <= last.seq:
                same = (seq, self._cids.get(channel), len(payloads))
                if same == (last.seq, last.cid, last.messages):
                    return range(last.first_id, last.first_id + last.messages)
                raise SendOutcomeUnknownError(
                    f"rocksmq store at {self.path!r}: send {seq} of producer {producer:#x} to "
                    f"channel {channel!r} cannot be matched with what was stored (its last "
                    f"stored send is {last.seq}); it may have been stored"
                )
            return self._append_locked(channel, payloads, properties, (producer, seq), sync)

    def _last_send(self, producer: int) -> _LastSend | None:
        """A producer's last stored send (under the lock)."""
        last = self._last_sends.get(producer)
        if last is None:
            raw = self._db.get(_PRODUCER_KEY.pack(b"Q", producer))
            if raw is not None:
                seq, cid, first, count, _ = _PRODUCER.unpack(raw)
                last = self._last_sends[producer] = _LastSend(seq, cid, first, count)
        return last

    def expire_producers(self, now: int | None = None) -> int:
        """Drop the last-send records idle for :data:`PRODUCER_IDLE_MS`; how many."""
        self._check_open()
        if self.read_only:
            return 0
        now = now_ms() if now is None else now
        with self._lock:
            batch = WriteBatch(raw_mode=True)
            expired = []
            for key, value in self._scan(b"Q"):
                if now - _PRODUCER.unpack(value)[4] > PRODUCER_IDLE_MS:
                    batch.delete(key)
                    expired.append(_PRODUCER_KEY.unpack(key)[1])
            if expired:
                self._write(batch, "dropping idle producers' last sends")
                for producer in expired:
                    self._last_sends.pop(producer, None)
        return len(expired)

    def _flat_items(
        self, channel: str, from_id: int, limit: int, tries: int = _CATCH_UP_TRIES
    ) -> list[bytes]:
        """Up to ``limit`` messages of ``channel`` from ``from_id`` on, as one flat list
        ``[key, value, key, value, ...]``: each (key, value) pair the iterator makes is
        dropped as soon as it is read, and no Python code runs per message.

        Every id from ``from_id`` (or the retention floor) up to the channel's end is
        stored, so the read is checked in O(1): first id, last id and count must agree,
        and a short read must reach the end. RocksDB's iterator stops without an error
        at a damaged block; that check turns it into :class:`StoreCorruptedError`.

        A read-only store (a RocksDB secondary) can find ids missing that the writer has
        not lost: its last catch-up read the writer's file list before a flush and its
        log after it (the flushed log is gone), or a table file was compacted away. It
        catches up again and reads again (``tries`` times) before calling it damage.
        """
        self._check_open()
        cid = self._cid(channel)
        end = self._next.get(cid, FIRST_ID)  # before the iterator: it sees at least this
        start = max(from_id, self._floor.get(cid, FIRST_ID))
        if start >= end:
            return []
        bounds = _within_channel(cid)
        items = self._db.items(from_key=_msg_key(cid, start), read_opt=bounds)
        pairs = cast(Iterator[tuple[bytes, bytes]], items)
        flat = list(chain.from_iterable(itertools.islice(pairs, limit)))
        del items, pairs, bounds
        got = len(flat) >> 1
        if got:
            first = int.from_bytes(flat[0][5:13], "big", signed=True)
            last = int.from_bytes(flat[-2][5:13], "big", signed=True)
            if first == start and last - first + 1 == got and (got == limit or last + 1 >= end):
                return flat
        try:
            self._check_gaps(channel, cid, flat[0::2], start, end, short=got < limit)
        except StoreCorruptedError:
            if not self.read_only or tries <= 1:
                raise
            self.catch_up()
            return self._flat_items(channel, from_id, limit, tries - 1)
        return flat

    def _check_gaps(
        self, channel: str, cid: int, keys: list[bytes], start: int, end: int, *, short: bool
    ) -> None:
        """The slow path of :meth:`_flat_items`: ids missing from a read are fine only
        below the retention floor (read again from the store: retention may have run
        meanwhile) or inside holes a repair recorded; anything else is damage."""
        ids = [int.from_bytes(key[5:13], "big", signed=True) for key in keys]
        bounds = [start - 1, *ids] + ([end] if short else [])
        floor = self._deleted_below(cid)
        holes = self._holes.get(cid, [])
        for before, after in itertools.pairwise(bounds):
            missing_from, missing_to = max(before + 1, floor), after - 1
            for hole_first, hole_last in holes:
                if hole_first <= missing_from <= hole_last:
                    missing_from = hole_last + 1
            if missing_from <= missing_to:
                raise self._unreadable(channel, cid, missing_from, missing_to)

    def _unreadable(self, channel: str, cid: int, first: int, last: int) -> StoreCorruptedError:
        it = self._db.iter()
        it.seek(_msg_key(cid, first))
        try:
            it.status()
            why = "missing from the store"
        except Exception as exc:
            why = " ".join(str(exc).split())
        lost = f"channel {channel!r} ids {first}..{last}"
        return StoreCorruptedError(
            self.path,
            f"{lost} cannot be read ({why}); run `msgstream doctor {self.path}` to see what "
            "is damaged and what can be recovered",
            lost=lost,
        )

    def first_readable(self, channel: str) -> int:
        cid = self._cids.get(channel)
        return FIRST_ID if cid is None else self._floor.get(cid, FIRST_ID)

    def read(self, channel: str, from_id: int, limit: int) -> list[Record]:
        flat = self._flat_items(channel, from_id, limit)
        from_bytes = int.from_bytes
        out: list[Record] = []
        for key, value in zip(flat[0::2], flat[1::2], strict=True):
            msg_id = from_bytes(key[5:13], "big", signed=True)
            if key[13] == _PLAIN:
                out.append(Record(msg_id, value, _EMPTY))
            else:
                payload, props = _decode_props(value)
                out.append(Record(msg_id, payload, props))
        return out

    def read_batch(self, channel: str, from_id: int, limit: int) -> StoredBatch | None:
        """What :meth:`read` returns, as columns cut from the keys by C-level maps."""
        flat = self._flat_items(channel, from_id, limit)
        if not flat:
            return None
        keys, values = flat[0::2], flat[1::2]
        ids = list(map(_part, keys, repeat(_ID_BYTES)))
        next_id = int.from_bytes(ids[-1], "big", signed=True) + 1
        flags = bytes(map(getitem, keys, repeat(_FLAG_BYTE)))
        if flags.count(_PLAIN) == len(flags):
            return StoredBatch(ids, values, None, next_id)
        payloads: list[bytes] = []
        properties: list[Properties] = []
        for flag, value in zip(flags, values, strict=True):
            if flag == _PLAIN:
                payloads.append(value)
                properties.append(_EMPTY)
            else:
                payload, props = _decode_props(value)
                payloads.append(payload)
                properties.append(props)
        return StoredBatch(ids, payloads, properties, next_id)

    def first_id(self, channel: str) -> int | None:
        self._check_open()
        cid = self._cid(channel)
        it = self._db.iter()
        it.seek(_CID_PREFIX.pack(b"M", cid))
        if it.valid() and it.key()[:5] == _CID_PREFIX.pack(b"M", cid):
            return int.from_bytes(it.key()[5:13], "big", signed=True)
        return None

    def next_id(self, channel: str) -> int:
        cid = self._cids.get(channel)
        return FIRST_ID if cid is None else self._next[cid]

    # --- subscriptions ----------------------------------------------------------------
    def _sub_key(self, cid: int, name: str) -> bytes:
        return _CID_PREFIX.pack(b"S", cid) + name.encode()

    def get_subscription(self, channel: str, name: str) -> StoredSubscription | None:
        volatile = self._volatile_subs.get((channel, name))
        if volatile is not None:
            return volatile
        self._check_open()
        cid = self._cids.get(channel)
        if cid is None:
            return None
        raw = self._db.get(self._sub_key(cid, name))
        if raw is None:
            return None
        next_id, active = _SUB.unpack(raw)
        return StoredSubscription(name, next_id, active)

    def put_subscription(self, channel: str, name: str, next_id: int) -> None:
        self._check_open()
        if self.read_only:
            self._volatile_subs[(channel, name)] = StoredSubscription(name, next_id, now_ms())
            return
        cid = self._cid(channel)
        self._put(
            self._sub_key(cid, name),
            _SUB.pack(next_id, now_ms()),
            f"saving subscription {name!r} of channel {channel!r}",
        )

    def list_subscriptions(self, channel: str) -> list[StoredSubscription]:
        """This store's subscriptions of ``channel``, then the holds of read-only
        processes on it (:mod:`.holds`)."""
        return self._stored_subscriptions(channel) + self.holds.of_channel(channel)

    def _stored_subscriptions(self, channel: str) -> list[StoredSubscription]:
        self._check_open()
        cid = self._cid(channel)
        subs = []
        for key, value in self._scan(_CID_PREFIX.pack(b"S", cid)):
            next_id, active = _SUB.unpack(value)
            subs.append(StoredSubscription(key[5:].decode(), next_id, active))
        return subs

    def advance_subscription(self, channel: str, name: str, next_id: int) -> None:
        with self._lock:  # atomic: two processes may acknowledge at once
            super().advance_subscription(channel, name, next_id)

    def delete_subscription(self, channel: str, name: str) -> None:
        """Forget subscription ``name`` of ``channel``, and release a hold of that name."""
        self._check_open()
        cid = self._cids.get(channel)
        if cid is not None:
            batch = WriteBatch(raw_mode=True)
            batch.delete(self._sub_key(cid, name))
            self._write(batch, f"deleting subscription {name!r} of channel {channel!r}")
        self.holds.delete(channel, name)

    # --- open consumers pin their subscriptions against idle expiry -------------------------
    def consumer_opened(self, channel: str, name: str) -> None:
        key = (channel, name)
        with self._lock:
            self._open_consumers[key] = self._open_consumers.get(key, 0) + 1

    def consumer_closed(self, channel: str, name: str) -> None:
        key = (channel, name)
        with self._lock:
            left = self._open_consumers.get(key, 0) - 1
            if left > 0:
                self._open_consumers[key] = left
            else:
                self._open_consumers.pop(key, None)

    # --- retention ----------------------------------------------------------------------
    def run_retention(self, now: int | None = None) -> int:
        """Expire idle subscriptions, close open pages and delete expired pages.

        Returns the number of messages deleted. Safe to call at any time.
        """
        self._check_open()
        if self.read_only:
            return 0
        now = now_ms() if now is None else now
        deleted = 0
        self.last_deleted = {}
        with self._lock:
            for channel, cid in list(self._cids.items()):
                live = self._live_subscriptions(channel, cid, now)
                self._close_open_page(cid, now)
                acked_below = min((s.next_id for s in live), default=None)
                pages = self._pages(cid)
                open_size = self._open_pages[cid].size
                doomed = expired_pages(pages, open_size, acked_below, now, self.options.retention)
                if not doomed:
                    continue
                batch = WriteBatch(raw_mode=True)
                batch.delete_range(
                    _msg_key(cid, doomed[0].first_id), _msg_key(cid, doomed[-1].last_id + 1)
                )
                for page in doomed:
                    batch.delete(page_key(cid, page.first_id))
                batch.put(_CID_PREFIX.pack(b"L", cid), _I64.pack(doomed[-1].last_id + 1))
                self._write(batch, f"retention on channel {channel!r}")
                self._floor[cid] = max(self._floor.get(cid, FIRST_ID), doomed[-1].last_id + 1)
                deleted += doomed[-1].last_id + 1 - doomed[0].first_id
                self.last_deleted[channel] = doomed[-1].last_id + 1 - doomed[0].first_id
                log.info(
                    "rocksmq retention: channel %r deleted ids %d..%d (%d pages)",
                    channel,
                    doomed[0].first_id,
                    doomed[-1].last_id,
                    len(doomed),
                    extra=fields("rocksmq", channel),
                )
        return deleted

    def _live_subscriptions(self, channel: str, cid: int, now: int) -> list[StoredSubscription]:
        expiry = self.options.subscription_idle_expiry_ms
        live = []
        for sub in self._stored_subscriptions(channel):
            pinned = (channel, sub.name) in self._open_consumers
            if expiry >= 0 and not pinned and now - sub.last_active_ms > expiry:
                expire = WriteBatch(raw_mode=True)
                expire.delete(self._sub_key(cid, sub.name))
                self._write(expire, f"expiring subscription {sub.name!r}")
                _log_expired("subscription", sub, channel, now)
                continue
            live.append(sub)
        for hold in self.holds.of_channel(channel):
            if expiry >= 0 and now - hold.last_active_ms > expiry:
                self.holds.delete(channel, hold.name)
                _log_expired("hold", hold, channel, now)
                continue
            live.append(hold)
        return live

    def _close_open_page(self, cid: int, now: int) -> None:
        page = self._open_pages[cid]
        last = self._next[cid] - 1
        if last < page.first_id:
            return
        self._put(page_key(cid, page.first_id), _PAGE.pack(last, page.size, now), "closing a page")
        self._open_pages[cid] = _OpenPage(last + 1)

    def flush(self) -> None:
        """Write the memtables to table files (RocksDB otherwise keeps them in the WAL)."""
        self._check_open()
        if not self.read_only:
            with self._lock:
                try:
                    self._db.flush()
                except Exception as exc:
                    raise self._failed(exc, "flushing the store") from exc

    def compact(self) -> None:
        """Reclaim the disk space of deleted ranges."""
        self._check_open()
        if not self.read_only:
            self._db.compact_range(None, None)

    def backlogs(self) -> dict[str, dict[str, int]]:
        """Per channel, each subscription's backlog (messages not acknowledged)."""
        result: dict[str, dict[str, int]] = {}
        for channel in self.list_channels():
            end = self.next_id(channel)
            result[channel] = {
                sub.name: max(end - sub.next_id, 0) for sub in self.list_subscriptions(channel)
            }
        return result

    def disk_usage(self) -> int:
        return int(self._db.property_int_value("rocksdb.total-sst-files-size") or 0)

    # --- read-only mode -----------------------------------------------------------------
    def catch_up(self) -> None:
        """Pick up what the writing process has written since (read-only stores).

        The writer's flushes and compactions delete table files; a catch-up that meets a
        file deleted under it fails, and the next one reads the newer file list, so it is
        tried again (a few times) before its error is raised."""
        if not self.read_only or self._closed:
            return
        for attempt in range(_CATCH_UP_TRIES):
            try:
                with self._lock:
                    self._db.try_catch_up_with_primary()
                    self._load()
                break
            except Exception as exc:
                if attempt == _CATCH_UP_TRIES - 1:
                    raise store_error(self.path, exc, "following the writing process") from exc
        self._caught_up_at = time.monotonic()

    async def wait_for_append(self, channel: str, next_id: int) -> None:
        if not self.read_only:
            await super().wait_for_append(channel, next_id)
            return
        # Another process writes: there is no in-process signal, so look periodically.
        # The consumers of every channel wait here; the store catches up at most once a
        # poll interval for all of them (each catch-up reads the writer's manifest and log).
        interval = self.options.poll_interval_s
        while not self._closed:
            if time.monotonic() - self._caught_up_at >= interval:
                self.catch_up()
            if self.next_id(channel) > next_id or channel not in self._cids:
                return
            await asyncio.sleep(interval)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(Exception):
            self._db.close()
        if self._secondary_dir is not None:
            self._secondary_dir.cleanup()
        for channel in list(self._events):
            self.notify(channel)


def _log_expired(what: str, sub: StoredSubscription, channel: str, now: int) -> None:
    log.warning(
        "rocksmq: %s %r on channel %r idle for %d ms; expired",
        what,
        sub.name,
        channel,
        now - sub.last_active_ms,
        extra=fields("rocksmq", channel, sub.name),
    )


def page_key(cid: int, first_id: int) -> bytes:
    return _CID_PREFIX.pack(b"P", cid) + first_id.to_bytes(8, "big", signed=True)


def _wal_bytes(path: str) -> int:
    try:
        with os.scandir(path) as entries:
            return sum(e.stat().st_size for e in entries if e.name.endswith(".log"))
    except OSError:
        return 0


def _free_bytes(path: str) -> int:
    try:
        stats = os.statvfs(path)
    except OSError:
        return 0
    return stats.f_bavail * stats.f_frsize
