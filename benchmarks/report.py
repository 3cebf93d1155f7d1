"""What every benchmark prints: figure rows beside their baseline, and the machine; and
the produce figures of the broker benchmarks, measured by the ``msgstream bench`` harness
(its recorder, scheduler and raw baselines: no second timing loop here)."""

from __future__ import annotations

import gc
import sys
import time
from collections.abc import AsyncIterable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from msgstream import MsgPack, MsgStream, SubscriptionPosition, TtMsgStream
from msgstream.bench.common import channel_names, delete_channels
from msgstream.bench.report import describe_machine
from msgstream.bench.report import machine as bench_machine
from msgstream.bench.runner import Side, run_sides
from msgstream.bench.targets import MsgStreamTarget, Target, raw_target
from msgstream.bench.workload import Workload
from msgstream.configuration.config import Config, resolve_backend
from msgstream.contract.backend import Client


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


BROKER_RECORD = 320
"""Bytes of the benchmarks' produce messages, encoded, envelope included: about the
smallest one-row Insert the harness sends (its own minimum is 316 bytes)."""


def latency_us(side: Side, percentile: float) -> float:
    """A side's latency percentile (50, 99...), in µs."""
    return side.stats().ms(percentile) * 1000


def machine() -> str:
    return describe_machine(bench_machine())


def pace_ns() -> float:
    """Nanoseconds this process takes for one step of a fixed pure-Python loop (the best of
    five rounds): the machine's speed at that moment. Some processes on the project's
    shared machines run at about half speed from start to end, the same code alike; a
    run's pace at its start and end, beside a usual run's, tells such a run apart."""
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter_ns()
        total = 0
        for step in range(_PACE_STEPS):
            total += step * step % 7
        best = min(best, time.perf_counter_ns() - start)
    return best / _PACE_STEPS


_PACE_STEPS = 20_000
_PACE_AT_START = pace_ns()
"""Taken when a benchmark script imports this module: the start of its run."""


def print_table(rows: list[Row], json_path: str | None = None, **extra: str) -> None:
    print(f"machine: {machine()}")
    pace = {"start": round(_PACE_AT_START, 1), "end": round(pace_ns(), 1)}
    print(f"pace: a step of a fixed Python loop took {pace['start']} ns at the start of the "
          f"run, {pace['end']} ns at its end")  # fmt: skip
    for key, value in extra.items():
        print(f"{key}: {value}")
    print(f"{'figure':44} {'ours':>12} {'baseline':>12} {'ratio':>7}  unit    goal")
    for row in rows:
        base = "-" if row.baseline is None else f"{row.baseline:,.1f}"
        ratio = "-" if row.ratio is None else f"{row.ratio:.2f}x"
        print(f"{row.figure:44} {row.ours:>12,.1f} {base:>12} {ratio:>7}  {row.unit:7} {row.goal}")
    if json_path:
        document = {"machine": machine(), "pace_ns": pace, **extra,
                    "rows": [r.__dict__ for r in rows]}  # fmt: skip
        with open(json_path, "wb") as out:
            out.write(orjson.dumps(document))


def timed(label: str, fn: Callable[[], Any]) -> Any:
    """Run ``fn`` after a collection, reporting its wall time on stderr."""
    gc.collect()
    start = time.perf_counter()
    result = fn()
    print(f"  {label}: {time.perf_counter() - start:.1f}s", file=sys.stderr)
    return result


async def harness_sides(
    config: Config, workload: Workload, *extra: Side, slice_s: float = 1.0
) -> list[Side]:
    """Run ``workload`` through the backend's raw client (its ``msgstream bench``
    baseline), msgstream and any ``extra`` sides, measured by the harness in alternating
    slices (the order flips every slice, so drift hits every side alike); the run's
    channels are deleted afterwards. Returns ``[raw, msgstream, *extra]``."""
    backend = resolve_backend(config)
    raw_side = raw_target(config)
    sides = [
        Side(raw_side, raw_side.label, backend),
        Side(MsgStreamTarget(config), "msgstream", backend),
        *extra,
    ]
    channels = channel_names(workload.channels, "-report")
    try:
        await run_sides(sides, workload, channels, slice_s=slice_s)
    finally:
        raw_channels = list(getattr(raw_side, "channels", []))
        await delete_channels(config, channels + raw_channels)
    for side in sides:
        if side.recorder.errors:
            raise RuntimeError(f"{side.name}: {side.recorder.errors} sends failed")
    return sides


