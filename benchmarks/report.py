"""What every benchmark prints: figure rows beside their baseline, and the machine."""

from __future__ import annotations

import gc
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from msgstream import DeleteMsg, MsgPack, MsgStream, TsMsg, encode, new_client
from msgstream.bench.recorder import Recorder
from msgstream.bench.report import describe_machine
from msgstream.bench.report import machine as bench_machine


@dataclass
class Row:
    figure: str
    ours: float
    baseline: float | None
    unit: str
    goal: str
    id: str = ""
    """A stable name for the figure in ``--json`` output (the Spark benchmark's)."""

    @property
    def ratio(self) -> float | None:
        return None if self.baseline in (None, 0) else self.ours / self.baseline


def latency_us(recorder: Recorder, q: float) -> float:
    """The ``q`` quantile (0.5, 0.99...) of a harness recorder's latencies, in µs."""
    return recorder.stats().ms(q * 100) * 1000


def new_recorder() -> Recorder:
    """A ``msgstream bench`` recorder (an HDR histogram) for a benchmark's samples."""
    return Recorder()


def machine() -> str:
    return describe_machine(bench_machine())


def print_table(rows: list[Row], json_path: str | None = None, **extra: str) -> None:
    print(f"machine: {machine()}")
    for key, value in extra.items():
        print(f"{key}: {value}")
    print(f"{'figure':44} {'ours':>12} {'baseline':>12} {'ratio':>7}  unit    goal")
    for row in rows:
        base = "-" if row.baseline is None else f"{row.baseline:,.1f}"
        ratio = "-" if row.ratio is None else f"{row.ratio:.2f}x"
        print(f"{row.figure:44} {row.ours:>12,.1f} {base:>12} {ratio:>7}  {row.unit:7} {row.goal}")
    if json_path:
        document = {"machine": machine(), **extra, "rows": [r.__dict__ for r in rows]}
        with open(json_path, "wb") as out:
            out.write(orjson.dumps(document))


def timed(label: str, fn: Callable[[], Any]) -> Any:
    """Run ``fn`` after a collection, reporting its wall time on stderr."""
    gc.collect()
    start = time.perf_counter()
    result = fn()
    print(f"  {label}: {time.perf_counter() - start:.1f}s", file=sys.stderr)
    return result


def alternating_rounds(
    rounds: int, raw: Callable[[], float], ours: Callable[[], float]
) -> tuple[list[float], list[float]]:
    """Run the raw baseline and ours in alternation, so machine noise hits both alike.

    Which side goes first alternates too: a broker still busy with the previous round's
    work (closing a producer, flushing, compacting) would otherwise always slow one side.
    """
    raw_figures: list[float] = []
    our_figures: list[float] = []
    for round_index in range(rounds):
        if round_index % 2:
            our_figures.append(ours())
            raw_figures.append(raw())
        else:
            raw_figures.append(raw())
            our_figures.append(ours())
    return raw_figures, our_figures


def broker_produce_rows(
    raw_latency: Recorder,
    our_latency: Recorder,
    raw_rates: list[float],
    our_rates: list[float],
) -> list[Row]:
    """The broker issues' three figures: latency p50/p99 and pipelined throughput."""
    return [
        Row(
            "MsgStream.produce latency p50",
            latency_us(our_latency, 0.5),
            latency_us(raw_latency, 0.5),
            "us",
            "<= 1.10x raw",
        ),
        Row(
            "MsgStream.produce latency p99",
            latency_us(our_latency, 0.99),
            latency_us(raw_latency, 0.99),
            "us",
            "<= 1.25x raw",
        ),
        Row(
            "pipelined produce, ~100 B msgs",
            statistics.median(our_rates),
            statistics.median(raw_rates),
            "msgs/s",
            ">= 0.9x raw",
        ),
    ]


async def interleaved_latency(
    count: int,
    message: Callable[[int], TsMsg],
    raw: Callable[[bytes], Awaitable[object]],
    ours: Callable[[MsgPack], Awaitable[object]],
    warm_up: int = 200,
) -> tuple[Recorder, Recorder]:
    """The latency of each call of ``raw(encode(message(i)))`` and
    ``ours(MsgPack.of(message(i)))``, sample by sample interleaved, in the harness's
    recorders (HDR histograms, as ``msgstream bench`` keeps them).

    Each input is built right before its timed call, untimed, as an application builds a
    message and then sends it; inputs built long in advance would also time the cache
    misses of fetching them back. Which side goes first alternates: work a producer does
    after its acknowledgement would otherwise always land in the other side's
    measurement. The garbage collector is off while measuring, for both alike.
    """
    for i in range(warm_up):  # connections, metadata, the broker's ledgers
        await raw(encode(message(i)))
        await ours(MsgPack.of(message(i)))
    raw_rec, ours_rec = new_recorder(), new_recorder()
    clock = time.perf_counter_ns
    gc.disable()
    try:
        for i in range(count):
            for raw_side in (False, True) if i % 2 else (True, False):
                if raw_side:
                    payload = encode(message(i))
                    start = clock()
                    await raw(payload)
                    raw_rec.record(clock() - start)
                else:
                    pack = MsgPack.of(message(i))
                    start = clock()
                    await ours(pack)
                    ours_rec.record(clock() - start)
    finally:
        gc.enable()
    raw_rec.finish()
    ours_rec.finish()
    return raw_rec, ours_rec


def delete(i: int) -> DeleteMsg:
    """The broker benchmarks' message: a one-key Delete, ~186 bytes encoded (a small,
    realistic control-plane message)."""
    return DeleteMsg(
        msg_id=i, timestamp=i + 1, collection_name="c", primary_keys=[i], hash_keys=[0]
    )


async def stream_pipelined_rate(config: Any, total: int) -> float:
    """Messages per second of one ``MsgStream.produce`` of ``total`` Deletes to a new
    channel (after one message that opens the connection and the channel)."""
    async with MsgStream(new_client(config)) as stream:
        await stream.as_producer([f"bench-tput-ours-{time.monotonic_ns()}"])
        await stream.produce(MsgPack.of(delete(0)))
        pack = MsgPack(msgs=[delete(i) for i in range(total)])
        start = time.perf_counter()
        await stream.produce(pack)
        elapsed = time.perf_counter() - start
    return total / elapsed


def tests_on_path() -> None:
    """Make ``tests/brokers`` importable: the benchmarks start the tests' local brokers."""
    tests = str(Path(__file__).resolve().parent.parent / "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
