"""Prometheus metrics (``pip install 'msgstream[metrics]'``).

    import msgstream.observability.metrics
    msgstream.observability.metrics.enable()       # or the configuration: metrics: {enabled: true}
    msgstream.observability.metrics.serve(9464)    # /metrics over HTTP, from a daemon thread

Streams made after :func:`enable` report to ``prometheus_client``'s default registry, or
to the one passed. Nothing here is imported by msgstream until it is enabled, and a
stream made while metrics are off calls nothing (:mod:`msgstream.observability.observe`).

Every metric is listed in :data:`METRICS` (name, type, labels, help), which is also the
table in docs/guide/observability.md. Labels: ``backend``, ``channel``, ``subscription``
where they apply; ``error`` is an exception's class name; ``msg_type`` a message type
(:func:`~msgstream.observability.observe.type_label`: ``Insert``, ``Delete``, ``TimeTick``, ...), so
time ticks are counted apart from data.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any, NamedTuple

from ..errors import BackendUnavailableError
from .observe import (
    BridgeProbe,
    ConsumeProbe,
    Instruments,
    OpRecord,
    ProduceProbe,
    StoreProbe,
    TickProbe,
    TypeCounts,
    default_instruments,
    set_default_instruments,
)
from .tallies import Tally, TallyCollector, Timings, TypeTally

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

__all__ = [
    "METRICS",
    "MetricDef",
    "PrometheusInstruments",
    "disable",
    "enable",
    "metrics_reference_markdown",
    "serve",
]


class MetricDef(NamedTuple):
    name: str
    kind: str
    """``counter``, ``gauge`` or ``histogram``."""
    labels: tuple[str, ...]
    help: str


B, C, S, T = "backend", "channel", "subscription", "msg_type"

METRICS: tuple[MetricDef, ...] = (
    # produce
    MetricDef(
        "msgstream_produced_messages_total",
        "counter",
        (B, C, T),
        "Messages sent, by type (msg_type Insert, Delete, TimeTick, ...)",
    ),
    MetricDef("msgstream_produced_bytes_total", "counter", (B, C), "Payload bytes sent"),
    MetricDef(
        "msgstream_produce_errors_total",
        "counter",
        (B, "error"),
        "produce/broadcast calls that failed, by exception type",
    ),
    MetricDef(
        "msgstream_send_duration_seconds",
        "histogram",
        (B, C),
        "Latency of one send to a channel (one message or a batch), until acknowledged",
    ),
    MetricDef(
        "msgstream_produce_duration_seconds",
        "histogram",
        (B,),
        "Latency of one produce/broadcast call (a whole pack, every channel)",
    ),
    # consume
    MetricDef(
        "msgstream_consumed_messages_total",
        "counter",
        (B, C, S, T),
        "Messages read, by type (undecodable ones as msg_type undecodable)",
    ),
    MetricDef("msgstream_consumed_bytes_total", "counter", (B, C, S), "Payload bytes read"),
    MetricDef(
        "msgstream_bad_payloads_total",
        "counter",
        (B, C, S, "error"),
        "Undecodable messages skipped, by error type",
    ),
    MetricDef(
        "msgstream_late_messages_total",
        "counter",
        (B, C, S, "policy"),
        "Messages timestamped at or below their channel's last tick (deliver or reject)",
    ),
    MetricDef("msgstream_acks_total", "counter", (B, C, S), "Acknowledgements sent"),
    # TtMsgStream
    MetricDef("msgstream_packs_total", "counter", (B, S), "Time-tick packs handed out"),
    MetricDef("msgstream_pack_messages", "histogram", (B, S), "Messages per time-tick pack"),
    MetricDef(
        "msgstream_time_tick_lag_seconds",
        "gauge",
        (B, S),
        "Wall clock minus the end time of the last pack handed out",
    ),
    MetricDef(
        "msgstream_channel_last_tick_seconds",
        "gauge",
        (B, C, S),
        "Physical time (Unix seconds) of a channel's last time tick",
    ),
    MetricDef(
        "msgstream_buffered_messages",
        "gauge",
        (B, C, S),
        "Messages of a channel read but not yet handed out (reader and barrier)",
    ),
    MetricDef(
        "msgstream_pursuit_merges_total",
        "counter",
        (B, S),
        "Packs merged into the one before by pursuit mode",
    ),
    MetricDef(
        "msgstream_channel_stalled",
        "gauge",
        (B, C, S),
        "1 while a channel holds the common time tick back as others advance",
    ),
    MetricDef(
        "msgstream_channel_behind_seconds",
        "gauge",
        (B, C, S),
        "How far a stalled channel's last tick is behind the newest (0 when not stalled)",
    ),
    MetricDef("msgstream_channel_stalls_total", "counter", (B, C, S), "Times a channel stalled"),
    # embedded store
    MetricDef("msgstream_store_size_bytes", "gauge", (B,), "Size of the embedded store on disk"),
    MetricDef(
        "msgstream_retention_deleted_messages_total",
        "counter",
        (B, C),
        "Messages deleted by retention",
    ),
    MetricDef("msgstream_subscriptions", "gauge", (B, C), "Subscriptions of a channel"),
    MetricDef(
        "msgstream_subscription_backlog_messages",
        "gauge",
        (B, C, S),
        "Messages of a channel not yet acknowledged by a subscription",
    ),
    # Spark bridge
    MetricDef(
        "msgstream_spark_batches_total", "counter", ("source",), "Micro-batches handed to the sink"
    ),
    MetricDef("msgstream_spark_rows_total", "counter", ("source",), "Rows in those batches"),
    MetricDef(
        "msgstream_spark_batch_duration_seconds",
        "histogram",
        ("source",),
        "Time to build and hand one micro-batch to the sink",
    ),
    MetricDef(
        "msgstream_spark_checkpoint_commits_total",
        "counter",
        ("source",),
        "Checkpoints committed after a batch",
    ),
    MetricDef(
        "msgstream_spark_redone_batches_total",
        "counter",
        ("source",),
        "Batches handed out again after a restart (same batch id)",
    ),
)

_PACK_BUCKETS = (0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 50000)
_LATENCY_BUCKETS = (
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
    0.5, 1.0, 2.5, 5.0, 10.0,
)  # fmt: skip


def _prometheus() -> Any:
    try:
        import prometheus_client
    except ModuleNotFoundError as exc:
        raise BackendUnavailableError(
            "metrics need prometheus-client: pip install 'msgstream[metrics]'"
        ) from exc
    return prometheus_client


TALLIED = frozenset(
    {
        "msgstream_produced_messages_total",
        "msgstream_produced_bytes_total",
        "msgstream_send_duration_seconds",
        "msgstream_produce_duration_seconds",
        "msgstream_consumed_messages_total",
        "msgstream_consumed_bytes_total",
    }
)
"""The metrics every produce or read updates: kept as tallies (:mod:`.tallies`), which
cost an addition where a ``prometheus_client`` value takes a lock. The others change
rarely (errors, acks, gauges) and are ``prometheus_client``'s own."""


