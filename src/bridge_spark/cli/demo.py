"""``msgstream demo``: the end-to-end showcase -- produce, ingest with Spark, crash,
resume, read back and verify row by row.

1. A sample collection (int64 key ``pk``, float vector ``vec``, string ``text``, JSON
   ``meta``; every value derived from the key) is created on 4 channels, and a backlog of
   inserts and deletes (11/12 of the rows) is produced with time ticks
   (``msgstream.bridge_spark.data.workload``) while Spark starts in a thread, set up for a
   short run (:data:`~bridge_spark.session.SHORT_RUN_CONF`), its JVM's output in a log
   file (whose end is printed if the demo fails with an error or times out; ``-v`` lets
   that output through to stderr instead).
2. Ingestion (the ``msgstream ingest`` job: the driver-side micro-batcher writing
   idempotent Parquet) works through the backlog while the last rows are produced. Once
   at least half the rows are committed, the next batch *crashes* after its Parquet
   files were written but before its checkpoint commit -- the worst moment.
3. A new job resumes from the checkpoint: it redoes the crashed batch with the same
   ``batch_id`` (replacing its files) and ingests the rest, up to the final time tick.
4. Spark reads the Parquet back. Every produced insert and delete must be there exactly
   once, with the content its key implies; the last line reports
   ``demo: rows=<n> deletes=<n> batches=<n> lost=0 duplicated=0 rows_per_s=<n>`` and the
   exit code is 1 on any loss, duplicate, mismatch or timeout. ``rows_per_s`` is the
   ingest jobs' throughput: the rows (inserted and deleted) they wrote over the time they
   ran; a backlog ahead of them keeps that from measuring the producer's pace.

Each phase prints one line as it ends (:class:`PhaseLog`), so the demo says what it has
done while it runs; the rows are tens of thousands, enough for several batches on each
side of the crash, few enough that Spark's fixed costs are most of the run.

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
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import msgstream.bridge_spark
from msgstream.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    CliError,
    fmt_rate,
    options_from,
    stderr_console,
    stdout_console,
)
from msgstream.configuration.config import Config, MqConfig
from msgstream.configuration.plugins import fallback_backend
from msgstream.runtime.scope import cancel_and_wait, finish_in_thread
from msgstream.streams.factory import MsgStreamFactory

from ..data.batcher import BatcherProgress, BatchInfo, MicroBatcher, Until
from ..data.workload import Produced, SampleProducer
from ..session import SHORT_RUN_CONF
from .commands import DEFAULT_MASTER, DEMO_BATCH_ROWS, DEMO_ROWS
from .ingest import BatchProgress, spark_session, summary_table

COLLECTION = "demo"
LIVE_SHARE = 12
"""One row in this many is produced while ingesting; the rest is a backlog before it."""
BACKLOG_CHUNK = 10_000
ROWS_PER_INSERT = (20, 60)
"""The rows of one insert message, at least and at most; a delete follows every insert.
Most of the demo's producing and reading is per message, so fewer, larger messages leave
the cores to Spark's start."""
LIVE_CHUNK, LIVE_PAUSE_S = 500, 0.05
"""The live rows come in chunks with a pause between, as a service would send them."""
PHASES = 5
"""Backlog, Spark's start, the job that crashes, the job that resumes, the read-back."""
SPARK_LOG_LINES = 40
"""How much of the end of Spark's output a failed demo prints."""


