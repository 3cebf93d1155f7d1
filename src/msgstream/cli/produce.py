"""``msgstream produce``: synthetic rows (``--count``) or JSON lines from stdin."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import os
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn

from ..configuration.config import Config
from ..contract.backend import Client
from ..streams.emitter import TimeTickEmitter
from ..streams.factory import MsgStreamFactory
from ..streams.routing import hash_int64, hash_primary_keys, hash_str
from ..streams.schema_lookup import find_collection_schema, schema_difference
from ..streams.stream import MsgStream
from ..wire.messages import CreateCollectionMsg, InsertMsg, TsMsg
from ..wire.pack import MsgPack
from ..wire.schema import CollectionSchema, DataType, FieldData, FieldSchema
from .command import Command
from .common import (
    CliError,
    add_channel_option,
    add_flag,
    add_json_option,
    add_option,
    fmt_rate,
    non_negative_int,
    positive_int,
    stderr_console,
    stderr_progress,
)
from .json_rows import RowColumns, RowMismatch, infer_schema, read_schema_file
from .row_lines import (
    TEXT_FIELD,
    BadLines,
    InvalidLineError,
    LineAt,
    RowLines,
    add_skip_invalid_option,
    stdin_lines,
)

SYNTHETIC_DIM = 8
DEFAULT_COLLECTION = "msgstream_cli"


@dataclass(frozen=True)
class ProduceOptions:
    channels: list[str]
    count: int | None
    collection: str
    key: str | None
    batch: int
    ticks: bool
    start_id: int
    source_id: int
    json: bool = False
    schema: CollectionSchema | None = None
    """The --schema of stdin rows (read before anything connects)."""
    schema_file: str | None = None
    create_collection: bool = True
    skip_invalid: bool = False
    as_text: bool = False


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Produce one-row InsertMsgs, routed to the channels by the hash of a key, after a
    CreateCollectionMsg announcing the collection's schema on every channel (so
    `msgstream ingest` can read them). With --count N, N synthetic rows (id int64 primary
    key, vec float_vector[8], text varchar); otherwise one row per stdin line, a JSON
    object (--text: the line as field 'text'; blank lines are skipped). Rows must fit the
    schema the channels already declare for the collection (a CreateCollectionMsg on
    them), which --schema must then equal; else --schema; else the schema inferred from
    the first row (primary key: the --key field, else 'id'). A line that is not a JSON
    object or does not fit stops the command (exit 2) naming its line and column, with
    the rows before it sent and nothing of it; --skip-invalid skips such lines instead,
    counts and names them (skipped=N) and exits 1. A TimeTickEmitter stamps every message
    and broadcasts time ticks (interval msgstream.tick_interval_s) plus a final tick,
    unless --no-ticks."""
    add_channel_option(
        parser,
        "producer channel (repeat for several; routing bucket i goes to the i-th)",
        required=True,
    )
    add_option(parser, "--count", "N", "produce N synthetic rows", type=non_negative_int)
    add_option(
        parser, "--collection", "NAME",
        f"collection name (default: the --schema's, else {DEFAULT_COLLECTION})",
    )  # fmt: skip
    add_option(
        parser, "--key", "FIELD", "field whose value (int or str) is hashed for routing "
        "(default: the row id)",
    )  # fmt: skip
    add_option(
        parser, "--batch", "B", "messages per produce call (default 100)",
        type=positive_int, default=100,
    )  # fmt: skip
    add_flag(parser, "--no-ticks", "send no time ticks (plain MsgStream consumers)")
    add_option(
        parser, "--start-id", "ID", "first row id (and synthetic primary key); default 0",
        type=non_negative_int, default=0,
    )  # fmt: skip
    add_option(
        parser, "--source-id", "ID", "source_id of the messages (default: the process id)",
        type=int,
    )  # fmt: skip
    add_option(
        parser, "--schema", "FILE",
        "collection schema for stdin rows, as JSON (what `msgstream schema` prints); "
        "default: the one the channels declare, else inferred from the first row",
        dest="schema_file",
    )  # fmt: skip
    add_flag(
        parser, "--no-create-collection",
        "do not write the collection's CreateCollectionMsg first (the channels carry it)",
    )  # fmt: skip
    add_flag(parser, "--text", f"each stdin line is the string field {TEXT_FIELD!r} of a row")
    add_skip_invalid_option(parser)
    add_json_option(
        parser, "print the summary as one JSON object (messages, batches, skipped, "
        "skipped_lines, channels, ticks, seconds, msgs_per_s)",
    )  # fmt: skip


