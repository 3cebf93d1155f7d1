"""Hybrid timestamps: compose/parse and the TsoAllocator."""

from __future__ import annotations

import itertools
import re
import sys
import threading
import time
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from msgstream.wire.tso import (
    LOGICAL_BITS,
    LOGICAL_MASK,
    MAX_TIMESTAMP,
    TsoAllocator,
    compose_ts,
    parse_ts,
    physical_now_ms,
)

MAX_PHYSICAL = (1 << (64 - 18)) - 1
physicals = st.integers(min_value=0, max_value=MAX_PHYSICAL)
logicals = st.integers(min_value=0, max_value=(1 << 18) - 1)


class ScriptedClock:
    """A clock that returns the given readings, then keeps returning the last one."""

    def __init__(self, *readings: int) -> None:
        self.readings = list(readings)
        self.calls = 0

    def __call__(self) -> int:
        self.calls += 1
        if len(self.readings) > 1:
            return self.readings.pop(0)
        return self.readings[0]


# --------------------------------------------------------------------------- compose / parse


def test_layout_has_18_logical_bits() -> None:
    assert LOGICAL_BITS == 18
    assert LOGICAL_MASK == 262_143
    assert MAX_TIMESTAMP == 2**64 - 1
    assert compose_ts(1, 0) == 262_144
    assert compose_ts(0, 1) == 1
    assert compose_ts(0, LOGICAL_MASK) == 262_143
    assert compose_ts(5, 7) == 5 * 262_144 + 7
    assert compose_ts(1_700_000_000_000, 3) == (1_700_000_000_000 << 18) | 3
    assert compose_ts(42) == 42 << 18  # logical defaults to 0
    assert parse_ts(262_144) == (1, 0)
    assert parse_ts(262_143) == (0, 262_143)
    assert parse_ts((1_700_000_000_000 << 18) | 99) == (1_700_000_000_000, 99)


def test_extremes() -> None:
    assert compose_ts(0, 0) == 0
    assert parse_ts(0) == (0, 0)
    assert compose_ts(MAX_PHYSICAL, LOGICAL_MASK) == MAX_TIMESTAMP
    assert parse_ts(MAX_TIMESTAMP) == (MAX_PHYSICAL, LOGICAL_MASK)


@given(physicals, logicals)
def test_compose_parse_round_trip(physical: int, logical: int) -> None:
    ts = compose_ts(physical, logical)
    assert isinstance(ts, int)
    assert 0 <= ts <= MAX_TIMESTAMP
    assert ts == physical * 2**18 + logical
    parsed = parse_ts(ts)
    assert parsed == (physical, logical)
    assert type(parsed) is tuple


@given(st.integers(min_value=0, max_value=MAX_TIMESTAMP))
def test_parse_compose_round_trip(ts: int) -> None:
    physical, logical = parse_ts(ts)
    assert 0 <= logical <= LOGICAL_MASK
    assert compose_ts(physical, logical) == ts


@given(physicals, logicals, physicals, logicals)
def test_order_is_lexicographic(p1: int, l1: int, p2: int, l2: int) -> None:
    a, b = compose_ts(p1, l1), compose_ts(p2, l2)
    assert (a < b) == ((p1, l1) < (p2, l2))
    assert (a == b) == ((p1, l1) == (p2, l2))


@pytest.mark.parametrize(
    ("physical", "logical", "needle"),
    [
        (-1, 0, "physical_ms must be >= 0, got -1"),
        (0, -1, "logical must be in [0, 262143], got -1"),
        (0, 1 << 18, "logical must be in [0, 262143], got 262144"),
        (5, 10**9, "got 1000000000"),
        (MAX_PHYSICAL + 1, 0, f"physical_ms {MAX_PHYSICAL + 1} does not fit"),
        (2**64, 0, "does not fit in a 64-bit timestamp"),
    ],
)
def test_compose_bounds(physical: int, logical: int, needle: str) -> None:
    with pytest.raises(ValueError, match=re.escape(needle)):
        compose_ts(physical, logical)


@pytest.mark.parametrize("ts", [-1, 2**64, 2**70, -(2**63)])
def test_parse_bounds(ts: int) -> None:
    with pytest.raises(ValueError, match="unsigned 64-bit") as info:
        parse_ts(ts)
    assert str(ts) in str(info.value)


def test_physical_now_is_wall_clock_ms() -> None:
    before = int(time.time() * 1000)
    now = physical_now_ms()
    after = int(time.time() * 1000)
    assert isinstance(now, int)
    assert before - 1 <= now <= after + 1


# --------------------------------------------------------------------------- allocator


def test_allocator_follows_an_advancing_clock() -> None:
    clock = ScriptedClock(1000, 1001, 5000)
    tso = TsoAllocator(clock_ms=clock)
    assert tso.last == 0
    assert tso.allocate() == compose_ts(1000, 0)
    assert tso.last == compose_ts(1000, 0)
    assert tso.allocate() == compose_ts(1001, 0)
    assert tso.allocate() == compose_ts(5000, 0)
    assert tso.last == compose_ts(5000, 0)
    assert clock.calls == 3