def _buckets(metric: MetricDef) -> tuple[float, ...]:
    return _PACK_BUCKETS if metric.name == "msgstream_pack_messages" else _LATENCY_BUCKETS


def _metric_objects(registry: CollectorRegistry | None) -> tuple[dict[str, Any], TallyCollector]:
    """One Prometheus metric object per :data:`METRICS` entry not in :data:`TALLIED`, and
    the collector of those that are, all registered in ``registry``."""
    prom = _prometheus()
    made: dict[str, Any] = {}
    tallies = TallyCollector()
    kwargs: dict[str, Any] = {"registry": registry} if registry is not None else {}
    for metric in METRICS:
        if metric.name in TALLIED:
            _declare(tallies, metric)
        elif metric.kind == "counter":
            # prometheus_client adds the _total suffix back on exposition.
            name = metric.name.removesuffix("_total")
            made[metric.name] = prom.Counter(name, metric.help, list(metric.labels), **kwargs)
        elif metric.kind == "gauge":
            made[metric.name] = prom.Gauge(metric.name, metric.help, list(metric.labels), **kwargs)
        else:
            made[metric.name] = prom.Histogram(
                metric.name, metric.help, list(metric.labels), buckets=_buckets(metric), **kwargs
            )
    (registry if registry is not None else prom.REGISTRY).register(tallies)
    return made, tallies


def _declare(tallies: TallyCollector, metric: MetricDef) -> None:
    if metric.kind == "histogram":
        tallies.histogram(metric.name, metric.help, metric.labels, _buckets(metric))
    elif metric.labels[-1] == T:
        tallies.by_type(metric.name, metric.help, metric.labels)
    else:
        tallies.counter(metric.name, metric.help, metric.labels)


# --------------------------------------------------------------------------- the probes