def options_from_args(args: argparse.Namespace) -> ProduceOptions:
    source_id = args.source_id if args.source_id is not None else os.getpid()
    schema = read_schema_file(args.schema_file) if args.schema_file else None
    collection = args.collection or (schema.name if schema else DEFAULT_COLLECTION)
    if schema is not None and collection != schema.name:
        raise CliError(
            f"--collection {collection!r}: the --schema file describes collection {schema.name!r}"
        )
    return ProduceOptions(
        channels=list(args.channels),
        count=args.count,
        collection=collection,
        key=args.key,
        batch=int(args.batch),
        ticks=not args.no_ticks,
        start_id=int(args.start_id),
        source_id=int(source_id),
        json=bool(args.json),
        schema=schema,
        schema_file=args.schema_file,
        create_collection=not args.no_create_collection,
        skip_invalid=bool(args.skip_invalid),
        as_text=bool(args.text),
    )


async def handle(config: Config, args: argparse.Namespace) -> int:
    opts = options_from_args(args)
    if len(set(opts.channels)) != len(opts.channels):
        raise CliError(f"--channel: duplicate channels in {opts.channels}")
    if opts.count is not None:
        stdin_only = {"--schema": opts.schema, "--text": opts.as_text}
        stdin_only["--skip-invalid"] = opts.skip_invalid
        for flag, given in stdin_only.items():
            if given:
                raise CliError(
                    f"{flag}: --count rows have their own schema; {flag} is for stdin rows"
                )
    return await run_produce(config, opts)


COMMAND = Command.documented(
    "produce",
    "produce InsertMsgs (synthetic or JSON lines from stdin)",
    add_arguments,
    handle,
)


# --------------------------------------------------------------------------- rows


def synthetic_schema(collection: str) -> CollectionSchema:
    """The schema of ``--count`` rows."""
    return CollectionSchema(
        collection,
        (
            FieldSchema("id", DataType.INT64, is_primary=True),
            FieldSchema("vec", DataType.FLOAT_VECTOR, dim=SYNTHETIC_DIM),
            FieldSchema("text", DataType.VARCHAR),
        ),
    )


def key_hash(row: dict[str, Any], key: str, at: LineAt) -> int:
    """The routing hash of the row's --key field; :class:`InvalidLineError` if it has
    none that hashes."""
    if key not in row:
        raise InvalidLineError(at, f"the row has no field {key!r} to route by (--key)")
    value = row[key]
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise InvalidLineError(
            at, f"--key field {key!r} must be an int or a str, got {type(value).__name__}"
        )
    try:
        return hash_str(value) if isinstance(value, str) else hash_int64(value)
    except (TypeError, ValueError) as exc:
        raise InvalidLineError(at, f"cannot hash --key field {key!r}: {exc}") from None


class _Stamper:
    """Builds the one-row InsertMsgs of a batch, each with its own emitter timestamp."""

    def __init__(self, opts: ProduceOptions) -> None:
        self.opts = opts
        self.next_row_id = opts.start_id

    def row_ids(self, count: int) -> np.ndarray[Any, np.dtype[np.int64]]:
        first = self.next_row_id
        self.next_row_id += count
        return np.arange(first, first + count, dtype=np.int64)

    def message(self, ts: int, row_id: int, hash_key: int, fields: list[FieldData]) -> InsertMsg:
        return InsertMsg(
            msg_id=ts,
            timestamp=ts,
            source_id=self.opts.source_id,
            hash_keys=[hash_key],
            collection_name=self.opts.collection,
            row_ids=np.array([row_id], dtype=np.int64),
            fields=fields,
        )


