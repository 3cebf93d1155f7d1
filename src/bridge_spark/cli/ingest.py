"""``msgstream ingest``: the main job -- channels into Parquet through the Spark bridge.

Reads the channels with the driver-side micro-batcher (:mod:`msgstream.bridge_spark`):
time-tick aligned batches become DataFrames written by the idempotent Parquet sink (one
``batch_id=N`` directory per batch) with an atomic checkpoint, so a run that is stopped
or fails resumes where it left off and the output holds every row exactly once. By
default it ingests what is available when it starts and exits (``--follow`` keeps going).

Imported (with PySpark) only when ``ingest`` or ``demo`` runs; the options are declared in
:mod:`.commands`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import orjson
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession
from rich.progress import BarColumn, TaskID, TextColumn
from rich.table import Table

from msgstream.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    CliError,
    fmt_rate,
    new_table,
    options_from,
    stderr_console,
    stderr_progress,
    stdout_console,
)
from msgstream.cli.json_rows import read_schema_file
from msgstream.configuration.config import Config
from msgstream.contract.backend import AdminClient
from msgstream.runtime.scope import cancel_and_wait
from msgstream.wire.schema import CollectionSchema
from msgstream.wire.tso import parse_ts

from ..data.batcher import BatcherProgress, MicroBatcher
from ..data.checkpoint import check_matches, load_checkpoint
from ..data.clients import open_reader
from ..data.frames import FrameKind, FrameSchema
from ..data.offsets import parse_start
from ..data.options import parse_channels
from ..data.schema_lookup import find_collection_schema
from ..data.sink import ParquetSink
from ..data.source import register
from ..session import active_spark, local_spark
from .commands import CHECKPOINT_NAME, DEFAULT_MASTER


@dataclass(frozen=True)
class IngestOptions:
    out: str
    channels: list[str]
    collection: str | None = None
    schema_file: str | None = None
    frame: str = "changes"
    checkpoint: str | None = None
    start: str = "earliest"
    max_rows: int = 100_000
    first_batch_rows: int | None = None
    max_interval_s: float = 1.0
    follow: bool = False
    max_batches: int | None = None
    master: str = DEFAULT_MASTER
    spark_conf: tuple[tuple[str, str], ...] = ()
    json: bool = False

    @property
    def checkpoint_path(self) -> str:
        return self.checkpoint or str(Path(self.out) / CHECKPOINT_NAME)


def _spark_conf(values: list[str]) -> tuple[tuple[str, str], ...]:
    pairs = []
    for value in values:
        key, sep, setting = value.partition("=")
        if not sep or not key.strip():
            raise CliError(f"--spark-conf: expected KEY=VALUE, got {value!r}")
        pairs.append((key.strip(), setting))
    return tuple(pairs)


def options_from_args(args: argparse.Namespace) -> IngestOptions:
    first, most = args.first_batch_rows, args.max_rows
    if first is not None and first > most:
        raise CliError(f"--first-batch-rows: must be at most --max-rows ({most}), got {first}")
    return options_from(
        IngestOptions,
        args,
        channels=list(args.channels or []),
        max_interval_s=float(args.max_interval),
        spark_conf=_spark_conf(list(args.spark_conf)),
    )


# --------------------------------------------------------------------------- Spark


@contextlib.contextmanager
def spark_session(
    master: str,
    conf: tuple[tuple[str, str], ...] = (),
    jvm_stderr: IO[Any] | None = None,
    source: bool = True,
) -> Iterator[SparkSession]:
    """The running Spark session, or a new local one (stopped afterwards), with the
    ``msgstream`` source registered unless not ``source`` (see
    :func:`~bridge_spark.session.local_spark` for ``jvm_stderr`` and ``source``)."""
    active = active_spark()
    if active is not None:
        if source:
            register(active)
        yield active
        return
    session = local_spark(
        master=master,
        app_name="msgstream",
        conf=dict(conf),
        jvm_stderr=jvm_stderr,
        source=source,
    )
    try:
        yield session
    finally:
        session.stop()


async def default_channels(config: Config) -> list[str]:
    """Every channel of the store, for a backend that can list them."""
    reader = open_reader(config)
    try:
        if not isinstance(reader.client, AdminClient):
            raise CliError(f"backend {config.backend()!r} cannot list its channels: give --channel")
        channels = sorted(await reader.client.list_channels())
    finally:
        await reader.client.close()
    if not channels:
        raise CliError("the store has no channels yet: give --channel")
    return channels


@dataclass(frozen=True)
class Prepared:
    """What an ingest run reads, settled before Spark starts."""

    channels: list[str]
    schema: CollectionSchema


async def prepare(config: Config, opts: IngestOptions) -> Prepared:
    """Every check that needs no Spark, before Spark's start-up: the channels exist (or
    the store lists some), ``--from`` parses, the schema is readable (``--schema``) or
    found in the channels, the frame can be built from it (``changes`` needs a primary
    key), and an existing checkpoint was written for these channels and collection."""
    channels = list(parse_channels(opts.channels or await default_channels(config), "--channel"))
    parse_start(opts.start, channels, "--from")
    if opts.schema_file:
        schema = read_schema_file(opts.schema_file)
    else:
        schema = await find_collection_schema(config, channels, opts.collection)
    FrameSchema(schema, FrameKind.parse(opts.frame, "--frame"))
    state = load_checkpoint(opts.checkpoint_path)
    if state is not None:
        check_matches(state, opts.checkpoint_path, channels, schema.name)
    return Prepared(channels, schema)


# --------------------------------------------------------------------------- progress


def describe_progress(progress: BatcherProgress, now_ms: int) -> tuple[float | None, str]:
    """What the progress bar shows: the share of the run committed (None when the run has
    no end, ``--follow``), and a line of committed figures, rows read ahead and, without
    an end, how far the committed data lags the wall clock.

    The share is of time-tick range from the start to the run's end tick, measured at the
    last committed batch (not at what was read ahead, which ran to 100 % long before
    anything was written)."""
    target, start = progress.target_ts, progress.start_ts
    done: float | None = None
    if target is not None:
        span = target - start
        done = 1.0 if span <= 0 else min(1.0, max(0.0, (progress.committed_ts - start) / span))
    rate = fmt_rate(progress.rows, progress.seconds)
    parts = [
        f"committed: batches {progress.batches}",
        f"rows {progress.insert_rows}",
        f"deletes {progress.delete_rows}",
        f"{rate} rows/s",
        f"in flight {max(0, progress.read_rows - progress.rows)} rows",
    ]
    if target is None and progress.committed_ts > 0:
        behind_s = max(0, now_ms - parse_ts(progress.committed_ts)[0]) / 1000
        parts.append(f"{behind_s:.1f} s behind")
    return done, "  ".join(parts)


class BatchProgress:
    """A progress bar on stderr (when it is a terminal) following a batcher."""

    def __init__(self, label: str, enabled: bool | None = None) -> None:
        self.label = label
        self._progress = stderr_progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.fields[share]}"),
            TextColumn("{task.fields[detail]}"),
            enabled=enabled,
        )
        self._task: TaskID | None = None

    def update(self, progress: BatcherProgress) -> None:
        if self._task is None:
            return
        done, detail = describe_progress(progress, int(time.time() * 1000))
        self._progress.update(
            self._task,
            completed=0 if done is None else done * 100,
            total=None if done is None else 100,
            share="" if done is None else f"{done * 100:>3.0f}%",
            detail=detail,
        )

    @contextlib.asynccontextmanager
    async def follow(self, batcher: MicroBatcher) -> AsyncIterator[None]:
        with self._progress:
            self._task = self._progress.add_task(self.label, total=100, share="", detail="starting")

            async def refresh() -> None:
                while True:
                    self.update(batcher.progress)
                    await asyncio.sleep(0.2)

            task = asyncio.create_task(refresh())
            try:
                yield
            finally:
                await cancel_and_wait(task)
                self.update(batcher.progress)


# --------------------------------------------------------------------------- running


def summary_table(title: str, rows: list[tuple[str, str]]) -> Table:
    table = new_table(title, [("metric", "left"), ("value", "right")])
    for name, value in rows:
        table.add_row(name, value)
    return table


async def run_ingest(
    config: Config,
    opts: IngestOptions,
    spark: SparkSession,
    fn: Callable[[Any, int], object] | None = None,
    prepared: Prepared | None = None,
) -> BatcherProgress:
    """Run the batcher once with the Parquet sink (or ``fn``); return its figures."""
    ready = prepared or await prepare(config, opts)
    batcher = MicroBatcher(
        spark,
        config,
        ready.channels,
        opts.checkpoint_path,
        collection=ready.schema.name,
        schema=ready.schema,
        frame=opts.frame,
        max_rows=opts.max_rows,
        first_batch_rows=opts.first_batch_rows,
        max_interval_s=opts.max_interval_s,
        start=opts.start,
    )
    sink = fn or ParquetSink(opts.out)
    async with BatchProgress("ingest").follow(batcher):
        return await batcher.run(
            sink,
            until="forever" if opts.follow else "available_now",
            max_batches=opts.max_batches,
        )


async def handle(config: Config, args: argparse.Namespace) -> int:
    opts = options_from_args(args)
    started = time.perf_counter()
    prepared = await prepare(config, opts)
    try:
        with spark_session(opts.master, opts.spark_conf) as spark:
            progress = await run_ingest(config, opts, spark, prepared=prepared)
    except PySparkException as exc:
        message = " ".join(str(exc).split())
        stderr_console().print(f"error: spark: {message}", markup=False)
        return EXIT_FAILED
    elapsed = time.perf_counter() - started
    rate = fmt_rate(progress.rows, progress.seconds)
    if opts.json:
        summary = {
            "backend": config.backend(),
            "batches": progress.batches,
            "redone": progress.redone,
            "last_batch_id": progress.last_batch_id,
            "insert_rows": progress.insert_rows,
            "delete_rows": progress.delete_rows,
            "packs": progress.packs,
            "stopped": progress.stopped,
            "ingest_seconds": round(progress.seconds, 6),
            "total_seconds": round(elapsed, 6),
            "rows_per_s": round(progress.rows / progress.seconds, 1) if progress.seconds else None,
            "output": opts.out,
            "checkpoint": str(opts.checkpoint_path),
        }
        print(orjson.dumps(summary).decode(), flush=True)
        return EXIT_OK
    rows = [
        ("backend", config.backend()),
        ("batches (redone)", f"{progress.batches} ({progress.redone})"),
        ("last batch id", "-" if progress.last_batch_id is None else str(progress.last_batch_id)),
        ("rows inserted / deleted", f"{progress.insert_rows} / {progress.delete_rows}"),
        ("packs", str(progress.packs)),
        ("stopped", progress.stopped or "-"),
        ("ingest elapsed (s)", f"{progress.seconds:.2f}"),
        ("total elapsed (s)", f"{elapsed:.2f}"),
        ("rows/s", str(rate)),
        ("output", opts.out),
        ("checkpoint", opts.checkpoint_path),
    ]
    stdout_console().print(summary_table("msgstream ingest", rows))
    print(
        f"ingest: rows={progress.insert_rows} deletes={progress.delete_rows} "
        f"batches={progress.batches} rows_per_s={rate}",
        flush=True,
    )
    return EXIT_OK
