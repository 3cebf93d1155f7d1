"""OpenTelemetry traces (``pip install 'msgstream[otel]'``, on ``opentelemetry-api``).

    import msgstream.observability.tracing
    msgstream.observability.tracing.enable()       # or the configuration: tracing: {enabled: true}

Streams made afterwards open a ``PRODUCER`` span per ``produce``/``broadcast`` call (a
child of the caller's current span) and carry its W3C trace context (``traceparent``,
``tracestate``) in the properties of every message sent; a consuming stream opens a
``CONSUMER`` span per pack it hands out, whose parent is the trace context of the pack's
first traced message, linked to every distinct one in the pack. A span names its channel
as OpenTelemetry's messaging conventions do for a batch: ``messaging.destination.name``
when every message of the call or pack has the same channel, else (the conventions then
leave the destination unset) :data:`CHANNELS_ATTRIBUTE`, the list of channels.
Recording, sampling and export are the application's: without an OpenTelemetry SDK
configured, the API's spans record nothing. A malformed or foreign ``traceparent`` is
ignored, never an error.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import BackendUnavailableError
from ..wire.pack import MsgPack
from .logs import get_logger
from .observe import (
    ConsumeProbe,
    Instruments,
    OpRecord,
    PackProbe,
    ProduceProbe,
    TypeCounts,
    set_default_instruments,
)

log = get_logger(__name__)

__all__ = ["CHANNELS_ATTRIBUTE", "TracingInstruments", "disable", "enable"]

TRACER_NAME = "msgstream"
CHANNELS_ATTRIBUTE = "msgstream.channels"
"""The span attribute listing the channels of a call or pack that spans several (in the
order the stream routes or reads them)."""
MAX_REMEMBERED = 65536
"""Trace contexts a consuming stream keeps per channel between reading a message and
handing it out (the oldest are forgotten first: bounded memory)."""


def _otel() -> tuple[Any, Any]:
    try:
        from opentelemetry import propagate, trace
    except ModuleNotFoundError as exc:
        raise BackendUnavailableError(
            "traces need opentelemetry-api: pip install 'msgstream[otel]'"
        ) from exc
    return trace, propagate


def _channel_attributes(channels: Sequence[str]) -> dict[str, Any]:
    """The span attributes naming ``channels`` (see the module doc); none for none."""
    if len(channels) == 1:
        return {"messaging.destination.name": channels[0]}
    return {CHANNELS_ATTRIBUTE: list(channels)} if channels else {}


class _SpanRecord(OpRecord):
    __slots__ = ("_span", "properties")

    def __init__(self, span: Any, properties: dict[str, str]) -> None:
        self._span = span
        self.properties = properties or None

    def routed(self, channels: Sequence[str]) -> None:
        self._span.set_attributes(_channel_attributes(channels))

    def done(self, count: int, nbytes: int, types: TypeCounts | None = None) -> None:
        self._span.set_attribute("messaging.batch.message_count", count)
        self._span.end()

    def failed(self, error: BaseException) -> None:
        trace, _ = _otel()
        self._span.record_exception(error)
        self._span.set_status(trace.Status(trace.StatusCode.ERROR, type(error).__name__))
        self._span.end()


class _ProduceSpans(ProduceProbe):
    def __init__(self, tracer: Any, backend: str) -> None:
        self._tracer = tracer
        self._attributes = {"messaging.system": backend, "messaging.operation.type": "send"}

    def start(self) -> OpRecord:
        trace, propagate = _otel()
        span = self._tracer.start_span(
            "msgstream produce", kind=trace.SpanKind.PRODUCER, attributes=self._attributes
        )
        carrier: dict[str, str] = {}
        propagate.inject(carrier, context=trace.set_span_in_context(span))
        return _SpanRecord(span, carrier)


class _Remembered:
    """Trace contexts of read messages, per channel, by MessageID bytes (bounded)."""

    def __init__(self) -> None:
        self.by_id: OrderedDict[bytes, Any] = OrderedDict()


class _ContextReader(ConsumeProbe):
    wants_properties = True

    def __init__(self, memory: _Remembered) -> None:
        self._memory = memory

    def received_properties(self, msg_id: bytes, properties: Mapping[str, str]) -> None:
        if "traceparent" not in properties:
            return
        trace, propagate = _otel()
        try:
            context = propagate.extract(dict(properties))
            span_context = trace.get_current_span(context).get_span_context()
        except Exception:  # a malformed carrier is no reason to stop reading
            return
        if not span_context.is_valid:
            return
        by_id = self._memory.by_id
        by_id[msg_id] = span_context
        if len(by_id) > MAX_REMEMBERED:
            by_id.popitem(last=False)


class _ConsumeSpans(PackProbe):
    def __init__(self, tracer: Any, backend: str, memories: dict[str, _Remembered]) -> None:
        self._tracer = tracer
        self._backend = backend
        self._memories = memories

    def consumed(self, pack: MsgPack) -> None:
        trace, _ = _otel()
        found: dict[tuple[int, int], Any] = {}  # the producers' span contexts, once each
        channels: dict[str, None] = {}  # in the order the pack holds them
        for msg in pack.msgs:
            position = msg.position
            if position is None:
                continue
            channels[position.channel] = None
            memory = self._memories.get(position.channel)
            if memory is None:
                continue
            span_context = memory.by_id.pop(position.msg_id, None)
            if span_context is not None:
                found.setdefault((span_context.trace_id, span_context.span_id), span_context)
        contexts = list(found.values())
        parent = (
            trace.set_span_in_context(trace.NonRecordingSpan(contexts[0])) if contexts else None
        )
        span = self._tracer.start_span(
            "msgstream receive",
            context=parent,
            kind=trace.SpanKind.CONSUMER,
            links=[trace.Link(c) for c in contexts],
            attributes={
                "messaging.system": self._backend,
                "messaging.operation.type": "receive",
                "messaging.batch.message_count": len(pack.msgs),
                **_channel_attributes(list(channels)),
            },
        )
        span.end()


class TracingInstruments(Instruments):
    """:class:`~msgstream.observability.observe.Instruments` opening OpenTelemetry spans."""

    def __init__(self, tracer_provider: Any = None) -> None:
        trace, _ = _otel()
        self._tracer = trace.get_tracer(TRACER_NAME, tracer_provider=tracer_provider)
        self._memories: dict[tuple[str, str], dict[str, _Remembered]] = {}

    def _memory(self, backend: str, subscription: str) -> dict[str, _Remembered]:
        return self._memories.setdefault((backend, subscription), {})

    def produce_pack(self, backend: str) -> ProduceProbe:
        return _ProduceSpans(self._tracer, backend)

    def consumer(self, backend: str, channel: str, subscription: str) -> ConsumeProbe:
        memory = self._memory(backend, subscription).setdefault(channel, _Remembered())
        return _ContextReader(memory)

    def packs(self, backend: str, subscription: str) -> PackProbe:
        return _ConsumeSpans(self._tracer, backend, self._memory(backend, subscription))


_lock = threading.Lock()


def enable(tracer_provider: Any = None) -> TracingInstruments:
    """Trace streams made from now on, with ``tracer_provider`` (the global one, set by
    the application's SDK set-up, when None). Raises
    :class:`~msgstream.errors.BackendUnavailableError` without ``msgstream[otel]``."""
    with _lock:
        instruments = TracingInstruments(tracer_provider)
        set_default_instruments("tracing", instruments)
    return instruments


def disable() -> None:
    """Streams made from now on are not traced."""
    set_default_instruments("tracing", None)