@dataclass(frozen=True)
class DemoOptions:
    channels: int = 4
    rows: int = DEMO_ROWS
    batch_rows: int = DEMO_BATCH_ROWS
    path: str | None = None
    keep: bool = False
    timeout_s: float = 300.0
    seed: int | None = None
    master: str = DEFAULT_MASTER
    quiet: bool = True
    """Spark's output (JVM start-up, log4j's console) goes to a log file, not stderr."""

    @property
    def live_rows(self) -> int:
        """Rows produced while the first ingest job runs; the rest is the backlog."""
        return self.rows // LIVE_SHARE

    @property
    def backlog_rows(self) -> int:
        return self.rows - self.live_rows


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
    """Keys in the output that were never inserted or deleted, and rows that are neither
    an insert nor a delete."""
    mismatched: int = 0
    """Inserted rows whose content is not what their key implies (or is missing)."""
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
    """The Parquet sink of phase 1: once at least ``half`` the rows are committed, the
    next batch writes its files, then raises before the batcher can commit it.

    The committed rows come from the batcher (:meth:`committed_batch` is its ``on_batch``)
    rather than a count of each DataFrame, which would be one more Spark job a batch."""

    def __init__(self, sink: Any, half: int, state: DemoState) -> None:
        self.sink = sink
        self.half = half
        self.state = state
        self.committed = 0

    def committed_batch(self, info: BatchInfo) -> None:
        self.committed += info.rows

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        self.sink(df, batch_id)
        if self.committed >= self.half:
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
    on_batch: Callable[[BatchInfo], None] | None = None,
) -> None:
    """Run one ingest job with ``fn`` as its sink (and ``on_batch`` told of each batch it
    commits); its figures go to ``phases`` even when ``fn`` raises."""
    batcher = MicroBatcher(
        spark,
        config,
        channels,
        checkpoint,
        collection=COLLECTION,
        max_rows=opts.batch_rows,
        max_interval_s=5.0,
        on_batch=on_batch,
    )
    try:
        async with BatchProgress(label).follow(batcher):
            await batcher.run(fn, until=until)
    finally:
        phases.append(batcher.progress)


# --------------------------------------------------------------------------- verifying


def verify(spark: SparkSession, out: str, produced: Produced, dim: int) -> Verification:
    """Read the Parquet back and compare it with what was produced, row by row (one scan:
    the keys, and whether each insert's content is what its key implies)."""
    pk = F.col("pk")
    differs = (
        (F.col("text") != F.concat(F.lit("row-"), pk.cast("string")))
        | (F.size("vec") != dim)
        | (F.col("vec")[0] != pk.cast("float"))
        | (F.col("vec")[dim - 1] != (pk + F.lit((dim - 1) / 8)).cast("float"))
        | (F.col("meta").isNull() != (pk % 7 == 0))
        | (F.coalesce(F.get_json_object("meta", "$.pk").cast("long"), pk) != pk)
    )
    # A comparison with a missing value is unknown (null): that content is wrong too.
    wrong = (F.col("_op") == "insert") & F.coalesce(differs, F.lit(True))
    rows = (
        spark.read.parquet(out)
        .select("_op", "pk", "batch_id", wrong.alias("wrong"))
        .toArrow()
        .to_pydict()
    )
    check = Verification()
    ops, keys = rows["_op"], rows["pk"]
    inserted = Counter(k for op, k in zip(ops, keys, strict=True) if op == "insert")
    deleted = Counter(k for op, k in zip(ops, keys, strict=True) if op == "delete")
    for found, expected in (
        (inserted, Counter(produced.inserted)),
        (deleted, Counter(produced.deleted)),
    ):
        check.lost += sum(1 for key in expected if key not in found)
        check.duplicated += sum(n - 1 for n in found.values() if n > 1)
        check.unexpected += sum(1 for key in found if key not in expected)
    check.unexpected += sum(1 for op in ops if op not in ("insert", "delete"))
    check.rows = sum(inserted.values())
    check.deletes = sum(deleted.values())
    batch_ids = sorted(set(rows["batch_id"]))
    check.batches = len(batch_ids)
    check.batch_ids_ok = batch_ids == list(range(len(batch_ids)))
    check.mismatched = sum(1 for w in rows["wrong"] if w)
    return check


# --------------------------------------------------------------------------- running


