"""``msgstream demo``: the end-to-end showcase -- produce, ingest with Spark, crash,
resume, read back and verify row by row.

1. A sample collection (int64 key ``pk``, float vector ``vec``, string ``text``, JSON
   ``meta``; every value derived from the key) is created on 4 channels, and inserts and
   deletes are produced with time ticks (``msgstream.bridge_spark.workload``) while Spark starts.
2. Ingestion (the ``msgstream ingest`` job: the driver-side micro-batcher writing
   idempotent Parquet) runs while the second half is produced. Once at least half the
   rows are written, the batch that crossed the half *crashes* after its Parquet files
   were written but before its checkpoint commit -- the worst moment.
3. A new job resumes from the checkpoint: it redoes the crashed batch with the same
   ``batch_id`` (replacing its files) and ingests the rest, up to the final time tick.
4. Spark reads the Parquet back. Every produced insert and delete must be there exactly
   once, with the content its key implies; the last line reports
   ``demo: rows=<n> deletes=<n> batches=<n> lost=0 duplicated=0 rows_per_s=<n>`` and the
   exit code is 1 on any loss, duplicate, mismatch or timeout.

PySpark is imported only when the command runs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import secrets
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import Config, MqConfig
from ..factory import MsgStreamFactory
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
from .ingest import DEFAULT_MASTER, BatchProgress, spark_session, summary_table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from msgstream.bridge_spark import BatcherProgress, Until
    from msgstream.bridge_spark.workload import Produced, SampleProducer

COLLECTION = "demo"


@dataclass(frozen=True)
class DemoOptions:
    channels: int = 4
    rows: int = 20000
    batch_rows: int = 4000
    path: str | None = None
    keep: bool = False
    timeout_s: float = 300.0
    seed: int | None = None
    master: str = DEFAULT_MASTER


def add_parser(sub: Subparsers, parent: argparse.ArgumentParser) -> None:
    parser = sub.add_parser(
        "demo",
        parents=[parent],
        help="produce a collection, ingest it with Spark across a crash, and verify",
        description=(
            "Produce a collection (int64 key, float vector, string, JSON) with inserts and "
            "deletes over several channels; ingest it with Spark into Parquet, crash half-way "
            "(after a batch's files were written, before its checkpoint), resume, then read "
            "the Parquet back and check that every row is there exactly once. Exits 1 on any "
            "loss or duplicate. Runs on a temporary rocksmq store unless --path or --config "
            "is given."
        ),
    )
    parser.add_argument(
        "--channels", type=positive_int, default=4, metavar="N", help="channels (default 4)"
    )
    parser.add_argument(
        "--rows", type=positive_int, default=20000, metavar="N", help="rows to insert (20000)"
    )
    parser.add_argument(
        "--batch-rows",
        type=positive_int,
        default=4000,
        metavar="N",
        help="rows per Spark batch, at most (a pack is never split; default 4000)",
    )
    parser.add_argument(
        "--path", metavar="DIR", help="directory for the store and output (default: temporary)"
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep the temporary store, Parquet and checkpoint"
    )
    parser.add_argument(
        "--timeout",
        type=positive_float,
        default=300.0,
        metavar="SECONDS",
        help="fail if the demo has not finished after SECONDS (default 300)",
    )
    parser.add_argument("--seed", type=non_negative_int, metavar="N", help="random seed")
    parser.add_argument(
        "--master", default=DEFAULT_MASTER, help=f"Spark master (default {DEFAULT_MASTER})"
    )
    parser.set_defaults(handler=handle)


# --------------------------------------------------------------------------- state


class SimulatedCrash(RuntimeError):
    """Raised by the phase-1 sink to stop the job at the worst moment."""


@dataclass
class Phase:
    batches: int = 0
    redone: int = 0
    rows: int = 0
    deletes: int = 0
    seconds: float = 0.0


@dataclass
class Verification:
    rows: int = 0
    deletes: int = 0
    batches: int = 0
    lost: int = 0
    duplicated: int = 0
    unexpected: int = 0
    mismatched: int = 0
    batch_ids_ok: bool = True


@dataclass
class DemoState:
    produced: Produced | None = None
    phases: list[Phase] = field(default_factory=lambda: [Phase(), Phase()])
    crashed_batch: int | None = None
    spark_start_s: float = 0.0
    elapsed_s: float = 0.0
    timed_out: bool = False
    error: str = ""
    check: Verification = field(default_factory=Verification)

    @property
    def ingest_s(self) -> float:
        return sum(p.seconds for p in self.phases)

    @property
    def ingested_rows(self) -> int:
        return sum(p.rows + p.deletes for p in self.phases)

    @property
    def rows_per_s(self) -> int:
        return fmt_rate(self.ingested_rows, self.ingest_s)

    @property
    def ok(self) -> bool:
        check = self.check
        return not (
            self.timed_out
            or self.error
            or check.lost
            or check.duplicated
            or check.unexpected
            or check.mismatched
            or not check.batch_ids_ok
        )


class CrashHalfWay:
    """The Parquet sink of phase 1: the batch that brings the written rows to at least
    ``half`` writes its files, then raises before the batcher can commit it."""

    def __init__(self, sink: Any, half: int, state: DemoState) -> None:
        self.sink = sink
        self.half = half
        self.state = state
        self.written = 0

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        self.sink(df, batch_id)
        self.written += df.count()
        if self.written >= self.half:
            self.state.crashed_batch = batch_id
            raise SimulatedCrash(f"simulated crash after writing batch {batch_id}")


# --------------------------------------------------------------------------- producing


async def produce(producer: SampleProducer, rows: int, chunk: int = 500) -> None:
    """Insert ``rows`` rows (with deletes) in chunks, yielding to the ingest between."""
    done = 0
    while done < rows:
        step = min(chunk, rows - done)
        await producer.produce_rows(step)
        done += step
        await asyncio.sleep(0.01)


# --------------------------------------------------------------------------- ingesting


async def ingest_phase(
    spark: SparkSession,
    config: Config,
    channels: Sequence[str],
    checkpoint: Path,
    fn: Any,
    opts: DemoOptions,
    phase: Phase,
    label: str,
    until: Until,
) -> BatcherProgress:
    from msgstream.bridge_spark import MicroBatcher

    batcher = MicroBatcher(
        spark,
        config,
        channels,
        checkpoint,
        collection=COLLECTION,
        max_rows=opts.batch_rows,
        max_interval_s=0.5,
    )
    try:
        async with BatchProgress(label).follow(batcher):
            await batcher.run(fn, until=until)
    finally:
        progress = batcher.progress
        phase.batches += progress.batches
        phase.redone += progress.redone
        phase.rows += progress.insert_rows
        phase.deletes += progress.delete_rows
        phase.seconds += progress.seconds
    return progress


# --------------------------------------------------------------------------- verifying


def verify(spark: SparkSession, out: str, produced: Produced, dim: int) -> Verification:
    """Read the Parquet back and compare it with what was produced, row by row."""
    from pyspark.sql import functions as F

    df = spark.read.parquet(out)
    keys = df.select("_op", "pk", "batch_id").toArrow().to_pydict()
    check = Verification()
    inserted = Counter(k for op, k in zip(keys["_op"], keys["pk"], strict=True) if op == "insert")
    deleted = Counter(k for op, k in zip(keys["_op"], keys["pk"], strict=True) if op == "delete")
    for found, expected in (
        (inserted, Counter(produced.inserted)),
        (deleted, Counter(produced.deleted)),
    ):
        check.lost += sum(1 for key in expected if key not in found)
        check.duplicated += sum(n - 1 for n in found.values() if n > 1)
        check.unexpected += sum(1 for key in found if key not in expected)
    check.rows = sum(inserted.values())
    check.deletes = sum(deleted.values())
    batch_ids = sorted(set(keys["batch_id"]))
    check.batches = len(batch_ids)
    check.batch_ids_ok = batch_ids == list(range(len(batch_ids)))
    pk = F.col("pk")
    wrong = df.where(F.col("_op") == "insert").where(
        (F.col("text") != F.concat(F.lit("row-"), pk.cast("string")))
        | (F.size("vec") != dim)
        | (F.col("vec")[0] != pk.cast("float"))
        | (F.col("vec")[dim - 1] != (pk + F.lit((dim - 1) / 8)).cast("float"))
        | (F.col("meta").isNull() != (pk % 7 == 0))
        | (F.coalesce(F.get_json_object("meta", "$.pk").cast("long"), pk) != pk)
    )
    check.mismatched = wrong.count()
    return check


# --------------------------------------------------------------------------- running


async def run_demo(config: Config, opts: DemoOptions, workdir: Path) -> DemoState:
    from msgstream.bridge_spark import ParquetSink
    from msgstream.bridge_spark.workload import SampleProducer

    state = DemoState()
    run_id = secrets.token_hex(3)
    channels = [f"demo-{run_id}-{i}" for i in range(opts.channels)]
    out = workdir / f"demo-{run_id}-parquet"
    checkpoint = workdir / f"demo-{run_id}-checkpoint.json"
    started = time.perf_counter()
    factory = MsgStreamFactory(config)
    try:
        async with asyncio.timeout(opts.timeout_s):
            async with factory.new_msgstream() as stream:
                await stream.as_producer(channels)
                producer = SampleProducer(stream, seed=opts.seed, rows_per_insert=(4, 12))
                state.produced = producer.produced
                await producer.create_collection()
                with contextlib.ExitStack() as stack:
                    # Spark starts (in a thread) while the first half is produced.
                    spark_started = time.perf_counter()
                    first_half = asyncio.create_task(produce(producer, opts.rows // 2))
                    spark = await asyncio.to_thread(stack.enter_context, spark_session(opts.master))
                    await asyncio.to_thread(lambda: spark.range(1).count())
                    state.spark_start_s = time.perf_counter() - spark_started
                    await first_half
                    sink = ParquetSink(str(out))
                    # Phase 1: ingest while the rest is produced; crash past half-way.
                    second_half = asyncio.create_task(produce(producer, opts.rows - opts.rows // 2))
                    crash = CrashHalfWay(sink, (opts.rows + 1) // 2, state)
                    with contextlib.suppress(SimulatedCrash):
                        await ingest_phase(
                            spark, config, channels, checkpoint, crash, opts,
                            state.phases[0], "phase 1", "forever",
                        )  # fmt: skip
                    await second_half
                    await producer.finish()
                    final_tick = producer.produced.last_tick
                    # Phase 2: resume from the checkpoint up to the final tick.
                    await ingest_phase(
                        spark, config, channels, checkpoint, sink, opts,
                        state.phases[1], "phase 2", final_tick,
                    )  # fmt: skip
                    state.check = await asyncio.to_thread(
                        verify, spark, str(out), producer.produced, producer.dim
                    )
    except TimeoutError:
        state.timed_out = True
    state.elapsed_s = time.perf_counter() - started
    return state


def demo_summary(opts: DemoOptions, state: DemoState, backend: str) -> list[tuple[str, str]]:
    produced = state.produced
    first, second = state.phases
    check = state.check
    crashed = "-" if state.crashed_batch is None else str(state.crashed_batch)
    return [
        ("channels", str(opts.channels)),
        (
            "rows inserted / deleted (produced)",
            "-" if produced is None else f"{len(produced.inserted)} / {len(produced.deleted)}",
        ),
        (
            "insert / delete messages, ticks",
            "-"
            if produced is None
            else f"{produced.insert_msgs} / {produced.delete_msgs}, {produced.ticks}",
        ),
        ("spark start (s)", f"{state.spark_start_s:.2f}"),
        ("phase 1: batches / rows / deletes", f"{first.batches} / {first.rows} / {first.deletes}"),
        ("crashed batch (redone in phase 2)", crashed),
        (
            "phase 2: batches (redone) / rows / deletes",
            f"{second.batches} ({second.redone}) / {second.rows} / {second.deletes}",
        ),
        ("parquet: rows / deletes / batches", f"{check.rows} / {check.deletes} / {check.batches}"),
        ("lost / duplicated", f"{check.lost} / {check.duplicated}"),
        ("unexpected / mismatched content", f"{check.unexpected} / {check.mismatched}"),
        ("batch ids contiguous", "yes" if check.batch_ids_ok else "NO"),
        ("ingest elapsed (s)", f"{state.ingest_s:.2f}"),
        ("total elapsed (s)", f"{state.elapsed_s:.2f}"),
        ("rows/s (ingest)", str(state.rows_per_s)),
        ("backend", backend),
    ]


@contextlib.contextmanager
def _workdir(opts: DemoOptions) -> Iterator[Path]:
    """Where the store (if the demo makes one), the Parquet and the checkpoint go."""
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
            stderr_console().print(f"kept store, Parquet and checkpoint in {path}", markup=False)
        else:
            shutil.rmtree(path, ignore_errors=True)


def demo_config(config: Config, explicit_config: bool, store_dir: Path | None) -> Config:
    """The configuration the demo runs on: the given one (with ``--path`` as its rocksmq
    path), or the embedded rocksmq store in ``store_dir``."""
    if store_dir is None:
        return config
    from msgstream.backends.rocksmq.settings import RocksmqConfig  # loaded only when used

    rocksmq = config.section(RocksmqConfig).replace(path=str(store_dir / "store"))
    if explicit_config:
        return config.replace(rocksmq=rocksmq)
    return config.replace(mq=MqConfig(type="rocksmq"), rocksmq=rocksmq)


async def handle(config: Config, args: argparse.Namespace) -> int:
    opts = DemoOptions(
        channels=int(args.channels),
        rows=int(args.rows),
        batch_rows=int(args.batch_rows),
        path=args.path,
        keep=bool(args.keep),
        timeout_s=float(args.timeout),
        seed=args.seed,
        master=str(args.master),
    )
    explicit = args.config is not None or bool(os.environ.get("MSGSTREAM_CONFIG"))
    needs_store = not explicit or opts.path is not None
    with _workdir(opts) as workdir:
        run_config = demo_config(config, explicit, workdir if needs_store else None)
        state = await run_demo(run_config, opts, workdir)
    out = stdout_console()
    backend = run_config.backend()
    out.print(summary_table(f"msgstream demo ({backend})", demo_summary(opts, state, backend)))
    errors = stderr_console()
    if state.timed_out:
        errors.print(f"error: demo did not finish within {opts.timeout_s:g} s", markup=False)
    elif not state.ok:
        errors.print(
            "error: verification failed (see lost/duplicated/unexpected/mismatched)",
            markup=False,
        )
    check = state.check
    print(
        f"demo: rows={check.rows} deletes={check.deletes} batches={check.batches} "
        f"lost={check.lost} duplicated={check.duplicated} rows_per_s={state.rows_per_s}",
        flush=True,
    )
    return EXIT_OK if state.ok else EXIT_FAILED