def latency_workload(messages: int, size: int) -> Workload:
    """One message per call, each sent when the previous one was acknowledged."""
    return Workload(size=size, pack_size=1, rate=None, warmup_s=1.0, duration_s=None,
                    messages=messages)  # fmt: skip


def pipelined_workload(messages: int, size: int, pack: int, prebuilt: int = 0) -> Workload:
    """``pack`` messages per call, closed loop: how fast a pipeline of sends drains.
    ``prebuilt`` packs per channel are built before the run and sent in turn (0: each is
    built, and for a raw client encoded, inside the measured time)."""
    return Workload(size=size, pack_size=pack, rate=None, warmup_s=1.0, duration_s=None,
                    messages=messages, prebuilt=prebuilt)  # fmt: skip


async def broker_produce_rows(
    config: Config,
    latency_messages: int,
    pipelined_messages: int,
    size: int = BROKER_RECORD,
    prebuilt: int = 0,
    extra: Sequence[Callable[[Config], Target]] = (),
) -> list[Row]:
    """The broker issues' three figures, msgstream beside the backend's raw client, both
    measured by the harness: latency p50/p99 of one message per call, and pipelined
    throughput (1,000 messages per call, ``prebuilt`` as in :func:`pipelined_workload`).
    Each ``extra`` target is measured in the same slices; its p50 and pipelined rows
    (against the raw client) follow the three."""
    backend = resolve_backend(config)

    def extras() -> list[Side]:
        targets = [make(config) for make in extra]
        return [Side(target, target.label, backend) for target in targets]

    raw, ours, *others = await harness_sides(
        config, latency_workload(latency_messages, size), *extras()
    )
    raw_tput, ours_tput, *others_tput = await harness_sides(
        config, pipelined_workload(pipelined_messages, size, 1000, prebuilt), *extras()
    )
    rows = [
        Row("MsgStream.produce latency p50", latency_us(ours, 50), latency_us(raw, 50), "us",
            "<= 1.10x raw"),
        Row("MsgStream.produce latency p99", latency_us(ours, 99), latency_us(raw, 99), "us",
            "<= 1.25x raw"),
        Row(f"pipelined produce, {size} B msgs", ours_tput.msgs_per_s, raw_tput.msgs_per_s,
            "msgs/s", ">= 0.9x raw"),
    ]  # fmt: skip
    for other, other_tput in zip(others, others_tput, strict=True):
        rows.append(
            Row(f"{other.name}: latency p50", latency_us(other, 50), latency_us(raw, 50), "us",
                "reference")
        )  # fmt: skip
        rows.append(
            Row(f"{other.name}: pipelined", other_tput.msgs_per_s, raw_tput.msgs_per_s,
                "msgs/s", "reference")
        )  # fmt: skip
    return rows


async def tt_read_rate(client: Client, channels: list[str], expected: int, subname: str) -> float:
    """Messages per second a TtMsgStream over ``client`` reads from the start of
    ``channels`` (``expected`` messages in all)."""
    stream = TtMsgStream(client, pursuit_lag_s=0)
    _, elapsed = await _timed_read(stream, lambda: stream, channels, expected, subname)
    return expected / elapsed


async def plain_read_rate(
    client: Client, channels: list[str], expected: int, subname: str, batch: int | None = None
) -> float:
    """Messages per second a plain MsgStream over ``client`` reads from the start of
    ``channels`` (``expected`` messages in all, ticks included: it hands every one out): a
    one-message pack each, or with ``batch``, ``stream.batches(batch)``."""
    stream = MsgStream(client)
    packs = (lambda: stream) if batch is None else (lambda: stream.batches(batch))
    seen, elapsed = await _timed_read(stream, packs, channels, expected, subname)
    return seen / elapsed


async def _timed_read(
    stream: MsgStream,
    packs: Callable[[], AsyncIterable[MsgPack]],
    channels: list[str],
    expected: int,
    subname: str,
) -> tuple[int, float]:
    """Subscribe ``stream`` to ``channels`` from EARLIEST, then read the packs ``packs()``
    gives until ``expected`` messages came: how many, in how long."""
    await stream.as_consumer(channels, subname, SubscriptionPosition.EARLIEST)
    seen = 0
    start = time.perf_counter()
    async for pack in packs():
        seen += len(pack.msgs)
        if seen >= expected:
            break
    elapsed = time.perf_counter() - start
    await stream.close()
    return seen, elapsed


def tests_on_path() -> None:
    """Make ``tests/brokers`` importable: the benchmarks start the tests' local brokers."""
    tests = str(Path(__file__).resolve().parent.parent / "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
