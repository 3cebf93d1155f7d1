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

A send is one WriteBatch (ids allocated under a lock), acknowledged once RocksDB has
written it to the WAL (fsynced too with ``sync=True``). Messages are grouped into pages
for retention; the open page of a channel is rebuilt from its messages on open.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import struct
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import chain, repeat
from operator import getitem
from types import MappingProxyType
from typing import cast

import orjson
from rocksdict import AccessType, Options, Rdict, ReadOptions, WriteBatch, WriteOptions

from msgstream.errors import StreamClosedError, TopicNotFound

from ..local.store import (
    FIRST_ID,
    LogStore,
    Properties,
    Record,
    StoredBatch,
    StoredSubscription,
    now_ms,
)
from .retention import Page, RetentionPolicy, expired_pages

log = logging.getLogger(__name__)

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


def _encode_props(payload: bytes, properties: Properties) -> bytes:
    props = orjson.dumps(dict(properties))
    return _U32.pack(len(props)) + props + payload


def _decode_props(value: bytes) -> tuple[bytes, Properties]:
    (size,) = _U32.unpack_from(value)
    return value[4 + size :], orjson.loads(value[4 : 4 + size])


@dataclass(slots=True)
class _OpenPage:
    first_id: int
    size: int = 0


@dataclass(frozen=True, slots=True)
class RocksOptions:
    sync: bool = False
    page_size: int = 64 * 1024 * 1024
    retention: RetentionPolicy = field(default_factory=lambda: RetentionPolicy(-1, -1))
    subscription_idle_expiry_ms: int = -1
    read_only: bool = False
    poll_interval_s: float = 0.05
    """How often a read-only store looks for the writer's new messages."""