def synthetic_batch(
    stamper: _Stamper, timestamps: Sequence[int], rng: np.random.Generator
) -> list[TsMsg]:
    count = len(timestamps)
    ids = stamper.row_ids(count)
    vectors = rng.random((count, SYNTHETIC_DIM), dtype=np.float32)
    key = stamper.opts.key
    if key in (None, "id"):
        hashes = hash_primary_keys(ids)
    elif key == "text":
        hashes = hash_primary_keys([f"row-{i}" for i in ids.tolist()])
    else:
        raise CliError(f"--key {key!r}: synthetic rows can be routed by 'id' or 'text' only")
    msgs: list[TsMsg] = []
    for i, ts in enumerate(timestamps):
        pk = int(ids[i])
        fields = [
            FieldData("id", DataType.INT64, ids[i : i + 1]),
            FieldData("vec", DataType.FLOAT_VECTOR, vectors[i : i + 1], dim=SYNTHETIC_DIM),
            FieldData("text", DataType.VARCHAR, [f"row-{pk}"]),
        ]
        msgs.append(stamper.message(ts, pk, hashes[i], fields))
    return msgs


def json_batch(
    stamper: _Stamper, timestamps: Sequence[int], rows: Sequence[tuple[int | None, list[FieldData]]]
) -> list[TsMsg]:
    """InsertMsgs of rows already checked against the schema: ``(hash of --key or None,
    columns)`` each; without --key the row id is hashed."""
    ids = stamper.row_ids(len(rows))
    default_hashes = hash_primary_keys(ids) if stamper.opts.key is None else []
    msgs: list[TsMsg] = []
    for i, (ts, (hash_key, fields)) in enumerate(zip(timestamps, rows, strict=True)):
        key = default_hashes[i] if hash_key is None else hash_key
        msgs.append(stamper.message(ts, int(ids[i]), key, fields))
    return msgs


# --------------------------------------------------------------------------- stdin


class StdinLines:
    """Lines of a stream (bytes or text) read by a daemon thread, handed to the event loop.

    A blocking ``readline`` in the loop would stop the time ticks while waiting for
    input; an executor thread would make ``asyncio.run`` wait for it on Ctrl-C.
    """

    def __init__(self, stream: Iterable[str | bytes], *, limit: int = 4096) -> None:
        self._stream = stream
        self._queue: asyncio.Queue[str | bytes | None] = asyncio.Queue()
        self._room = threading.Semaphore(limit)
        self._stop = threading.Event()
        self._loop = asyncio.get_running_loop()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="msgstream-stdin", daemon=True)
        self._thread.start()

    def _put(self, item: str | bytes | None) -> bool:
        try:
            self._loop.call_soon_threadsafe(self._queue.put_nowait, item)
        except RuntimeError:  # the loop is closed
            return False
        return True

    def _run(self) -> None:
        try:
            for line in self._stream:
                while not self._room.acquire(timeout=0.2):
                    if self._stop.is_set():
                        return
                if self._stop.is_set() or not self._put(line):
                    return
        except (OSError, ValueError, UnicodeDecodeError) as exc:
            self._error = exc
        self._put(None)

    def close(self) -> None:
        self._stop.set()

    async def batches(self, size: int) -> AsyncIterator[list[str | bytes]]:
        """Batches of up to ``size`` lines: waits for one, takes what else is there."""
        done = False
        while not done:
            first = await self._queue.get()
            self._room.release()
            if first is None:
                break
            batch: list[str | bytes] = [first]
            while len(batch) < size and not self._queue.empty():
                item = self._queue.get_nowait()
                self._room.release()
                if item is None:
                    done = True
                    break
                batch.append(item)
            yield batch
        if self._error is not None:
            raise CliError(f"cannot read stdin: {self._error}")


# --------------------------------------------------------------------------- running


@dataclass
class ProduceStats:
    messages: int = 0
    batches: int = 0


async def _send(
    stream: MsgStream,
    emitter: TimeTickEmitter,
    count: int,
    build: Callable[[list[int]], list[TsMsg]],
    stats: ProduceStats,
) -> None:
    """Allocate ``count`` timestamps, build the messages, produce them, release the
    timestamps (a tick only passes them once they were acknowledged)."""
    timestamps = [emitter.begin() for _ in range(count)]
    try:
        msgs = build(timestamps)
        result = await stream.produce(MsgPack(msgs=msgs))
    finally:
        for ts in timestamps:
            emitter.done(ts)
    stats.messages += sum(len(ids) for ids in result.values())
    stats.batches += 1


