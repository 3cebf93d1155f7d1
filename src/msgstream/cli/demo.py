"""``msgstream demo``: concurrent producers, a time-tick consumer, a checkpoint and an
exact resume, verified message by message.

1. A :class:`TimeTickEmitter` stamps every message and ticks all channels every ~10 ms
   while insert producers (several int64-keyed rows per InsertMsg, routed by
   ``hash_primary_keys`` so one Insert becomes one message per channel it touches) and a
   delete producer (DeleteMsgs of earlier keys) run concurrently.
2. Meanwhile a :class:`TtMsgStream` (subscription ``demo``) reads until it has seen at
   least half of the data messages, stops at that pack boundary, checkpoints the pack's
   ``end_positions`` to a JSON file and closes.
3. A new TtMsgStream opens at ``SubscriptionPosition.UNKNOWN``, seeks to the checkpoint
   and reads until the final time tick.

Every delivered message is identified by ``(channel, MessageID)`` and checked against
what ``produce()`` returned for that channel: nothing may be lost or delivered twice, and
each must be the message (type, source_id, msg_id, rows) that was sent there.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import itertools
import os
import secrets
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from rich.table import Table

from ..config import Config, MqConfig
from ..emitter import TimeTickEmitter
from ..factory import MsgStreamFactory
from ..messages import DeleteMsg, InsertMsg, TsMsg
from ..pack import MsgPack
from ..position import MsgPosition, SubscriptionPosition, positions_from_json, positions_to_json
from ..routing import hash_primary_keys
from ..schema import DataType, FieldData
from ..stream import MsgStream, ProduceResult
from ..ttstream import TtMsgStream
from .common import (
    EXIT_FAILED,
    EXIT_OK,
    Subparsers,
    fmt_rate,
    non_negative_int,
    positive_float,
    positive_int,
    stderr_console,
    stdout_console,
)

SUBSCRIPTION = "demo"
COLLECTION = "demo"
VECTOR_DIM = 16
INSERT_PRODUCERS = 3
POLL_S = 0.2

MessageKey = tuple[str, bytes]
"""A delivered message's identity: (channel, MessageID bytes)."""
Identity = tuple[int, int, int, int]
"""What was sent there: (msg_type, source_id, msg_id, rows)."""


@dataclass(frozen=True)
class DemoOptions:
    channels: int = 4
    messages: int = 20000
    path: str | None = None
    keep: bool = False
    timeout_s: float = 60.0
    tick_interval_s: float = 0.01
    rows_min: int = 2
    rows_max: int = 6
    seed: int | None = None


def add_parser(sub: Subparsers, parent: argparse.ArgumentParser) -> None:
    parser = sub.add_parser(
        "demo",
        parents=[parent],
        help="run concurrent producers and a checkpointed time-tick consumer, and verify",
        description=(
            "Concurrent Insert/Delete producers with a time-tick emitter over several "
            "channels; a TtMsgStream reads about half, checkpoints its end positions, and "
            "a new stream seeks there and reads the rest. Verifies that no message is lost "
            "or duplicated; exits 1 if one is. Runs on a temporary rocksmq store unless "
            "--path or --config is given."
        ),
    )
    parser.add_argument(
        "--channels", type=positive_int, default=4, metavar="N", help="channels (default 4)"
    )
    parser.add_argument(
        "--messages",
        type=positive_int,
        default=20000,
        metavar="N",
        help="data messages to produce, counted per channel (default 20000)",
    )
    parser.add_argument(
        "--path", metavar="DIR", help="rocksmq store directory (default: a temporary one)"
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep the temporary store and checkpoint"
    )
    parser.add_argument(
        "--timeout",
        type=positive_float,
        default=60.0,
        metavar="SECONDS",
        help="fail if the demo has not finished after SECONDS (default 60)",
    )
    parser.add_argument(
        "--tick-interval",
        type=positive_float,
        default=0.01,
        metavar="SECONDS",
        help="time tick interval (default 0.01)",
    )
    parser.add_argument(
        "--seed", type=non_negative_int, metavar="N", help="random seed (rows, deletes)"
    )
    parser.set_defaults(handler=handle)


