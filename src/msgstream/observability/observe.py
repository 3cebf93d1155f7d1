"""The instrumentation hooks: what streams, readers, backends and the Spark bridge report.

One small interface, no library behind it. A stream is handed an :class:`Instruments`
(or None, the default: then it calls nothing, and the produce and read paths pay one
``is None`` test). The implementations live elsewhere and import their libraries only
when enabled: Prometheus in :mod:`msgstream.observability.metrics`, OpenTelemetry in
:mod:`msgstream.observability.tracing`; :func:`combine` joins several.

An :class:`Instruments` makes *probes* bound to their labels once (a producer's backend
and channel, a consumer's subscription), so the hot paths never look labels up. Every
method of the classes here does nothing: an implementation overrides what it records.
A probe must never raise into the stream: a failing probe is a bug of the probe, and the
implementations here keep their work to counters and spans.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from ..wire.pack import MsgPack

__all__ = [
    "BridgeProbe",
    "ConsumeProbe",
    "Instruments",
    "OpRecord",
    "ProduceProbe",
    "StoreProbe",
    "TickProbe",
    "TypeCounts",
    "UNDECODABLE",
    "combine",
    "count_types",
    "default_instruments",
    "set_default_instruments",
    "type_label",
]

TypeCounts = Mapping[str, int]
"""Messages by type label (:func:`type_label`), e.g. ``{"Insert": 10, "TimeTick": 2}``:
what a send or a read reports, counted once per call and labelled once per type."""

UNDECODABLE = "undecodable"
"""The type label of a payload read that did not decode: its type is not known."""


def type_label(cls: type) -> str:
    """A message type's label in metrics: its class name without ``Msg`` (``InsertMsg``
    is ``Insert``, ``TimeTickMsg`` is ``TimeTick``)."""
    label = _LABELS.get(cls)
    if label is None:
        label = _LABELS[cls] = cls.__name__.removesuffix("Msg")
    return label


_LABELS: dict[type, str] = {}
"""Labels of the classes seen (a handful: the message types)."""


def count_types(msgs: Collection[object]) -> dict[str, int]:
    """``msgs`` by type label: C-level passes over their classes, then one label per class
    (most often there is one: a pack of inserts, a broadcast tick)."""
    if len(msgs) == 1:
        for msg in msgs:
            return {type_label(type(msg)): 1}
    classes = set(map(type, msgs))
    if len(classes) == 1:
        (only,) = classes
        return {type_label(only): len(msgs)}
    counts: dict[str, int] = {}
    for cls, count in Counter(map(type, msgs)).items():
        label = type_label(cls)
        counts[label] = counts.get(label, 0) + count
    return counts


class OpRecord:
    """One timed operation (a send, a produced pack), from its start to its end."""

    __slots__ = ()

    properties: Mapping[str, str] | None = None
    """Message properties the operation's messages carry (a trace context), or None."""

    def routed(self, channels: Sequence[str]) -> None:
        """The operation's messages go to ``channels`` (a whole produce call learns them
        once its pack is routed, before anything is sent)."""

    def done(self, count: int, nbytes: int, types: TypeCounts | None = None) -> None:
        """The operation succeeded: ``count`` messages, ``nbytes`` payload bytes; ``types``
        counts the messages by type where the caller has them (a send does)."""

    def failed(self, error: BaseException) -> None:
        """The operation raised ``error`` (re-raised to the caller afterwards)."""


NO_OP = OpRecord()


class ProduceProbe:
    """Sends of one producer (one backend, one channel)."""

    def start(self) -> OpRecord:
        """A send begins; the record is ended with ``done`` or ``failed``."""
        return NO_OP


