"""``msgstream demo``: the end-to-end showcase -- produce, ingest with Spark, crash,
resume, read back and verify row by row.

1. A sample collection (int64 key ``pk``, float vector ``vec``, string ``text``, JSON
   ``meta``; every value derived from the key) is created on 4 channels, and a backlog of
   inserts and deletes (11/12 of the rows) is produced with time ticks
   (``msgstream.bridge_spark.workload``) while Spark starts.
2. Ingestion (the ``msgstream ingest`` job: the driver-side micro-batcher writing
   idempotent Parquet) works through the backlog while the last rows are produced. Once
   at least half the rows are written, the batch that crossed the half *crashes* after
   its Parquet files were written but before its checkpoint commit -- the worst moment.
3. A new job resumes from the checkpoint: it redoes the crashed batch with the same
   ``batch_id`` (replacing its files) and ingests the rest, up to the final time tick.
4. Spark reads the Parquet back. Every produced insert and delete must be there exactly
   once, with the content its key implies; the last line reports
   ``demo: rows=<n> deletes=<n> batches=<n> lost=0 duplicated=0 rows_per_s=<n>`` and the
   exit code is 1 on any loss, duplicate, mismatch or timeout. ``rows_per_s`` is the
   ingest jobs' throughput: the rows (inserted and deleted) they wrote over the time they
   ran; a backlog ahead of them keeps that from measuring the producer's pace.

Imported (with PySpark) only when ``demo`` runs; the options are declared in
:mod:`.commands`.
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
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import msgstream.bridge_spark
from msgstream.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    fmt_rate,
    options_from,
    stderr_console,
    stdout_console,
)
from msgstream.config import Config, MqConfig
from msgstream.factory import MsgStreamFactory

from ..batcher import BatcherProgress, MicroBatcher, Until
from ..workload import Produced, SampleProducer
from .commands import DEFAULT_MASTER
from .ingest import BatchProgress, spark_session, summary_table

COLLECTION = "demo"
LIVE_SHARE = 12
"""One row in this many is produced while ingesting; the rest is a backlog before it."""
BACKLOG_CHUNK = 10_000
LIVE_CHUNK, LIVE_PAUSE_S = 500, 0.05
"""The live rows come in chunks with a pause between, as a service would send them."""


@dataclass(frozen=True)
class DemoOptions:
    channels: int = 4
    rows: int = 220_000
    batch_rows: int = 50_000
    path: str | None = None
    keep: bool = False
    timeout_s: float = 300.0
    seed: int | None = None
    master: str = DEFAULT_MASTER

    @property
    def live_rows(self) -> int:
        """Rows produced while the first ingest job runs; the rest is the backlog."""
        return self.rows // LIVE_SHARE


# --------------------------------------------------------------------------- state


class SimulatedCrash(RuntimeError):
    """Raised by the phase-1 sink to stop the job at the worst moment."""


@dataclass
class Verification:
    """The Parquet output compared with what was produced (see :func:`verify`)."""

    rows: int = 0
    deletes: int = 0
    batches: int = 0
    lost: int = 0
    """Keys inserted or deleted that the output lacks."""
    duplicated: int = 0
    """Extra copies of an insert or a delete in the output."""
    unexpected: int = 0
    """Keys in the output that were never inserted or deleted."""
    mismatched: int = 0
    """Inserted rows whose content is not what their key implies."""
    batch_ids_ok: bool = True
    """Whether the batch ids are 0, 1, 2, ... without a gap."""


@dataclass
class DemoState:
    produced: Produced | None = None
    phases: list[BatcherProgress] = field(default_factory=list)
    """The figures of each ingest phase run so far (the crashed one, the resumed one)."""
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
        return sum(p.rows for p in self.phases)

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


async def produce(producer: SampleProducer, rows: int, chunk: int, pause_s: float) -> None:
    """Insert ``rows`` rows (with deletes) in chunks, pausing ``pause_s`` between."""
    done = 0
    while done < rows:
        step = min(chunk, rows - done)
        await producer.produce_rows(step)
        done += step
        await asyncio.sleep(pause_s)


# --------------------------------------------------------------------------- ingesting


async def ingest_phase(
    spark: SparkSession,
    config: Config,
    channels: Sequence[str],
    checkpoint: Path,
    fn: Any,
    opts: DemoOptions,
    phases: list[BatcherProgress],
    label: str,
    until: Until,
) -> None:
    """Run one ingest job with ``fn`` as its sink; its figures go to ``phases`` even when
    ``fn`` raises."""
    batcher = MicroBatcher(
        spark,
        config,
        channels,
        checkpoint,
        collection=COLLECTION,
        max_rows=opts.batch_rows,
        max_interval_s=5.0,
    )
    try:
        async with BatchProgress(label).follow(batcher):
            await batcher.run(fn, until=until)
    finally:
        phases.append(batcher.progress)


# --------------------------------------------------------------------------- verifying


def verify(spark: SparkSession, out: str, produced: Produced, dim: int) -> Verification:
    """Read the Parquet back and compare it with what was produced, row by row."""
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
                    # Spark starts (in a thread) while the backlog is produced.
                    spark_started = time.perf_counter()
                    backlog = asyncio.create_task(
                        produce(producer, opts.rows - opts.live_rows, BACKLOG_CHUNK, 0)
                    )
                    spark = await asyncio.to_thread(stack.enter_context, spark_session(opts.master))
                    await asyncio.to_thread(lambda: spark.range(1).count())
                    state.spark_start_s = time.perf_counter() - spark_started
                    await backlog
                    # Looked up as it runs: a test swaps in a faulty sink.
                    sink = msgstream.bridge_spark.ParquetSink(str(out))
                    # Phase 1: ingest while the rest is produced; crash past half-way.
                    live = asyncio.create_task(
                        produce(producer, opts.live_rows, LIVE_CHUNK, LIVE_PAUSE_S)
                    )
                    crash = CrashHalfWay(sink, (opts.rows + 1) // 2, state)
                    with contextlib.suppress(SimulatedCrash):
                        await ingest_phase(
                            spark, config, channels, checkpoint, crash, opts,
                            state.phases, "phase 1", "forever",
                        )  # fmt: skip
                    await live
                    await producer.finish()
                    final_tick = producer.produced.last_tick
                    # Phase 2: resume from the checkpoint up to the final tick.
                    await ingest_phase(
                        spark, config, channels, checkpoint, sink, opts,
                        state.phases, "phase 2", final_tick,
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
    first, second = (*state.phases, BatcherProgress(), BatcherProgress())[:2]
    check = state.check
    crashed = "-" if state.crashed_batch is None else str(state.crashed_batch)
    return [
        ("channels", str(opts.channels)),
        (
            "rows: backlog / produced while ingesting",
            f"{opts.rows - opts.live_rows} / {opts.live_rows}",
        ),
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
        (
            "phase 1: batches / rows / deletes",
            f"{first.batches} / {first.insert_rows} / {first.delete_rows}",
        ),
        ("crashed batch (redone in phase 2)", crashed),
        (
            "phase 2: batches (redone) / rows / deletes",
            f"{second.batches} ({second.redone}) / {second.insert_rows} / {second.delete_rows}",
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
    opts = options_from(DemoOptions, args, timeout_s=float(args.timeout))
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