# --------------------------------------------------------------------------- state


@dataclass
class PhaseStats:
    packs: int = 0
    data_packs: int = 0
    messages: int = 0


@dataclass
class DemoState:
    target: int
    expected: dict[MessageKey, Identity] = field(default_factory=dict)
    delivered: Counter[MessageKey] = field(default_factory=Counter)
    mismatched: int = 0
    order_errors: int = 0
    rows_inserted: int = 0
    rows_deleted: int = 0
    inserts: int = 0
    deletes: int = 0
    alive: list[int] = field(default_factory=list)
    delivered_identity: dict[MessageKey, Identity] = field(default_factory=dict)
    phases: list[PhaseStats] = field(default_factory=lambda: [PhaseStats(), PhaseStats()])
    produced_at: float = 0.0
    final_tick: int | None = None
    checkpoint_ts: int = 0
    production_done: asyncio.Event = field(default_factory=asyncio.Event)
    pursuit_merges: int = 0
    late: int = 0

    @property
    def produced(self) -> int:
        return len(self.expected)

    def record_sent(
        self, msg: InsertMsg | DeleteMsg, result: ProduceResult, rows: dict[str, int]
    ) -> None:
        """Remember what was sent to each (channel, MessageID). Each produce call carries
        one message, so a channel's id is that message's part routed there."""
        for channel, ids in result.items():
            for msg_id in ids:
                self.expected[(channel, msg_id.to_bytes())] = (
                    msg.MSG_TYPE,
                    msg.source_id,
                    msg.msg_id,
                    rows.get(channel, -1),
                )

    def record_delivered(self, msg: TsMsg) -> None:
        position = msg.position
        assert position is not None
        key = (position.channel, position.msg_id)
        self.delivered[key] += 1
        rows = msg.num_rows if isinstance(msg, InsertMsg | DeleteMsg) else 0
        self.delivered_identity[key] = (msg.MSG_TYPE, msg.source_id, msg.msg_id, rows)


# --------------------------------------------------------------------------- producing


