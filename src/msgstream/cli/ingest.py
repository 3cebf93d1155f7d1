"""``msgstream ingest``: the main job -- channels into Parquet through the Spark bridge.

Reads the channels with the driver-side micro-batcher (:mod:`bridge_spark`): time-tick
aligned batches become DataFrames written by the idempotent Parquet sink (one
``batch_id=N`` directory per batch) with an atomic checkpoint, so a run that is stopped
or fails resumes where it left off and the output holds every row exactly once. By
default it ingests what is available when it starts and exits (``--follow`` keeps going).

PySpark is imported only when the command runs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from ..config import Config
from .common import (
    EXIT_FAILED,
    EXIT_OK,
    CliError,
    Subparsers,
    channel_name,
    fmt_rate,
    getattr_any,
    positive_float,
    positive_int,
    stderr_console,
    stderr_is_tty,
    stdout_console,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from msgstream.bridge_spark import BatcherProgress, MicroBatcher

CHECKPOINT_NAME = "_msgstream_checkpoint.json"
"""The checkpoint's default name inside ``--out`` (Spark ignores ``_`` names)."""
DEFAULT_MASTER = "local[2]"


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
    max_interval_s: float = 1.0
    follow: bool = False
    max_batches: int | None = None
    master: str = DEFAULT_MASTER
    spark_conf: tuple[tuple[str, str], ...] = ()

    @property
    def checkpoint_path(self) -> str:
        return self.checkpoint or str(Path(self.out) / CHECKPOINT_NAME)


def add_parser(sub: Subparsers, parent: argparse.ArgumentParser) -> None:
    parser = sub.add_parser(
        "ingest",
        parents=[parent],
        help="ingest channels into Parquet with Spark (the main job)",
        description=(
            "Read channels through the Spark bridge's micro-batcher -- batches cut at time "
            "ticks, each written as a batch_id=N directory of Parquet under --out -- with "
            "an atomic checkpoint: a stopped or failed run resumes where it left off and the "
            "output holds every row exactly once. Ingests what is available at start, then "
            "exits (or keeps going with --follow). Without --config it reads the embedded "
            "default store."
        ),
    )
    parser.add_argument("--out", required=True, metavar="DIR", help="Parquet output directory")
    parser.add_argument(
        "--channel",
        dest="channels",
        action="append",
        type=channel_name,
        metavar="C",
        help="channel to read (repeat for several; default: every channel of the store)",
    )
    parser.add_argument(
        "--collection", metavar="NAME", help="collection to ingest (default: the first found)"
    )
    parser.add_argument(
        "--schema",
        dest="schema_file",
        metavar="FILE",
        help="collection schema as JSON (CollectionSchema.to_dict()); default: read from the "
        "channels' CreateCollectionMsg",
    )
    parser.add_argument(
        "--frame",
        choices=("changes", "inserts", "deletes"),
        default="changes",
        help="rows to write: inserts and deletes with an _op column (default), or one kind",
    )
    parser.add_argument(
        "--checkpoint", metavar="FILE", help=f"checkpoint file (default: OUT/{CHECKPOINT_NAME})"
    )
    parser.add_argument(
        "--from",
        dest="start",
        default="earliest",
        metavar="WHERE",
        help="where a new job starts: 'earliest' (default), 'latest', a pack's end positions "
        "as JSON, or @FILE; ignored once a checkpoint exists",
    )
    parser.add_argument(
        "--max-rows",
        type=positive_int,
        default=100_000,
        metavar="N",
        help="close a batch once it holds N rows (at the next pack boundary; default 100000)",
    )
    parser.add_argument(
        "--max-interval",
        type=positive_float,
        default=1.0,
        metavar="SECONDS",
        help="close a batch SECONDS after its first row (default 1)",
    )
    parser.add_argument(
        "--follow", action="store_true", help="keep ingesting new data until interrupted"
    )
    parser.add_argument(
        "--max-batches", type=positive_int, metavar="N", help="stop after N batches"
    )
    parser.add_argument(
        "--master", default=DEFAULT_MASTER, help=f"Spark master (default {DEFAULT_MASTER})"
    )
    parser.add_argument(
        "--spark-conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra Spark setting (repeatable)",
    )
    parser.set_defaults(handler=handle)


def _spark_conf(values: list[str]) -> tuple[tuple[str, str], ...]:
    pairs = []
    for value in values:
        key, sep, setting = value.partition("=")
        if not sep or not key.strip():
            raise CliError(f"--spark-conf: expected KEY=VALUE, got {value!r}")
        pairs.append((key.strip(), setting))
    return tuple(pairs)