async def run_produce(config: Config, opts: ProduceOptions) -> int:
    factory = MsgStreamFactory(config)
    stats = ProduceStats()
    bad = BadLines(opts.skip_invalid)
    started = time.perf_counter()
    emitter: TimeTickEmitter | None = None

    def report() -> None:
        elapsed = time.perf_counter() - started
        ticks = emitter.ticks_sent if emitter is not None else 0
        if opts.json:
            summary = {
                "messages": stats.messages,
                "batches": stats.batches,
                "skipped": bad.count,
                "skipped_lines": bad.shown,
                "channels": opts.channels,
                "ticks": ticks,
                "seconds": round(elapsed, 6),
                "msgs_per_s": round(stats.messages / elapsed, 1) if elapsed > 0 else None,
            }
            print(orjson.dumps(summary).decode(), flush=True)
            return
        print(
            f"produced: messages={stats.messages} channels={len(opts.channels)} "
            f"ticks={ticks} msgs_per_s={fmt_rate(stats.messages, elapsed)}"
            + (f" {bad.summary()}" if bad.count else ""),
            flush=True,
        )

    try:
        async with factory.new_msgstream() as stream:
            known = await known_schema(stream.client, opts, config.msgstream.operation_timeout_s)
            await stream.as_producer(opts.channels)
            emitter = TimeTickEmitter(
                stream, interval_s=config.msgstream.tick_interval_s, source_id=opts.source_id
            )
            if opts.ticks:
                emitter.start()
            try:
                if opts.count is not None:
                    assert known is not None
                    await _produce_synthetic(stream, emitter, opts, known, opts.count, stats)
                else:
                    await _produce_stdin(stream, emitter, opts, known, stats, bad)
            except InvalidLineError:  # what was sent before the line is complete: tick it
                await emitter.stop(final_tick=opts.ticks)
                raise
            except BaseException:
                await emitter.stop(final_tick=False)
                raise
            await emitter.stop(final_tick=opts.ticks)
    except (asyncio.CancelledError, KeyboardInterrupt):
        report()  # what was acknowledged before the interruption
        raise
    report()
    return bad.exit_code


class SchemaConflictError(CliError):
    """The rows' schema is not the one the channels already declare for the collection."""


async def known_schema(
    client: Client, opts: ProduceOptions, timeout_s: float
) -> CollectionSchema | None:
    """The schema the rows must fit, as far as it is known before the first row: the one
    the channels declare for the collection (a ``CreateCollectionMsg`` on them), which
    --schema or --count's rows must equal; else theirs; else None (inferred from the
    first row). :class:`SchemaConflictError` before anything is sent if they differ."""
    given = synthetic_schema(opts.collection) if opts.count is not None else opts.schema
    declared = await find_collection_schema(
        client, opts.channels, opts.collection, timeout_s=timeout_s, missing_ok=True
    )
    if declared is None:
        return given
    difference = None if given is None else schema_difference(declared.schema, given)
    if difference is not None:
        what = "--count rows" if opts.count is not None else f"--schema {opts.schema_file}"
        raise SchemaConflictError(
            f"{what}: channel {declared.channel!r} already declares collection "
            f"{opts.collection!r} with another schema: {difference} (`msgstream schema "
            f"--channel {declared.channel} --collection {opts.collection}` prints it; "
            "or produce into another --collection)"
        )
    return declared.schema


async def announce_collection(
    stream: MsgStream, emitter: TimeTickEmitter, opts: ProduceOptions, schema: CollectionSchema
) -> None:
    """Broadcast the collection's ``CreateCollectionMsg`` (unless --no-create-collection):
    what ``msgstream ingest`` and the Spark source read the schema from."""
    if not opts.create_collection:
        return
    async with emitter.reserve() as ts:
        msg = CreateCollectionMsg(
            msg_id=ts,
            timestamp=ts,
            source_id=opts.source_id,
            collection_name=schema.name,
            schema=schema,
        )
        await stream.broadcast(MsgPack.of(msg))