class _Timed(OpRecord):
    __slots__ = ("_duration", "_errors", "_messages", "_nbytes", "_start")

    def __init__(
        self,
        messages: TypeTally | None,
        nbytes: Tally | None,
        duration: Timings,
        errors: Callable[[str], Any] | None,
    ) -> None:
        self._messages = messages
        self._nbytes = nbytes
        self._duration = duration
        self._errors = errors
        self._start = time.perf_counter()

    def done(self, count: int, nbytes: int, types: TypeCounts | None = None) -> None:
        self._duration.observe(time.perf_counter() - self._start)
        if self._messages is not None:
            self._messages.add({"unknown": count} if types is None else types)
        if self._nbytes is not None:
            self._nbytes.value += nbytes

    def failed(self, error: BaseException) -> None:
        if self._errors is not None:
            self._errors(type(error).__name__).inc()


class _SendProbe(ProduceProbe):
    def __init__(self, tallies: TallyCollector, backend: str, channel: str) -> None:
        labels = (backend, channel)
        self._messages = tallies.tally("msgstream_produced_messages_total", self, *labels)
        self._nbytes = tallies.tally("msgstream_produced_bytes_total", self, *labels)
        self._duration = tallies.tally("msgstream_send_duration_seconds", self, *labels)

    def start(self) -> OpRecord:
        return _Timed(self._messages, self._nbytes, self._duration, None)


class _ProducePackProbe(ProduceProbe):
    def __init__(self, m: dict[str, Any], tallies: TallyCollector, backend: str) -> None:
        self._duration = tallies.tally("msgstream_produce_duration_seconds", self, backend)
        self._errors = partial(m["msgstream_produce_errors_total"].labels, backend)

    def start(self) -> OpRecord:
        return _Timed(None, None, self._duration, self._errors)


class _ConsumeProbe(ConsumeProbe):
    def __init__(
        self, m: dict[str, Any], tallies: TallyCollector, labels: tuple[str, str, str]
    ) -> None:
        self._labels = labels
        self._messages = tallies.tally("msgstream_consumed_messages_total", self, *labels)
        self._nbytes = tallies.tally("msgstream_consumed_bytes_total", self, *labels)
        self._acks = m["msgstream_acks_total"].labels(*labels)
        self._bad = m["msgstream_bad_payloads_total"]
        self._late = m["msgstream_late_messages_total"]

    def received(self, count: int, nbytes: int, types: TypeCounts) -> None:
        self._messages.add(types)
        self._nbytes.value += nbytes

    def bad(self, error: BaseException) -> None:
        self._bad.labels(*self._labels, type(error).__name__).inc()

    def late(self, policy: str) -> None:
        self._late.labels(*self._labels, policy).inc()

    def acked(self) -> None:
        self._acks.inc()


class _TickProbe(TickProbe):
    def __init__(self, m: dict[str, Any], backend: str, subscription: str) -> None:
        self._m = m
        self._backend = backend
        self._subscription = subscription
        self._packs = m["msgstream_packs_total"].labels(backend, subscription)
        self._sizes = m["msgstream_pack_messages"].labels(backend, subscription)
        self._lag = m["msgstream_time_tick_lag_seconds"].labels(backend, subscription)
        self._merges = m["msgstream_pursuit_merges_total"].labels(backend, subscription)

    def _child(self, name: str, channel: str) -> Any:
        return self._m[name].labels(self._backend, channel, self._subscription)

    def pack(self, messages: int, lag_s: float) -> None:
        self._packs.inc()
        self._sizes.observe(messages)
        self._lag.set(lag_s)

    def merged(self, packs: int) -> None:
        self._merges.inc(packs)

    def channel(self, channel: str, last_tick_s: float | None, buffered: int) -> None:
        if last_tick_s is not None:
            self._child("msgstream_channel_last_tick_seconds", channel).set(last_tick_s)
        self._child("msgstream_buffered_messages", channel).set(buffered)
        self._child("msgstream_channel_stalled", channel)  # present (0) before any stall

    def stalled(self, channel: str, behind_s: float | None) -> None:
        stalled = behind_s is not None
        self._child("msgstream_channel_stalled", channel).set(1 if stalled else 0)
        self._child("msgstream_channel_behind_seconds", channel).set(behind_s or 0.0)
        if stalled:
            self._child("msgstream_channel_stalls_total", channel).inc()