class PhaseLog:
    """One line per phase on stdout as it ends, ``demo: [k/n] <what> in <s>s``, numbered
    in the order the phases end (the backlog and Spark's start run side by side)."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.ended = 0

    @staticmethod
    def say(text: str) -> None:
        print(f"demo: {text}", flush=True)

    def phase_ended(self, text: str, began: float) -> None:
        self.ended += 1
        seconds = time.perf_counter() - began
        self.say(f"[{self.ended}/{self.total}] {text} in {seconds:.1f}s")


@contextlib.asynccontextmanager
async def spark_starting(
    opts: DemoOptions, spark_log: Path | None, state: DemoState, log: PhaseLog
) -> AsyncIterator[asyncio.Task[SparkSession]]:
    """Spark starting in a thread while the block runs (the task gives the session), with
    its JVM's output in ``spark_log`` when one is given; stopped afterwards, once started,
    if it was started here."""
    began = time.perf_counter()
    with contextlib.ExitStack() as stack:
        jvm_stderr = None if spark_log is None else stack.enter_context(spark_log.open("ab"))
        # The micro-batcher needs no streaming source: no source, no data source lookup.
        session = spark_session(
            opts.master, tuple(SHORT_RUN_CONF.items()), jvm_stderr, source=False
        )

        async def start() -> SparkSession:
            spark: SparkSession = await finish_in_thread(stack.enter_context, session)
            state.spark_start_s = time.perf_counter() - began
            log.phase_ended(f"started Spark master={opts.master}", began)
            return spark

        task = asyncio.ensure_future(start())
        try:
            yield task
        finally:
            await asyncio.wait({task})  # a session still starting is stopped once it is up
            if not task.cancelled():
                task.exception()  # raised to the block if it awaited the task; else dropped
            await finish_in_thread(stack.close)


async def run_demo(
    config: Config, opts: DemoOptions, workdir: Path, run_id: str, log: PhaseLog
) -> DemoState:
    state = DemoState()
    channels = [f"demo-{run_id}-{i}" for i in range(opts.channels)]
    out = workdir / f"demo-{run_id}-parquet"
    checkpoint = workdir / f"demo-{run_id}-checkpoint.json"
    spark_log = spark_log_path(opts, workdir, run_id)
    started = time.perf_counter()
    try:
        async with (
            asyncio.timeout(opts.timeout_s),
            spark_starting(opts, spark_log, state, log) as spark_started,
            MsgStreamFactory(config).new_msgstream() as stream,
        ):
            await stream.as_producer(channels)
            producer = SampleProducer(
                stream, seed=opts.seed, rows_per_insert=ROWS_PER_INSERT, delete_every=1
            )
            state.produced = producer.produced
            await producer.create_collection()
            began = time.perf_counter()
            await produce(producer, opts.backlog_rows, BACKLOG_CHUNK, 0)
            log.phase_ended(
                f"produced a backlog: rows={opts.backlog_rows} "
                f"deletes={len(producer.produced.deleted)} channels={opts.channels}",
                began,
            )
            spark = await spark_started
            # Looked up as it runs: a test swaps in a faulty sink.
            sink = msgstream.bridge_spark.ParquetSink(str(out))
            # Phase 1: ingest while the rest is produced; crash past half-way.
            began = time.perf_counter()
            live = asyncio.create_task(produce(producer, opts.live_rows, LIVE_CHUNK, LIVE_PAUSE_S))
            try:
                crash = CrashHalfWay(sink, (opts.rows + 1) // 2, state)
                with contextlib.suppress(SimulatedCrash):
                    await ingest_phase(
                        spark, config, channels, checkpoint, crash, opts,
                        state.phases, "phase 1", "forever", crash.committed_batch,
                    )  # fmt: skip
                await live
            finally:
                if not live.done():
                    await cancel_and_wait(live)
            first = state.phases[0]
            log.phase_ended(
                f"ingest job 1: batches={first.batches} rows={first.insert_rows} "
                f"deletes={first.delete_rows} while {opts.live_rows} more rows were produced, "
                f"then batch {state.crashed_batch} crashed between its write and its commit",
                began,
            )
            await producer.finish()
            final_tick = producer.produced.last_tick
            # Phase 2: resume from the checkpoint up to the final tick.
            began = time.perf_counter()
            await ingest_phase(
                spark, config, channels, checkpoint, sink, opts,
                state.phases, "phase 2", final_tick,
            )  # fmt: skip
            second = state.phases[1]
            log.phase_ended(
                f"ingest job 2 resumed: batches={second.batches} (redone={second.redone}) "
                f"rows={second.insert_rows} deletes={second.delete_rows}",
                began,
            )
            began = time.perf_counter()
            state.check = check = await finish_in_thread(
                verify, spark, str(out), producer.produced, producer.dim
            )
            log.phase_ended(
                f"read back: rows={check.rows} deletes={check.deletes} batches={check.batches} "
                f"lost={check.lost} duplicated={check.duplicated} "
                f"unexpected={check.unexpected} mismatched={check.mismatched}",
                began,
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
            f"{opts.backlog_rows} / {opts.live_rows}",
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
    """The configuration the demo runs on: the given one (with ``--path`` as its embedded
    store's directory), or the embedded store (rocksmq) in ``store_dir``."""
    if store_dir is None:
        return config
    backend, key = embedded_store()
    run = config.with_values({backend: {key: str(store_dir / "store")}})
    return run if explicit_config else run.replace(mq=MqConfig(type=backend))


def embedded_store() -> tuple[str, str]:
    """The backend the demo makes a throwaway store of -- the one ``mq.type: default``
    falls back to, which keeps its channels in a directory -- and its directory's key."""
    spec = fallback_backend()
    if spec is None or spec.directory_key is None:
        raise CliError(
            "no backend keeps its channels in a local directory (BackendSpec.directory_key) "
            "that a throwaway store could be made in: give --config"
        )
    return spec.name, spec.directory_key


def spark_log_path(opts: DemoOptions, workdir: Path, run_id: str) -> Path | None:
    """Where Spark's output goes (None: to stderr, with ``-v``)."""
    return workdir / f"demo-{run_id}-spark.log" if opts.quiet else None


def show_spark_log(path: Path | None) -> None:
    """The end of Spark's output (hidden while the demo ran), for a demo that failed with
    an error or timed out: Spark's own words on what went wrong, if it has any."""
    if path is None or not path.is_file():
        return
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()[-SPARK_LOG_LINES:]
    if lines:
        print(f"the last {len(lines)} lines of Spark's output:", file=sys.stderr)
        print("\n".join(lines), file=sys.stderr, flush=True)


def demo_options(args: argparse.Namespace) -> DemoOptions:
    """The options; ``-v`` lets Spark's output through to stderr."""
    return options_from(
        DemoOptions, args, timeout_s=float(args.timeout), quiet=not int(args.verbose)
    )


async def handle(config: Config, args: argparse.Namespace) -> int:
    opts = demo_options(args)
    explicit = args.config is not None or bool(os.environ.get("MSGSTREAM_CONFIG"))
    needs_store = not explicit or opts.path is not None
    log = PhaseLog(PHASES)
    run_id = secrets.token_hex(3)
    with _workdir(opts) as workdir:
        run_config = demo_config(config, explicit, workdir if needs_store else None)
        backend = run_config.backend()
        hidden = " (Spark's own output hidden: -v shows it)" if opts.quiet else ""
        log.say(
            f"producing {opts.rows} rows on {opts.channels} {backend} channels and ingesting "
            f"them with Spark{hidden}"
        )
        spark_log = spark_log_path(opts, workdir, run_id)
        try:
            state = await run_demo(run_config, opts, workdir, run_id, log)
        except Exception:
            show_spark_log(spark_log)
            raise
        if state.timed_out:
            show_spark_log(spark_log)
    out = stdout_console()
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