class RocksStore(LogStore):
    backend_name = "rocksmq"

    def __init__(self, path: str, options: RocksOptions | None = None) -> None:
        super().__init__()
        self.path = path
        self.options = options or RocksOptions()
        self.read_only = self.options.read_only
        self._lock = threading.RLock()
        self._secondary_dir: tempfile.TemporaryDirectory[str] | None = None
        db_options = Options(raw_mode=True)
        if self.read_only:
            # rocksdict creates a missing directory even for a secondary: check first.
            if not os.path.isfile(os.path.join(path, "CURRENT")):
                raise FileNotFoundError(f"no rocksmq store at {path!r}")
            self._secondary_dir = tempfile.TemporaryDirectory(prefix="msgstream-secondary-")
            db_options.set_max_open_files(-1)
            access = AccessType.secondary(self._secondary_dir.name)
            self._db = Rdict(path, db_options, access_type=access)
        else:
            db_options.create_if_missing(True)
            self._db = Rdict(path, db_options)
        self._write_options = WriteOptions()
        self._write_options.sync = self.options.sync
        self._closed = False
        self._open_consumers: dict[tuple[str, str], int] = {}
        self._volatile_subs: dict[tuple[str, str], StoredSubscription] = {}
        self._load()

    # --- loading ----------------------------------------------------------------------
    def _load(self) -> None:
        """(Re)build the in-memory indexes: channels, next ids and open pages."""
        self._cids: dict[str, int] = {}
        self._next: dict[int, int] = {}
        self._open_pages: dict[int, _OpenPage] = {}
        for key, value in self._scan(b"C"):
            cid, _ = _CHANNEL.unpack(value)
            self._cids[key[1:].decode()] = cid
        raw_next = self._db.get(b"N")
        self._next_cid = _U32.unpack(raw_next)[0] if raw_next else 1
        for cid in self._cids.values():
            self._next[cid] = self._find_next_id(cid)
            if self.read_only:
                continue  # no appends nor retention: skip the scan of the open page
            pages = self._pages(cid)
            page = _OpenPage(pages[-1].last_id + 1 if pages else self._deleted_below(cid))
            for _, value in self._scan(_CID_PREFIX.pack(b"M", cid), _msg_key(cid, page.first_id)):
                page.size += len(value)
            self._open_pages[cid] = page

    def _find_next_id(self, cid: int) -> int:
        it = self._db.iter()
        it.seek_for_prev(_msg_key(cid, _MAX_ID))
        if it.valid() and it.key()[:5] == _CID_PREFIX.pack(b"M", cid):
            return int.from_bytes(it.key()[5:13], "big", signed=True) + 1
        pages = self._pages(cid)
        return pages[-1].last_id + 1 if pages else self._deleted_below(cid)

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

    def _cid(self, channel: str) -> int:
        try:
            return self._cids[channel]
        except KeyError:
            raise TopicNotFound(channel, self.backend_name) from None

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
            self._db.write(batch, self._write_options)
            self._next_cid = cid + 1
            self._cids[channel] = cid
            self._next[cid] = FIRST_ID
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
            for tag in (b"M", b"P", b"S", b"L"):
                batch.delete_range(_CID_PREFIX.pack(tag, cid), _CID_PREFIX.pack(tag, cid + 1))
            self._db.write(batch, self._write_options)
            self._next.pop(cid, None)
            self._open_pages.pop(cid, None)

    # --- records ----------------------------------------------------------------------
    def append(self, channel: str, payloads: Sequence[bytes], properties: Properties) -> list[int]:
        self._check_open()
        with self._lock:
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
            if count == 1 and not closing:  # one put is atomic too, and cheaper than a batch
                self._db.put(_MSG_KEY.pack(b"M", cid, first, flag), values[0], self._write_options)
            else:
                # Keys are built by a C-level map(); the loop only calls put().
                ids = range(first, last + 1)
                keys = map(_MSG_KEY.pack, repeat(b"M"), repeat(cid), ids, repeat(flag))
                batch = WriteBatch(raw_mode=True)
                put = batch.put
                for key, value in zip(keys, values, strict=True):
                    put(key, value)
                if closing:
                    batch.put(
                        page_key(cid, page.first_id), _PAGE.pack(last, page.size + size, now_ms())
                    )
                self._db.write(batch, self._write_options)
            self._next[cid] = last + 1
            if closing:
                self._open_pages[cid] = _OpenPage(last + 1)
            else:
                page.size += size
            return list(range(first, last + 1))

    def _flat_items(self, channel: str, from_id: int, limit: int) -> list[bytes]:
        """Up to ``limit`` messages of ``channel`` from ``from_id`` on, as one flat list
        ``[key, value, key, value, ...]``: each (key, value) pair the iterator makes is
        dropped as soon as it is read, and no Python code runs per message."""
        self._check_open()
        cid = self._cid(channel)
        start = max(from_id, 0)
        if start >= self._next.get(cid, FIRST_ID):
            return []
        # ``bounds`` must outlive the iteration: RocksDB keeps a pointer to the bound.
        bounds = ReadOptions()
        bounds.set_iterate_upper_bound(_CID_PREFIX.pack(b"M", cid + 1))
        items = self._db.items(from_key=_msg_key(cid, start), read_opt=bounds)
        pairs = cast(Iterator[tuple[bytes, bytes]], items)
        flat = list(chain.from_iterable(itertools.islice(pairs, limit)))
        del items, pairs, bounds
        return flat

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
        self._db.put(self._sub_key(cid, name), _SUB.pack(next_id, now_ms()), self._write_options)

    def list_subscriptions(self, channel: str) -> list[StoredSubscription]:
        cid = self._cid(channel)
        subs = []
        for key, value in self._scan(_CID_PREFIX.pack(b"S", cid)):
            next_id, active = _SUB.unpack(value)
            subs.append(StoredSubscription(key[5:].decode(), next_id, active))
        return subs

    def delete_subscription(self, channel: str, name: str) -> None:
        self._check_open()
        cid = self._cids.get(channel)
        if cid is not None:
            self._db.delete(self._sub_key(cid, name), self._write_options)

    # --- open consumers pin their subscriptions against idle expiry -------------------------
    def consumer_opened(self, channel: str, name: str) -> None:
        key = (channel, name)
        self._open_consumers[key] = self._open_consumers.get(key, 0) + 1

    def consumer_closed(self, channel: str, name: str) -> None:
        key = (channel, name)
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
                self._db.write(batch, self._write_options)
                deleted += doomed[-1].last_id + 1 - doomed[0].first_id
                log.info(
                    "rocksmq retention: channel %r deleted ids %d..%d (%d pages)",
                    channel,
                    doomed[0].first_id,
                    doomed[-1].last_id,
                    len(doomed),
                )
        return deleted

    def _live_subscriptions(self, channel: str, cid: int, now: int) -> list[StoredSubscription]:
        expiry = self.options.subscription_idle_expiry_ms
        live = []
        for sub in self.list_subscriptions(channel):
            pinned = (channel, sub.name) in self._open_consumers
            if expiry >= 0 and not pinned and now - sub.last_active_ms > expiry:
                self._db.delete(self._sub_key(cid, sub.name), self._write_options)
                log.warning(
                    "rocksmq: subscription %r on channel %r idle for %d ms; expired",
                    sub.name,
                    channel,
                    now - sub.last_active_ms,
                )
                continue
            live.append(sub)
        return live

    def _close_open_page(self, cid: int, now: int) -> None:
        page = self._open_pages[cid]
        last = self._next[cid] - 1
        if last < page.first_id:
            return
        self._db.put(
            page_key(cid, page.first_id), _PAGE.pack(last, page.size, now), self._write_options
        )
        self._open_pages[cid] = _OpenPage(last + 1)

    def compact(self) -> None:
        """Reclaim the disk space of deleted ranges."""
        self._check_open()
        if not self.read_only:
            self._db.compact_range(None, None)

    def disk_usage(self) -> int:
        return int(self._db.property_int_value("rocksdb.total-sst-files-size") or 0)

    # --- read-only mode -----------------------------------------------------------------
    def catch_up(self) -> None:
        """Pick up what the writing process has written since (read-only stores)."""
        if self.read_only and not self._closed:
            self._db.try_catch_up_with_primary()
            self._load()

    async def wait_for_append(self, channel: str, next_id: int) -> None:
        if not self.read_only:
            await super().wait_for_append(channel, next_id)
            return
        # Another process writes: there is no in-process signal, so look periodically.
        while not self._closed:
            self.catch_up()
            if self.next_id(channel) > next_id or channel not in self._cids:
                return
            await asyncio.sleep(self.options.poll_interval_s)

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


def page_key(cid: int, first_id: int) -> bytes:
    return _CID_PREFIX.pack(b"P", cid) + first_id.to_bytes(8, "big", signed=True)