class Producers:
    """Insert and delete producers sharing one stream and one time-tick emitter."""

    def __init__(
        self,
        stream: MsgStream,
        emitter: TimeTickEmitter,
        state: DemoState,
        opts: DemoOptions,
        rng: np.random.Generator,
    ) -> None:
        self.stream = stream
        self.emitter = emitter
        self.state = state
        self.opts = opts
        self.rng = rng
        self.msg_ids = itertools.count(1)
        self.pks = itertools.count(1)

    def _rows_per_channel(self, msg: InsertMsg | DeleteMsg) -> dict[str, int]:
        """How many rows of ``msg`` the default routing sends to each channel."""
        channels = self.stream.producer_channels
        buckets = np.asarray(msg.hash_keys, dtype=np.uint64) % np.uint64(len(channels))
        counts = np.bincount(buckets.astype(np.int64), minlength=len(channels))
        return {channels[i]: n for i, n in enumerate(counts.tolist()) if n}

    async def _send(self, msg: InsertMsg | DeleteMsg) -> None:
        rows = self._rows_per_channel(msg)
        result = await self.stream.produce(MsgPack(msgs=[msg]))
        self.state.record_sent(msg, result, rows)

    async def insert_loop(self, source_id: int) -> None:
        state, opts = self.state, self.opts
        while state.produced < state.target:
            rows = int(self.rng.integers(opts.rows_min, opts.rows_max + 1))
            pks = np.array([next(self.pks) for _ in range(rows)], dtype=np.int64)
            vectors = self.rng.random((rows, VECTOR_DIM), dtype=np.float32)
            async with self.emitter.reserve() as ts:
                msg = InsertMsg(
                    msg_id=next(self.msg_ids),
                    timestamp=ts,
                    source_id=source_id,
                    hash_keys=hash_primary_keys(pks),
                    collection_name=COLLECTION,
                    row_ids=pks,
                    fields=[
                        FieldData("pk", DataType.INT64, pks),
                        FieldData("vec", DataType.FLOAT_VECTOR, vectors, dim=VECTOR_DIM),
                        FieldData("text", DataType.VARCHAR, [f"row-{pk}" for pk in pks.tolist()]),
                    ],
                )
                await self._send(msg)
            state.inserts += 1
            state.rows_inserted += rows
            state.alive.extend(pks.tolist())
            await asyncio.sleep(0)

    async def delete_loop(self, source_id: int) -> None:
        state = self.state
        while state.produced < state.target:
            if len(state.alive) < 16:
                await asyncio.sleep(0.001)
                continue
            count = int(self.rng.integers(1, 5))
            keys = np.array([self._take_alive() for _ in range(count)], dtype=np.int64)
            async with self.emitter.reserve() as ts:
                msg = DeleteMsg(
                    msg_id=next(self.msg_ids),
                    timestamp=ts,
                    source_id=source_id,
                    hash_keys=hash_primary_keys(keys),
                    collection_name=COLLECTION,
                    primary_keys=keys,
                )
                await self._send(msg)
            state.deletes += 1
            state.rows_deleted += count
            await asyncio.sleep(0)

    def _take_alive(self) -> int:
        alive = self.state.alive
        index = int(self.rng.integers(0, len(alive)))
        alive[index], alive[-1] = alive[-1], alive[index]
        return alive.pop()

    async def run(self) -> None:
        tasks = [
            asyncio.create_task(self.insert_loop(source_id=i + 1), name=f"demo-insert-{i}")
            for i in range(INSERT_PRODUCERS)
        ]
        tasks.append(asyncio.create_task(self.delete_loop(source_id=100), name="demo-delete"))
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)


# --------------------------------------------------------------------------- consuming


def _check_pack(state: DemoState, pack: MsgPack, phase: PhaseStats) -> None:
    phase.packs += 1
    if pack.msgs:
        phase.data_packs += 1
    for msg in pack.msgs:
        if not pack.begin_ts < msg.timestamp <= pack.end_ts:
            state.order_errors += 1
        state.record_delivered(msg)
    phase.messages += len(pack.msgs)


async def _next_pack(stream: TtMsgStream) -> MsgPack | None:
    """The next pack, or None if none arrived within ``POLL_S`` (the caller re-checks)."""
    try:
        async with asyncio.timeout(POLL_S):
            return await anext(aiter(stream))
    except TimeoutError:
        return None


def write_checkpoint(path: Path, pack: MsgPack) -> None:
    path.write_text(positions_to_json(pack.end_positions) + "\n", encoding="utf-8")


def read_checkpoint(path: Path) -> list[MsgPosition]:
    return positions_from_json(path.read_text(encoding="utf-8"))


async def consume_first_half(stream: TtMsgStream, state: DemoState, checkpoint: Path) -> None:
    """Read until at least half of the target is delivered; checkpoint that pack's end."""
    phase = state.phases[0]
    half = (state.target + 1) // 2
    while True:
        pack = await _next_pack(stream)
        if pack is None:
            continue
        _check_pack(state, pack, phase)
        if phase.messages >= half:
            write_checkpoint(checkpoint, pack)
            state.checkpoint_ts = pack.end_ts
            return


async def consume_rest(stream: TtMsgStream, state: DemoState) -> None:
    """Read until the final time tick has been passed (the checkpoint may already be
    there: then no pack follows, since time does not advance)."""
    phase = state.phases[1]
    last_end = state.checkpoint_ts
    while True:
        if state.production_done.is_set():
            assert state.final_tick is not None
            if last_end >= state.final_tick:
                return
        pack = await _next_pack(stream)
        if pack is None:
            continue
        _check_pack(state, pack, phase)
        last_end = pack.end_ts