async def _produce_synthetic(
    stream: MsgStream,
    emitter: TimeTickEmitter,
    opts: ProduceOptions,
    schema: CollectionSchema,
    total: int,
    stats: ProduceStats,
) -> None:
    stamper = _Stamper(opts)
    await announce_collection(stream, emitter, opts, schema)
    rng = np.random.default_rng()
    progress = stderr_progress(TextColumn("producing"), BarColumn(), MofNCompleteColumn())
    with progress:
        task = progress.add_task("produce", total=total)
        remaining = total
        while remaining > 0:
            count = min(opts.batch, remaining)
            await _send(stream, emitter, count, lambda ts: synthetic_batch(stamper, ts, rng), stats)
            remaining -= count
            progress.advance(task, count)
            await asyncio.sleep(0)  # let the tick task run between batches


FittedRow = tuple[int | None, list[FieldData]]
"""A row checked against the schema: its --key hash (None: none given) and its columns."""


class _StdinRows:
    """Checks stdin rows against the collection schema: the one known before the first
    row (:func:`known_schema`), or one inferred from the first row that gives one."""

    def __init__(self, opts: ProduceOptions, schema: CollectionSchema | None) -> None:
        self.opts = opts
        self.columns = None if schema is None else RowColumns(schema)
        self.settled = False
        """Whether a row fitted: the schema is final (and announced before that row)."""

    def fit(self, at: LineAt, row: dict[str, Any]) -> FittedRow:
        """The row's --key hash and columns; :class:`InvalidLineError` if it has no --key
        field, does not fit the schema or (the first row) gives no schema."""
        key = self.opts.key
        hash_key = None if key is None else key_hash(row, key, at)
        columns = self.columns or RowColumns(self._infer(row, at))
        try:
            fitted = hash_key, columns.build(row)
        except RowMismatch as exc:
            raise InvalidLineError(at, str(exc)) from None
        self.columns = columns
        return fitted

    def _infer(self, first: dict[str, Any], at: LineAt) -> CollectionSchema:
        try:
            return infer_schema([first], self.opts.collection, self.opts.key, all_nullable=True)
        except (RowMismatch, ValueError) as exc:
            raise InvalidLineError(at, f"cannot infer the collection schema: {exc}") from None

    async def settle(self, stream: MsgStream, emitter: TimeTickEmitter) -> None:
        """Before the first row that fits is sent: announce the collection."""
        if self.settled:
            return
        assert self.columns is not None
        schema = self.columns.schema
        if schema.primary_field is None:
            stderr_console().print(
                f"note: collection {schema.name!r} has no primary key (give --key, or "
                "rows with an int or string 'id'): ingest it with --frame inserts",
                markup=False,
            )
        await announce_collection(stream, emitter, self.opts, schema)
        self.settled = True


def _sent(rows: int) -> str:
    """What a stop at a bad line leaves behind, in words."""
    if rows == 0:
        return "nothing was sent"
    return "the row before it was sent" if rows == 1 else f"the {rows} rows before it were sent"


async def _produce_stdin(
    stream: MsgStream,
    emitter: TimeTickEmitter,
    opts: ProduceOptions,
    schema: CollectionSchema | None,
    stats: ProduceStats,
    bad: BadLines,
) -> None:
    """Send the rows of stdin in batches as they come. A bad line either stops the run
    (the rows before it sent first, in their batch, and nothing of it) or is skipped."""
    stamper = _Stamper(opts)
    rows = _StdinRows(opts, schema)
    lines = RowLines("stdin", bad, as_text=opts.as_text)
    reader = StdinLines(stdin_lines())
    try:
        async for raw_lines in reader.batches(opts.batch):
            fitting: list[FittedRow] = []
            stop: InvalidLineError | None = None
            try:
                for at, row in lines.rows(raw_lines):
                    try:
                        fitted = rows.fit(at, row)
                    except InvalidLineError as exc:
                        bad.reject(exc)
                        continue
                    await rows.settle(stream, emitter)
                    fitting.append(fitted)
            except InvalidLineError as exc:
                stop = exc
            if fitting:
                await _send(
                    stream,
                    emitter,
                    len(fitting),
                    functools.partial(json_batch, stamper, rows=fitting),
                    stats,
                )
            if stop is not None:
                raise stop.with_outcome(_sent(stats.messages))
    finally:
        with contextlib.suppress(Exception):
            reader.close()
