"""Hybrid timestamps (TSO): ``physical_ms << 18 | logical``."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

ClockMs = Callable[[], int]

LOGICAL_BITS = 18
LOGICAL_MASK = (1 << LOGICAL_BITS) - 1
MAX_TIMESTAMP = (1 << 64) - 1


def compose_ts(physical_ms: int, logical: int = 0) -> int:
    """Build a hybrid timestamp from wall-clock milliseconds and a logical counter."""
    if physical_ms < 0:
        raise ValueError(f"physical_ms must be >= 0, got {physical_ms}")
    if not 0 <= logical <= LOGICAL_MASK:
        raise ValueError(f"logical must be in [0, {LOGICAL_MASK}], got {logical}")
    ts = (physical_ms << LOGICAL_BITS) | logical
    if ts > MAX_TIMESTAMP:
        raise ValueError(f"physical_ms {physical_ms} does not fit in a 64-bit timestamp")
    return ts


def parse_ts(ts: int) -> tuple[int, int]:
    """Split a hybrid timestamp into ``(physical_ms, logical)``."""
    if not 0 <= ts <= MAX_TIMESTAMP:
        raise ValueError(f"timestamp must be an unsigned 64-bit integer, got {ts}")
    return ts >> LOGICAL_BITS, ts & LOGICAL_MASK


def physical_now_ms() -> int:
    return time.time_ns() // 1_000_000


class TsoAllocator:
    """Hands out strictly increasing hybrid timestamps within one process.

    The physical part follows the wall clock; when the clock stands still or steps back,
    the logical part counts up, and when that overflows the physical part is advanced by
    one millisecond, so the sequence never repeats or decreases. Thread-safe.
    """

    def __init__(self, clock_ms: ClockMs | None = None) -> None:
        self._clock = clock_ms or physical_now_ms
        self._last = 0
        self._lock = threading.Lock()

    @property
    def last(self) -> int:
        """The last timestamp handed out (0 before the first)."""
        return self._last

    def allocate(self, count: int = 1) -> int:
        """Reserve ``count`` consecutive timestamps and return the first of them."""
        if count < 1:
            raise ValueError(f"count must be >= 1, got {count}")
        with self._lock:
            first = max(compose_ts(self._clock()), self._last + 1)
            self._last = first + count - 1
            return first
