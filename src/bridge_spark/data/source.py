"""``spark.readStream.format("msgstream")``: a PySpark Python streaming data source.

Offsets are :class:`~bridge_spark.data.offsets.SliceOffset` s -- one common time tick and a
position per channel -- so every micro-batch is the time slice between two ticks across
all channels. The driver side (Spark's Python source runner) plans slices from message
headers; each micro-batch has one partition per channel, read by an executor worker that
opens its own client (as the backend's reader access opens one: an embedded store
read-only) and yields Arrow record batches. Spark's
checkpoint keeps the offsets, so a restarted query resumes exactly where it stopped; the
query's durable subscription follows Spark's commits, so retention keeps what the query
has not committed yet (:mod:`bridge_spark.data.subscription`).

Options (case-insensitive):

==========================  ===========================================================
``channels``                comma-separated channel names (required)
``collection``              collection name (default: the first CreateCollectionMsg)
``collectionSchema``        the schema as JSON (``CollectionSchema.to_dict()``); else it
                            is read from the channels' CreateCollectionMsg
``frame``                   ``changes`` (default), ``inserts`` or ``deletes``
``startingPositions``       ``earliest`` (default), ``latest``, JSON positions or @file
``maxRowsPerTrigger``       rows per micro-batch, at most (a slice is never split)
``config``                  msgstream YAML file (default: ``$MSGSTREAM_CONFIG``)
``subscription``            the query's durable subscription (``msgstream-spark``):
                            retention keeps what it has not committed
any dotted config key       e.g. ``rocksmq.path``, ``kafka.brokers``, ``mq.type``
==========================  ===========================================================
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from msgstream.configuration.config import Config
from msgstream.errors import InvalidPositionError
from msgstream.observability.logs import get_logger
from msgstream.streams.reader_access import ReaderClient
from msgstream.wire.schema import CollectionSchema

from ..errors import OptionError
from ..process.runner_exit import closes, stop_on_sigterm
from .clients import check_read_elsewhere, open_reader
from .frames import FrameKind, FrameSchema
from .offsets import LATEST, SliceOffset, StartSpec, parse_start
from .options import bridge_config, parse_channels, parse_schema, positive_int
from .planner import RowFilter, SlicePlanner
from .slices import ChannelSlice, iterate_slice
from .subscription import QuerySubscription, query_subscription

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

log = get_logger(__name__)

SOURCE_NAME = "msgstream"
DEFAULT_SUBSCRIPTION = "msgstream-spark"
_OPTIONS = (
    "channels",
    "collection",
    "collectionschema",
    "frame",
    "startingpositions",
    "maxrowspertrigger",
    "config",
    "subscription",
)
_T = TypeVar("_T")


@dataclass(frozen=True)
class SourceSpec:
    """Everything a reader needs, resolved once on the driver and shipped to workers."""

    config: Config
    channels: tuple[str, ...]
    frame: FrameSchema
    start: StartSpec
    max_rows_per_trigger: int | None
    subscription: str

    @property
    def timeout_s(self) -> float:
        return self.config.msgstream.operation_timeout_s


def parse_source_options(options: Mapping[str, str]) -> tuple[dict[str, str], Config]:
    """Lower-cased options (unknown ones refused) and the configuration they select."""
    opts = {str(k).lower(): str(v) for k, v in options.items()}
    overrides = {k: v for k, v in opts.items() if "." in k}
    unknown = sorted(k for k in opts if k not in _OPTIONS and k not in overrides)
    if unknown:
        raise OptionError(
            unknown[0],
            f"unknown option of the msgstream source (known: {', '.join(_OPTIONS)}, "
            "or a dotted configuration key such as rocksmq.path)",
        )
    config = bridge_config(opts.get("config"), overrides)
    check_read_elsewhere(config, "the Spark source is read by executor processes")
    return opts, config


def resolve_spec(options: Mapping[str, str]) -> SourceSpec:
    """Parse the options; find the collection schema in the channels if not given."""
    opts, config = parse_source_options(options)
    if "channels" not in opts:
        raise OptionError("channels", "required: the comma-separated channels to read")
    channels = parse_channels(opts["channels"])
    kind = FrameKind.parse(opts.get("frame", FrameKind.CHANGES.value))
    collection = opts.get("collection") or None
    subscription = opts.get("subscription", DEFAULT_SUBSCRIPTION)
    schema: CollectionSchema
    if "collectionschema" in opts:
        schema = parse_schema(opts["collectionschema"])
        if collection is not None and collection != schema.name:
            raise OptionError(
                "collection", f"{collection!r} differs from the schema's name {schema.name!r}"
            )
    else:
        schema = _run(_discover_schema(config, channels, collection, subscription, kind))
    max_rows = None
    if "maxrowspertrigger" in opts:
        max_rows = positive_int(opts["maxrowspertrigger"], "maxRowsPerTrigger")
    start = parse_start(opts.get("startingpositions", "earliest"), channels)
    return SourceSpec(config, channels, FrameSchema(schema, kind), start, max_rows, subscription)


async def _discover_schema(
    config: Config,
    channels: Sequence[str],
    collection: str | None,
    subscription: str,
    kind: FrameKind,
) -> CollectionSchema:
    reader = open_reader(config)
    planner = SlicePlanner(reader.client, channels, subscription, RowFilter(collection or "", kind))
    try:
        return await planner.find_schema(collection)
    finally:
        await planner.close()
        await reader.client.close()


def _run(coro: Coroutine[Any, Any, _T]) -> _T:
    return asyncio.run(coro)


class ChannelSlicePartition(InputPartition):
    """One channel's part of one micro-batch (picklable)."""

    def __init__(self, part: ChannelSlice) -> None:
        super().__init__(part.channel)
        self.part = part