def test_allocator_counts_logical_when_clock_stands_still() -> None:
    tso = TsoAllocator(clock_ms=lambda: 1000)
    got = [tso.allocate() for _ in range(100)]
    assert got == [compose_ts(1000, i) for i in range(100)]
    assert [parse_ts(t) for t in got[:3]] == [(1000, 0), (1000, 1), (1000, 2)]


def test_allocator_never_goes_back_with_the_clock() -> None:
    clock = ScriptedClock(1000, 1000, 400, 999, 0, 1000, 1002)
    tso = TsoAllocator(clock_ms=clock)
    got = [tso.allocate() for _ in range(7)]
    assert got == [
        compose_ts(1000, 0),
        compose_ts(1000, 1),
        compose_ts(1000, 2),  # clock stepped back to 400: logical keeps counting
        compose_ts(1000, 3),
        compose_ts(1000, 4),
        compose_ts(1000, 5),
        compose_ts(1002, 0),  # the clock caught up again
    ]
    assert all(a < b for a, b in itertools.pairwise(got))


def test_allocator_logical_overflow_moves_to_next_millisecond() -> None:
    tso = TsoAllocator(clock_ms=lambda: 1000)
    first = tso.allocate(LOGICAL_MASK)  # logical 0 .. LOGICAL_MASK - 1
    assert first == compose_ts(1000, 0)
    assert tso.allocate() == compose_ts(1000, LOGICAL_MASK)
    overflow = tso.allocate()
    assert parse_ts(overflow) == (1001, 0)
    assert parse_ts(tso.allocate()) == (1001, 1)


def test_allocate_count_reserves_a_block() -> None:
    tso = TsoAllocator(clock_ms=lambda: 2000)
    first = tso.allocate(5)
    assert first == compose_ts(2000, 0)
    assert tso.last == first + 4
    assert tso.allocate() == first + 5
    second = tso.allocate(3)
    assert second == first + 6
    assert tso.last == first + 8
    # a block never overlaps a later allocation even when the clock jumps
    tso2 = TsoAllocator(clock_ms=ScriptedClock(10, 10, 11))
    block = tso2.allocate(LOGICAL_MASK + 10)  # spills into millisecond 11
    assert block == compose_ts(10, 0)
    nxt = tso2.allocate()
    assert nxt == block + LOGICAL_MASK + 10
    assert parse_ts(nxt) == (11, 9)


@pytest.mark.parametrize("count", [0, -1, -100])
def test_allocate_count_must_be_positive(count: int) -> None:
    tso = TsoAllocator(clock_ms=lambda: 1)
    with pytest.raises(ValueError, match=rf"count must be >= 1, got {count}"):
        tso.allocate(count)
    assert tso.last == 0  # nothing was reserved


def test_allocator_default_clock_is_wall_clock() -> None:
    before = physical_now_ms()
    ts = TsoAllocator().allocate()
    after = physical_now_ms()
    physical, logical = parse_ts(ts)
    assert before <= physical <= after
    assert logical == 0


@pytest.fixture
def fast_switching() -> Iterator[None]:
    """Switch threads as often as possible, so an unlocked race would show."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(old)


@pytest.mark.usefixtures("fast_switching")
def test_allocator_is_thread_safe() -> None:
    tso = TsoAllocator(clock_ms=lambda: 7000)
    threads_n, per_thread = 8, 2000
    results: list[list[int]] = [[] for _ in range(threads_n)]
    barrier = threading.Barrier(threads_n)

    def work(out: list[int]) -> None:
        barrier.wait()
        for _ in range(per_thread):
            out.append(tso.allocate())

    threads = [threading.Thread(target=work, args=(r,)) for r in results]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    everything = [ts for r in results for ts in r]
    total = threads_n * per_thread
    assert len(everything) == total
    assert len(set(everything)) == total
    # a constant clock: the timestamps are exactly one dense block, no gaps, no repeats
    start = compose_ts(7000, 0)
    assert set(everything) == set(range(start, start + total))
    assert tso.last == start + total - 1
    for r in results:  # each thread saw its own sequence strictly increase
        assert all(a < b for a, b in itertools.pairwise(r))


@pytest.mark.usefixtures("fast_switching")
def test_allocator_blocks_are_disjoint_across_threads() -> None:
    clock_value = [100]

    def clock() -> int:
        clock_value[0] ^= 1  # wobbles back and forth between 100 and 101
        return clock_value[0]

    tso = TsoAllocator(clock_ms=clock)
    blocks: list[tuple[int, int]] = []
    lock = threading.Lock()

    def work(count: int) -> None:
        for _ in range(300):
            first = tso.allocate(count)
            with lock:
                blocks.append((first, count))

    threads = [threading.Thread(target=work, args=(c,)) for c in (1, 2, 3, 5, 8, 13)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    covered = [first + i for first, count in blocks for i in range(count)]
    assert len(covered) == 300 * (1 + 2 + 3 + 5 + 8 + 13)
    assert len(set(covered)) == len(covered)
    assert max(covered) == tso.last
