"""Telling a torn last write from damage in the last block of a RocksDB write-ahead log.

RocksDB's ``tolerate_corrupted_tail_records`` recovery (what rocksmq opens with) refuses a
damaged record anywhere in a log except in its last 32 KiB block: there, a bad record is
taken for the write a crash interrupted, and it and everything after it are dropped
without a word. That is right for a torn write (nothing sound can follow it) and wrong for
damage with sound, acknowledged records after it. This module reads the last block of a
log the way RocksDB's log reader does and says which of the two it is: a bad record
followed by a record whose checksum holds is damage.

Format (RocksDB ``db/log_format.h``): 32 KiB blocks of records; a record header is a
masked CRC32C (4 bytes, over the type byte and the payload), the payload length (2 bytes,
little-endian) and the type (1 byte); "recyclable" types carry a 4-byte log number after
the type, inside the checksum. Fewer than a header's bytes at a block's end are zeros.
"""

from __future__ import annotations

import os
import struct

import google_crc32c

BLOCK = 32 * 1024
_HEADER = struct.Struct("<IHB")
_LEGACY_HEADER = 7
_RECYCLABLE_HEADER = 11
_RECYCLABLE_TYPES = frozenset({5, 6, 7, 8, 11})
_MAX_TYPE = 127
"""Types RocksDB has defined fit in 7 bits; 0 is preallocated (zeroed) space."""
_MASK_DELTA = 0xA282EAD8


def _unmask(masked: int) -> int:
    rotated = (masked - _MASK_DELTA) & 0xFFFFFFFF
    return ((rotated >> 17) | (rotated << 15)) & 0xFFFFFFFF


def _record_end(block: bytes, at: int) -> int | None:
    """Where the record at ``at`` ends, if a whole record with a sound checksum is there."""
    if at + _LEGACY_HEADER > len(block):
        return None
    masked, length, kind = _HEADER.unpack_from(block, at)
    if not 0 < kind <= _MAX_TYPE:
        return None
    header = _RECYCLABLE_HEADER if kind in _RECYCLABLE_TYPES else _LEGACY_HEADER
    end = at + header + length
    if end > len(block):
        return None
    checksum = google_crc32c.value(block[at + 6 : at + 7] + block[at + _LEGACY_HEADER : end])
    return end if checksum == _unmask(masked) else None


def _is_padding(block: bytes, at: int) -> bool:
    """Zeros from ``at`` to the end: preallocated space or a block trailer."""
    return not block[at:].strip(b"\0")


def damaged_tail(log_file: str) -> str | None:
    """A description of damage in the last block of ``log_file`` that RocksDB would read
    as a torn write, or None when the block is sound or ends in a torn write only."""
    size = os.path.getsize(log_file)
    start = max(size - 1, 0) // BLOCK * BLOCK
    with open(log_file, "rb") as handle:
        handle.seek(start)
        block = handle.read(BLOCK)
    at = 0
    while at < len(block) and not _is_padding(block, at):
        end = _record_end(block, at)
        if end is None:
            break
        at = end
    else:
        return None
    sound = [p for p in range(at + 1, len(block) - _LEGACY_HEADER + 1) if _record_end(block, p)]
    if not sound:
        return None  # a torn last write: nothing sound follows it
    return (
        f"{os.path.basename(log_file)}: the record at offset {start + at} is damaged and "
        f"{len(sound)} sound record(s) follow it (from offset {start + sound[0]}); RocksDB "
        "would drop them as a torn last write"
    )


def damaged_tails(store: str) -> list[str]:
    """:func:`damaged_tail` of every write-ahead log of the store at ``store``."""
    try:
        names = sorted(n for n in os.listdir(store) if n.endswith(".log"))
    except OSError:
        return []
    found = []
    for name in names:
        problem = damaged_tail(os.path.join(store, name))
        if problem is not None:
            found.append(problem)
    return found