def options_from_args(args: argparse.Namespace) -> IngestOptions:
    return IngestOptions(
        out=str(args.out),
        channels=list(args.channels or []),
        collection=args.collection,
        schema_file=args.schema_file,
        frame=str(args.frame),
        checkpoint=args.checkpoint,
        start=str(args.start),
        max_rows=int(args.max_rows),
        max_interval_s=float(args.max_interval),
        follow=bool(args.follow),
        max_batches=args.max_batches,
        master=str(args.master),
        spark_conf=_spark_conf(list(args.spark_conf)),
    )


# --------------------------------------------------------------------------- Spark


@contextlib.contextmanager
def spark_session(master: str, conf: tuple[tuple[str, str], ...] = ()) -> Iterator[SparkSession]:
    """The running Spark session, or a new local one (stopped afterwards)."""
    from msgstream.bridge_spark import local_spark, register
    from msgstream.bridge_spark.session import active_spark

    active = active_spark()
    if active is not None:
        register(active)
        yield active
        return
    session = local_spark(master=master, app_name="msgstream", conf=dict(conf))
    try:
        yield session
    finally:
        session.stop()


async def default_channels(config: Config) -> list[str]:
    """Every channel of the store, for a backend that can list them."""
    from msgstream.bridge_spark.clients import open_reader

    reader = open_reader(config)
    try:
        lister = getattr_any(reader.client, "list_channels")
        if lister is None:
            raise CliError(f"backend {config.backend()!r} cannot list its channels: give --channel")
        channels: list[str] = sorted(await lister())
    finally:
        await reader.client.close()
    if not channels:
        raise CliError("the store has no channels yet: give --channel")
    return channels


def load_schema_file(path: str) -> Any:
    from msgstream.bridge_spark.options import parse_schema

    try:
        text = Path(path).expanduser().read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(f"--schema: cannot read {path}: {exc}") from None
    return parse_schema(text, option="--schema")


# --------------------------------------------------------------------------- progress


class BatchProgress:
    """A progress bar on stderr (when it is a terminal) following a batcher."""

    def __init__(self, label: str, enabled: bool | None = None) -> None:
        self.label = label
        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.percentage:>3.0f}%"),
            TextColumn("{task.fields[detail]}"),
            TimeElapsedColumn(),
            console=stderr_console(),
            transient=True,
            disable=not (stderr_is_tty() if enabled is None else enabled),
        )
        self._task: TaskID | None = None

    def update(self, progress: BatcherProgress) -> None:
        if self._task is None:
            return
        target, start = progress.target_ts, progress.start_ts
        done = 0.0
        if target is not None and target > start:
            done = min(1.0, max(0.0, (progress.end_ts - start) / (target - start)))
        rate = fmt_rate(progress.rows, progress.seconds)
        detail = (
            f"batches {progress.batches}  rows {progress.insert_rows}  "
            f"deletes {progress.delete_rows}  {rate} rows/s"
        )
        self._progress.update(
            self._task, completed=done * 100 if target is not None else 0, detail=detail
        )

    @contextlib.asynccontextmanager
    async def follow(self, batcher: MicroBatcher) -> AsyncIterator[None]:
        with self._progress:
            self._task = self._progress.add_task(self.label, total=100, detail="starting")

            async def refresh() -> None:
                while True:
                    self.update(batcher.progress)
                    await asyncio.sleep(0.2)

            task = asyncio.create_task(refresh())
            try:
                yield
            finally:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
                self.update(batcher.progress)


# --------------------------------------------------------------------------- running


def summary_table(title: str, rows: list[tuple[str, str]]) -> Table:
    table = Table(title=title, show_header=True)
    table.add_column("metric")
    table.add_column("value", justify="right")
    for name, value in rows:
        table.add_row(name, value)
    return table


async def run_ingest(
    config: Config,
    opts: IngestOptions,
    spark: SparkSession,
    fn: Callable[[Any, int], object] | None = None,
) -> BatcherProgress:
    """Run the batcher once with the Parquet sink (or ``fn``); return its figures."""
    from msgstream.bridge_spark import MicroBatcher, ParquetSink

    channels = opts.channels or await default_channels(config)
    schema = load_schema_file(opts.schema_file) if opts.schema_file else None
    batcher = MicroBatcher(
        spark,
        config,
        channels,
        opts.checkpoint_path,
        collection=opts.collection,
        schema=schema,
        frame=opts.frame,
        max_rows=opts.max_rows,
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
    from pyspark.errors import PySparkException

    started = time.perf_counter()
    try:
        with spark_session(opts.master, opts.spark_conf) as spark:
            progress = await run_ingest(config, opts, spark)
    except PySparkException as exc:
        message = " ".join(str(exc).split())
        stderr_console().print(f"error: spark: {message}", markup=False)
        return EXIT_FAILED
    elapsed = time.perf_counter() - started
    rate = fmt_rate(progress.rows, progress.seconds)
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