def _barrier_stats(stream: TtMsgStream, state: DemoState) -> None:
    state.pursuit_merges += stream.pursuit_merges
    stats = stream.barrier.stats
    state.late += stats.late_delivered + stats.late_rejected


# --------------------------------------------------------------------------- running


@dataclass
class DemoResult:
    messages: int
    packs: int
    lost: int
    duplicated: int
    unexpected: int
    mismatched: int
    order_errors: int
    elapsed_s: float
    produce_s: float
    timed_out: bool

    @property
    def ok(self) -> bool:
        return not (
            self.lost
            or self.duplicated
            or self.unexpected
            or self.mismatched
            or self.order_errors
            or self.timed_out
        )

    @property
    def msgs_per_s(self) -> int:
        return fmt_rate(self.messages, self.elapsed_s)


async def run_demo(
    config: Config, opts: DemoOptions, workdir: Path
) -> tuple[DemoState, DemoResult]:
    factory = MsgStreamFactory(config)
    run_id = secrets.token_hex(3)
    channels = [f"demo-{run_id}-{i}" for i in range(opts.channels)]
    checkpoint = workdir / f"demo-{run_id}-checkpoint.json"
    state = DemoState(target=opts.messages)
    rng = np.random.default_rng(opts.seed)
    started = time.perf_counter()
    timed_out = False
    producers_stream = factory.new_msgstream()
    first = factory.new_ttmsgstream()
    second: TtMsgStream | None = None
    producer_task: asyncio.Task[None] | None = None
    try:
        async with asyncio.timeout(opts.timeout_s):
            await producers_stream.as_producer(channels)
            await first.as_consumer(channels, SUBSCRIPTION, SubscriptionPosition.EARLIEST)
            emitter = TimeTickEmitter(
                producers_stream, interval_s=opts.tick_interval_s, source_id=0
            )
            producers = Producers(producers_stream, emitter, state, opts, rng)

            async def produce_all() -> None:
                emitter.start()
                try:
                    await producers.run()
                finally:
                    await emitter.stop(final_tick=True)
                state.produced_at = time.perf_counter() - started
                state.final_tick = emitter.last_tick
                state.production_done.set()

            producer_task = asyncio.create_task(produce_all(), name="demo-producers")
            await consume_first_half(first, state, checkpoint)
            _barrier_stats(first, state)
            await first.close()

            second = factory.new_ttmsgstream()
            await second.as_consumer(channels, SUBSCRIPTION, SubscriptionPosition.UNKNOWN)
            await second.seek(read_checkpoint(checkpoint))
            await consume_rest(second, state)
            _barrier_stats(second, state)
            await producer_task
    except TimeoutError:
        timed_out = True
    finally:
        if producer_task is not None and not producer_task.done():
            producer_task.cancel()
            with contextlib.suppress(BaseException):
                await producer_task
        for stream in (first, second, producers_stream):
            if stream is not None:
                await stream.close()
    elapsed = time.perf_counter() - started
    return state, _verify(state, elapsed, timed_out)


def _verify(state: DemoState, elapsed: float, timed_out: bool) -> DemoResult:
    expected = state.expected
    delivered = state.delivered
    lost = sum(1 for key in expected if key not in delivered)
    duplicated = sum(count - 1 for count in delivered.values() if count > 1)
    unexpected = sum(1 for key in delivered if key not in expected)
    mismatched = sum(
        1
        for key, identity in state.delivered_identity.items()
        if key in expected and expected[key] != identity
    )
    return DemoResult(
        messages=len(expected),
        packs=sum(p.packs for p in state.phases),
        lost=lost,
        duplicated=duplicated,
        unexpected=unexpected,
        mismatched=mismatched,
        order_errors=state.order_errors,
        elapsed_s=elapsed,
        produce_s=state.produced_at,
        timed_out=timed_out,
    )