class ConsumeProbe:
    """What one subscription reads of one channel."""

    wants_properties = False
    """True when :meth:`received_properties` wants each message's properties (a trace
    context): the reader then builds them, which the batch read path otherwise skips."""

    def received(self, count: int, nbytes: int, types: TypeCounts) -> None:
        """``count`` messages of ``nbytes`` payload bytes were read (bad ones included);
        ``types`` counts them by type (bad ones as :data:`UNDECODABLE`)."""

    def bad(self, error: BaseException) -> None:
        """An undecodable payload was skipped."""

    def late(self, policy: str) -> None:
        """A message timestamped at or below its channel's last tick (TtMsgStream);
        ``policy`` is what was done with it: ``deliver`` or ``reject``."""

    def acked(self) -> None:
        """An acknowledgement was sent for this channel."""

    def received_properties(self, msg_id: bytes, properties: Mapping[str, str]) -> None:
        """The properties of the message whose ``MessageID.to_bytes()`` is ``msg_id``."""


class PackProbe:
    """Packs handed out by one consuming stream, and packs produced by a stream."""

    def consumed(self, pack: MsgPack) -> None:
        """A pack was handed to the application."""


class TickProbe:
    """What a :class:`~msgstream.streams.ttstream.TtMsgStream` does, for one subscription."""

    def pack(self, messages: int, lag_s: float) -> None:
        """A pack of ``messages`` was cut; the wall clock is ``lag_s`` past its end time."""

    def merged(self, packs: int) -> None:
        """Pursuit mode merged ``packs`` more packs into one."""

    def channel(self, channel: str, last_tick_s: float | None, buffered: int) -> None:
        """A channel's last tick (its physical time, Unix seconds) and its messages read
        but not yet handed out."""

    def stalled(self, channel: str, behind_s: float | None) -> None:
        """``channel`` holds the common tick back (``behind_s``: how far its last tick is
        behind the newest of the others), or (None) no longer does."""


class StoreProbe:
    """An embedded store's state (rocksmq)."""

    def size(self, nbytes: int) -> None:
        """The store's size on disk."""

    def retention_deleted(self, channel: str, count: int) -> None:
        """Retention deleted ``count`` messages of ``channel``."""

    def subscriptions(self, channel: str, backlogs: Mapping[str, int]) -> None:
        """``channel``'s subscriptions, each with its backlog (messages not acknowledged)."""


class BridgeProbe:
    """The Spark bridge's micro-batches."""

    def batch(self, rows: int, seconds: float, *, redone: bool) -> None:
        """A batch of ``rows`` was handed to the sink in ``seconds``; ``redone`` when it
        repeats a batch id after a restart."""

    def committed(self) -> None:
        """A checkpoint was committed."""


class Instruments:
    """Makes the probes; each method is called once per producer, consumer or stream.

    The base records nothing. An implementation subclasses it and the probe classes.
    """

    def producer(self, backend: str, channel: str) -> ProduceProbe:
        return ProduceProbe()

    def produce_pack(self, backend: str) -> ProduceProbe:
        """Whole ``produce``/``broadcast`` calls of a stream (every channel at once)."""
        return ProduceProbe()

    def consumer(self, backend: str, channel: str, subscription: str) -> ConsumeProbe:
        return ConsumeProbe()

    def packs(self, backend: str, subscription: str) -> PackProbe:
        return PackProbe()

    def ticks(self, backend: str, subscription: str) -> TickProbe:
        return TickProbe()

    def store(self, backend: str) -> StoreProbe:
        return StoreProbe()

    def bridge(self, source: str) -> BridgeProbe:
        return BridgeProbe()


# --------------------------------------------------------------------------- combining


class _Records(OpRecord):
    __slots__ = ("_records", "properties")

    def __init__(self, records: list[OpRecord]) -> None:
        self._records = records
        merged: dict[str, str] = {}
        for record in records:
            if record.properties:
                merged.update(record.properties)
        self.properties = merged or None

    def routed(self, channels: Sequence[str]) -> None:
        for record in self._records:
            record.routed(channels)

    def done(self, count: int, nbytes: int, types: TypeCounts | None = None) -> None:
        for record in self._records:
            record.done(count, nbytes, types)

    def failed(self, error: BaseException) -> None:
        for record in self._records:
            record.failed(error)


