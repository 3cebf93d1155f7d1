"""The least a time-tick reader of embedded channels does: the floor of the TtMsgStream figure.

:func:`tt_floor` reads a store that ``bench_rocksmq.fill_channels`` filled (every channel
holds, per tick, ``per_tick`` data messages and then the tick) and hands out what a
time-tick stream hands out: for each tick, one pack of every channel's data up to it,
merged by timestamp, ticks left out. For each pack it does what the stream's contract
(docs/DESIGN.md, the time-tick barrier) asks of any reader, in the cheapest form:

- reads the next ``per_tick + 1`` messages of each channel from a RocksDB iterator
  bounded to that channel (the stream reads its channels side by side, too), and checks
  their bytes against a stream's default buffer bound (a reader's buffer is bounded in
  bytes);
- checks every checksum and reads every envelope in C-level passes over the run, as the
  stream's decoder does (``msgstream.wire.codec.decode_batch``);
- checks that no data message is late (at or below its channel's last tick) and that no
  msg_id repeats within the pack, each in one C-level pass;
- makes one object a data message (its header and its payload);
- merges the channels' runs by timestamp with a stable sort, as the barrier does;
- keeps the pack until the next one is made, as a consumer keeps the pack it works on.

It knows the store's key layout and where the ticks fall, so it plans nothing, holds
nothing back and handles no late or repeated message (it stops at one): no reader of
this format and contract does less. A pack held while the next is built keeps a few
thousand objects alive across the garbage collector's young collections, which promote
them; ``collector=False`` measures the same with the collector off, to show its share.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Generator
from itertools import chain, islice, repeat
from operator import getitem
from typing import Any

import numpy as np
from rocksdict import AccessType, Options, Rdict, ReadOptions

from msgstream.configuration.config import STREAM_DEFAULTS
from msgstream.wire import checksum, envelope

_BUFFER_BYTES = STREAM_DEFAULTS.receive_buffer_bytes
_MESSAGES = b"M"
"""The first byte of a message's key: ``M``, the channel's 4-byte id, the message's id."""
_HEAD = slice(0, envelope.CRC_OFFSET)
_TAIL = slice(envelope.CRC_OFFSET + 4, None)
_ENVELOPE = slice(0, envelope.SIZE)


class _Message:
    """The least a reader makes of a message: its header and its payload."""

    __slots__ = ("msg_id", "payload", "source_id", "timestamp")
    msg_id: int
    payload: bytes
    source_id: int
    timestamp: int


_new = object.__new__


def _channels(db: Rdict) -> list[tuple[bytes, ReadOptions]]:
    """Each channel's first key and read options that end an iterator at its last."""
    found: list[tuple[bytes, ReadOptions]] = []
    at = _MESSAGES
    while True:
        key: Any = next(iter(db.keys(from_key=at)), None)
        if key is None or key[:1] != _MESSAGES:
            return found
        after = _MESSAGES + (int.from_bytes(key[1:5], "big") + 1).to_bytes(4, "big")
        bounds = ReadOptions()
        bounds.set_iterate_upper_bound(after)
        found.append((key, bounds))
        at = after


def _run(values: list[bytes], last_tick: int, ids: list[int], stamps: list[int],
         made: list[_Message]) -> int:  # fmt: skip
    """Check one channel's run of payloads (its data, then its tick) and make its data's
    messages (into ``made``; their msg_ids and timestamps into ``ids`` and ``stamps``).
    Returns the run's tick."""
    count = len(values)
    crc32 = checksum.crc32
    heads: Any = map(getitem, values, repeat(_HEAD))
    tails: Any = map(getitem, values, repeat(_TAIL))
    sums = np.fromiter(map(crc32, tails, map(crc32, heads)), np.uint32, count)
    envelopes: Any = map(getitem, values, repeat(_ENVELOPE))
    env = np.frombuffer(b"".join(envelopes), envelope.DTYPE)
    if not bool((sums == env["crc"]).all()):
        raise ValueError("a checksum does not match")
    times = env["timestamp"].tolist()
    tick = times.pop()
    if times and min(times) <= last_tick:
        raise ValueError("a late message")
    msg_ids = env["msg_id"].tolist()
    del msg_ids[-1]
    add = made.append
    for msg_id, stamp, source, payload in zip(
        msg_ids, times, env["source_id"].tolist(), values, strict=False
    ):
        msg = _new(_Message)
        msg.msg_id = msg_id
        msg.timestamp = stamp
        msg.source_id = source
        msg.payload = payload
        add(msg)
    ids += msg_ids
    stamps += times
    return int(tick)


def floor_packs(db: Rdict, per_tick: int) -> Generator[list[_Message], None, None]:
    """The packs of the store ``db`` (see the module doc)."""
    channels = _channels(db)  # kept while the iterators are: RocksDB points to the bounds
    iterators = [db.items(from_key=first, read_opt=bounds) for first, bounds in channels]
    ticks = [0] * len(iterators)
    while True:
        ids: list[int] = []
        stamps: list[int] = []
        made: list[_Message] = []
        for at, items in enumerate(iterators):
            flat = list(chain.from_iterable(islice(items, per_tick + 1)))
            if flat:
                values = flat[1::2]
                if sum(map(len, values)) > _BUFFER_BYTES:
                    raise ValueError("a channel's run is over its buffer's byte bound")
                ticks[at] = _run(values, ticks[at], ids, stamps, made)
        if not made:
            return
        if len(set(ids)) != len(ids):
            raise ValueError("a msg_id repeats")
        order = sorted(range(len(stamps)), key=stamps.__getitem__)
        yield list(map(made.__getitem__, order))


def tt_floor(path: str, per_tick: int, expected: int, *, collector: bool = True) -> float:
    """Messages per second in the packs of :func:`floor_packs` from the store at
    ``path`` (data messages, as a time-tick stream's rate counts them), each pack kept
    until the next is made; 0.0 if fewer than ``expected`` came."""
    db = Rdict(path, Options(raw_mode=True), access_type=AccessType.read_only())
    packs = floor_packs(db, per_tick)
    was_on = gc.isenabled()
    seen = 0
    try:
        if not collector:
            gc.disable()
        start = time.perf_counter()
        for pack in packs:
            seen += len(pack)
        elapsed = time.perf_counter() - start
    finally:
        if was_on:
            gc.enable()
        packs.close()  # drops the iterators before their store
        db.close()
    return seen / elapsed if seen >= expected else 0.0