def summary_table(opts: DemoOptions, state: DemoState, result: DemoResult, backend: str) -> Table:
    table = Table(title=f"msgstream demo ({backend})", show_header=True)
    table.add_column("metric")
    table.add_column("value", justify="right")
    first, second = state.phases
    rows: list[tuple[str, str]] = [
        ("channels", str(opts.channels)),
        ("data messages (per channel)", str(result.messages)),
        ("inserts / deletes produced", f"{state.inserts} / {state.deletes}"),
        ("rows inserted / deleted", f"{state.rows_inserted} / {state.rows_deleted}"),
        ("packs (with data)", f"{result.packs} ({first.data_packs + second.data_packs})"),
        ("phase 1: messages / packs", f"{first.messages} / {first.packs}"),
        ("phase 2 (after seek): messages / packs", f"{second.messages} / {second.packs}"),
        ("pursuit merges / late", f"{state.pursuit_merges} / {state.late}"),
        ("lost / duplicated", f"{result.lost} / {result.duplicated}"),
        (
            "unexpected / mismatched / out of range",
            (f"{result.unexpected} / {result.mismatched} / {result.order_errors}"),
        ),
        ("produce elapsed (s)", f"{result.produce_s:.2f}"),
        ("total elapsed (s)", f"{result.elapsed_s:.2f}"),
        ("messages/s", str(result.msgs_per_s)),
    ]
    for name, value in rows:
        table.add_row(name, value)
    return table


@contextlib.contextmanager
def _workdir(opts: DemoOptions, needs_store: bool) -> Iterator[Path]:
    """The directory of the store (if the demo makes one) and the checkpoint file."""
    if opts.path is not None:
        path = Path(opts.path).expanduser()
        path.mkdir(parents=True, exist_ok=True)
        yield path
        return
    path = Path(tempfile.mkdtemp(prefix="msgstream-demo-"))
    try:
        yield path
    finally:
        if opts.keep:
            what = "store and checkpoint" if needs_store else "checkpoint"
            stderr_console().print(f"kept {what} in {path}", markup=False)
        else:
            shutil.rmtree(path, ignore_errors=True)


def demo_config(config: Config, explicit_config: bool, store_dir: Path | None) -> Config:
    """The configuration the demo runs on: the given one (with ``--path`` as its rocksmq
    path), or the embedded rocksmq store in ``store_dir``."""
    if store_dir is None:
        return config
    rocksmq = dataclasses.replace(config.rocksmq, path=str(store_dir))
    if explicit_config:
        return dataclasses.replace(config, rocksmq=rocksmq)
    return dataclasses.replace(config, mq=MqConfig(type="rocksmq"), rocksmq=rocksmq)


async def handle(config: Config, args: argparse.Namespace) -> int:
    opts = DemoOptions(
        channels=int(args.channels),
        messages=int(args.messages),
        path=args.path,
        keep=bool(args.keep),
        timeout_s=float(args.timeout),
        tick_interval_s=float(args.tick_interval),
        seed=args.seed,
    )
    explicit = args.config is not None or bool(os.environ.get("MSGSTREAM_CONFIG"))
    needs_store = not explicit or opts.path is not None
    with _workdir(opts, needs_store) as workdir:
        run_config = demo_config(config, explicit, workdir if needs_store else None)
        state, result = await run_demo(run_config, opts, workdir)
    out = stdout_console()
    out.print(summary_table(opts, state, result, run_config.backend()))
    if result.timed_out:
        stderr_console().print(
            f"error: demo did not finish within {opts.timeout_s:g} s", markup=False
        )
    if not result.ok and not result.timed_out:
        stderr_console().print(
            "error: verification failed (see lost/duplicated/unexpected/mismatched)",
            markup=False,
        )
    print(
        f"demo: messages={result.messages} packs={result.packs} lost={result.lost} "
        f"duplicated={result.duplicated} msgs_per_s={result.msgs_per_s}",
        flush=True,
    )
    return EXIT_OK if result.ok else EXIT_FAILED