class _StoreProbe(StoreProbe):
    def __init__(self, m: dict[str, Any], backend: str) -> None:
        self._m = m
        self._backend = backend
        self._size = m["msgstream_store_size_bytes"].labels(backend)

    def size(self, nbytes: int) -> None:
        self._size.set(nbytes)

    def retention_deleted(self, channel: str, count: int) -> None:
        self._m["msgstream_retention_deleted_messages_total"].labels(self._backend, channel).inc(
            count
        )

    def subscriptions(self, channel: str, backlogs: Mapping[str, int]) -> None:
        self._m["msgstream_subscriptions"].labels(self._backend, channel).set(len(backlogs))
        backlog = self._m["msgstream_subscription_backlog_messages"]
        for name, count in backlogs.items():
            backlog.labels(self._backend, channel, name).set(count)


class _BridgeProbe(BridgeProbe):
    def __init__(self, m: dict[str, Any], source: str) -> None:
        self._batches = m["msgstream_spark_batches_total"].labels(source)
        self._rows = m["msgstream_spark_rows_total"].labels(source)
        self._duration = m["msgstream_spark_batch_duration_seconds"].labels(source)
        self._commits = m["msgstream_spark_checkpoint_commits_total"].labels(source)
        self._redone = m["msgstream_spark_redone_batches_total"].labels(source)

    def batch(self, rows: int, seconds: float, *, redone: bool) -> None:
        self._batches.inc()
        self._rows.inc(rows)
        self._duration.observe(seconds)
        if redone:
            self._redone.inc()

    def committed(self) -> None:
        self._commits.inc()


class PrometheusInstruments(Instruments):
    """:class:`~msgstream.observability.observe.Instruments` recording to Prometheus metrics."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry
        self._m, self._tallies = _metric_objects(registry)

    def producer(self, backend: str, channel: str) -> ProduceProbe:
        return _SendProbe(self._tallies, backend, channel)

    def produce_pack(self, backend: str) -> ProduceProbe:
        return _ProducePackProbe(self._m, self._tallies, backend)

    def consumer(self, backend: str, channel: str, subscription: str) -> ConsumeProbe:
        return _ConsumeProbe(self._m, self._tallies, (backend, channel, subscription))

    def ticks(self, backend: str, subscription: str) -> TickProbe:
        return _TickProbe(self._m, backend, subscription)

    def store(self, backend: str) -> StoreProbe:
        return _StoreProbe(self._m, backend)

    def bridge(self, source: str) -> BridgeProbe:
        return _BridgeProbe(self._m, source)


# --------------------------------------------------------------------------- turning on

_lock = threading.Lock()
_enabled: dict[int, PrometheusInstruments] = {}
"""Instruments by ``id(registry)`` (0: the default registry): metrics are registered once."""


def enable(registry: CollectorRegistry | None = None) -> PrometheusInstruments:
    """Record metrics from now on: streams made afterwards report to ``registry``
    (``prometheus_client``'s default registry when None). Calling it again with the same
    registry returns the same instruments. Raises
    :class:`~msgstream.errors.BackendUnavailableError` without ``msgstream[metrics]``."""
    key = 0 if registry is None else id(registry)
    with _lock:
        instruments = _enabled.get(key)
        if instruments is None:
            instruments = _enabled[key] = PrometheusInstruments(registry)
        set_default_instruments("metrics", instruments)
    return instruments


def disable() -> None:
    """Streams made from now on record no metrics (those made before keep theirs)."""
    set_default_instruments("metrics", None)


def enabled() -> bool:
    """Whether new streams record metrics."""
    current = default_instruments()
    return current is not None and any(
        isinstance(i, PrometheusInstruments) for i in getattr(current, "parts", [current])
    )


_served: set[int] = set()


def serve_once(port: int) -> None:
    """:func:`serve` on ``port`` unless this process already does (the factory's
    ``metrics.port``: every factory made from one configuration shares the server)."""
    with _lock:
        if port in _served:
            return
        _served.add(port)
    serve(port)


def serve(port: int, addr: str = "0.0.0.0", registry: CollectorRegistry | None = None) -> None:
    """Serve ``/metrics`` on ``port`` from a daemon thread (``prometheus_client``'s
    ``start_http_server``); enables metrics first if they are not."""
    prom = _prometheus()
    if registry is None and not enabled():
        enable()
    kwargs: dict[str, Any] = {} if registry is None else {"registry": registry}
    prom.start_http_server(port, addr, **kwargs)


def metrics_reference_markdown() -> str:
    """The table of metrics in docs/guide/observability.md (generated from
    :data:`METRICS`)."""
    lines = ["| Metric | Type | Labels | Meaning |", "| --- | --- | --- | --- |"]
    for metric in METRICS:
        labels = ", ".join(metric.labels)
        lines.append(f"| `{metric.name}` | {metric.kind} | {labels} | {metric.help} |")
    return "\n".join(lines) + "\n"