class _DriverRuntime:
    """The planner of the driver-side runner: a reader client on a private event loop,
    kept open across Spark's calls (never pickled). In Spark's runner process, SIGTERM --
    how Spark stops it -- is made to unwind so that :meth:`close` runs
    (:mod:`bridge_spark.process.runner_exit`)."""

    def __init__(self, spec: SourceSpec) -> None:
        self._sigterm = stop_on_sigterm()
        self.loop = asyncio.new_event_loop()
        self.reader: ReaderClient = open_reader(spec.config)
        self.planner = SlicePlanner(
            self.reader.client,
            spec.channels,
            spec.subscription,
            RowFilter(spec.frame.name, spec.frame.kind),
            timeout_s=spec.timeout_s,
        )
        self.subscription: QuerySubscription = query_subscription(
            self.reader, spec.channels, spec.subscription
        )
        self._held = False

    def run(self, coro: Coroutine[Any, Any, _T]) -> _T:
        with self._sigterm.busy():
            return self.loop.run_until_complete(coro)

    def hold(self, offset: SliceOffset) -> None:
        """Make sure the query's subscription exists (once per run): a new one holds
        everything from ``offset`` on."""
        if not self._held:
            self.run(self.subscription.ensure(offset))
            self._held = True

    @closes
    def close(self) -> None:
        """Close the subscription, the planner and the client, each even if one before
        failed: a failure is logged, not raised, since Spark is done with the source."""
        try:
            for what, closing in (
                ("the query's subscription", self.subscription.close),
                ("the planner", self.planner.close),
                ("the reader client", self.reader.client.close),
            ):
                try:
                    self.run(closing())
                except Exception as exc:
                    log.warning("closing %s of the msgstream source failed: %r", what, exc)
        finally:
            self.loop.close()
            self._sigterm.closed()


class MsgStreamStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Spark's view of the channels: offsets, partitions, and reading a partition."""

    def __init__(self, spec: SourceSpec) -> None:
        self.spec = spec
        self._runtime: _DriverRuntime | None = None
        self._available_now: dict[str, bytes | None] | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_runtime"] = None
        return state

    @property
    def runtime(self) -> _DriverRuntime:
        if self._runtime is None:
            self._runtime = _DriverRuntime(self.spec)
            self._runtime.run(self._runtime.planner.open())  # TopicNotFoundError names a channel
        return self._runtime

    def _offset(self, data: dict[str, Any], what: str) -> SliceOffset:
        try:
            return SliceOffset.from_spark(data, self.spec.channels, what)
        except InvalidPositionError as exc:
            raise OptionError(
                "checkpointLocation",
                f"{exc}; the query's checkpoint was written for other channels or by "
                "another source",
            ) from None

    def initialOffset(self) -> dict[str, Any]:
        runtime = self.runtime  # opening checks that every channel exists
        start = self.spec.start
        if isinstance(start, SliceOffset):
            initial = start
        else:
            initial = SliceOffset.earliest(self.spec.channels)
            if start == LATEST:
                runtime.reader.refresh()
                initial = runtime.run(runtime.planner.next_offset(initial))
        runtime.hold(initial)
        return initial.to_spark()

    def getDefaultReadLimit(self) -> ReadLimit:
        limit = self.spec.max_rows_per_trigger
        return ReadAllAvailable() if limit is None else ReadMaxRows(limit)

    def prepareForTriggerAvailableNow(self) -> None:
        runtime = self.runtime
        runtime.reader.refresh()
        self._available_now = runtime.run(runtime.planner.latest_ids())

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        runtime = self.runtime
        offset = self._offset(start, "start offset")
        runtime.hold(offset)
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        runtime.reader.refresh()
        following = runtime.run(
            runtime.planner.next_offset(offset, max_rows=max_rows, stop_ids=self._available_now)
        )
        return following.to_spark()

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        begin = self._offset(start, "start offset")
        finish = self._offset(end, "end offset")
        if finish.tick <= begin.tick:
            return []
        return [
            ChannelSlicePartition(
                ChannelSlice(
                    c, begin.positions[c], begin.tick, finish.tick, begin.examined.get(c, 0)
                )
            )
            for c in self.spec.channels
        ]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, ChannelSlicePartition):
            raise TypeError(f"unexpected partition {partition!r}")
        spec = self.spec
        return iterate_slice(
            spec.config, partition.part, spec.frame, spec.subscription, timeout_s=spec.timeout_s
        )

    def commit(self, end: dict[str, Any]) -> None:
        """Spark committed the micro-batch ending at ``end``: move the query's
        subscription there, so retention may delete what lies before it."""
        runtime = self.runtime
        offset = self._offset(end, "committed offset")
        runtime.hold(offset)
        runtime.run(runtime.subscription.commit(offset))

    @closes  # Spark's runner calls it as SIGTERM comes: see bridge_spark.process.runner_exit
    def stop(self) -> None:
        runtime, self._runtime = self._runtime, None
        if runtime is not None:
            runtime.close()


class MsgStreamDataSource(DataSource):
    """Register with :func:`register`, then ``spark.readStream.format("msgstream")``."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def _spec(self) -> SourceSpec:
        spec: SourceSpec | None = self.__dict__.get("_resolved")
        if spec is None:
            spec = self.__dict__["_resolved"] = resolve_spec(self.options)
        return spec

    def schema(self) -> StructType:
        return self._spec().frame.spark_schema()

    def streamReader(self, schema: StructType) -> MsgStreamStreamReader:
        spec = self._spec()
        expected = spec.frame.spark_schema()
        if schema != expected:
            raise OptionError(
                "schema",
                f"a user-given schema must be the frame's own ({expected.simpleString()}); "
                "pass the collection schema with the collectionSchema option instead",
            )
        return MsgStreamStreamReader(spec)


def register(spark: SparkSession) -> None:
    """Make ``spark.readStream.format("msgstream")`` available in this session."""
    spark.dataSource.register(MsgStreamDataSource)