class _Producers(ProduceProbe):
    def __init__(self, probes: list[ProduceProbe]) -> None:
        self._probes = probes

    def start(self) -> OpRecord:
        return _Records([p.start() for p in self._probes])


_Probe = TypeVar("_Probe")


def _fan_out(kind: type[_Probe], probes: list[_Probe]) -> _Probe:
    """One ``kind`` probe passing every call of ``kind``'s methods on to each of ``probes``
    (probe methods return nothing); a flag of ``kind`` (``wants_properties``) is on when
    any probe's is."""
    cls = _FAN_OUT_CLASSES.get(kind) or _FAN_OUT_CLASSES.setdefault(kind, _fan_out_class(kind))
    fan_out: _Probe = cls(probes)
    return fan_out


_FAN_OUT_CLASSES: dict[type[Any], type[Any]] = {}


def _fan_out_class(kind: type[Any]) -> type[Any]:
    def forwarder(name: str) -> Callable[..., None]:
        def forward(self: Any, *args: Any, **kwargs: Any) -> None:
            for probe in self._probes:
                getattr(probe, name)(*args, **kwargs)

        forward.__name__ = name
        return forward

    def __init__(self: Any, probes: list[Any]) -> None:
        self._probes = probes
        for flag in flags:
            setattr(self, flag, any(getattr(p, flag) for p in probes))

    public = {name: value for name, value in vars(kind).items() if not name.startswith("_")}
    flags = [name for name, value in public.items() if isinstance(value, bool)]
    methods = {name: forwarder(name) for name, value in public.items() if callable(value)}
    return type(f"_FanOut{kind.__name__}", (kind,), {"__init__": __init__, **methods})


class _Combined(Instruments):
    def __init__(self, parts: Sequence[Instruments]) -> None:
        self.parts = list(parts)

    def producer(self, backend: str, channel: str) -> ProduceProbe:
        return _Producers([i.producer(backend, channel) for i in self.parts])

    def produce_pack(self, backend: str) -> ProduceProbe:
        return _Producers([i.produce_pack(backend) for i in self.parts])

    def consumer(self, backend: str, channel: str, subscription: str) -> ConsumeProbe:
        return _fan_out(
            ConsumeProbe, [i.consumer(backend, channel, subscription) for i in self.parts]
        )

    def packs(self, backend: str, subscription: str) -> PackProbe:
        return _fan_out(PackProbe, [i.packs(backend, subscription) for i in self.parts])

    def ticks(self, backend: str, subscription: str) -> TickProbe:
        return _fan_out(TickProbe, [i.ticks(backend, subscription) for i in self.parts])

    def store(self, backend: str) -> StoreProbe:
        return _fan_out(StoreProbe, [i.store(backend) for i in self.parts])

    def bridge(self, source: str) -> BridgeProbe:
        return _fan_out(BridgeProbe, [i.bridge(source) for i in self.parts])


def combine(*parts: Instruments | None) -> Instruments | None:
    """One :class:`Instruments` reporting to each of ``parts`` (None ones left out); None
    when there is none, the one when there is one."""
    present = [p for p in parts if p is not None]
    if not present:
        return None
    if len(present) == 1:
        return present[0]
    return _Combined(present)


# --------------------------------------------------------------------------- the default

_defaults: dict[str, Instruments] = {}


def set_default_instruments(kind: str, instruments: Instruments | None) -> None:
    """Install (or, with None, remove) the process-wide instruments of ``kind``
    (``"metrics"``, ``"tracing"``): what streams made afterwards report to unless they
    are given their own. :func:`msgstream.observability.metrics.enable` and
    :func:`msgstream.observability.tracing.enable` call this."""
    if instruments is None:
        _defaults.pop(kind, None)
    else:
        _defaults[kind] = instruments


def default_instruments() -> Instruments | None:
    """The instruments a new stream reports to by default: every enabled kind, or None
    when nothing is enabled (the usual case: then nothing is recorded)."""
    if not _defaults:
        return None
    return combine(*_defaults.values())
