"""The instrumentation hooks: what streams, readers, backends and the Spark bridge report.

One small interface, no library behind it. A stream is handed an :class:`Instruments`
(or None, the default: then it calls nothing, and the produce and read paths pay one
``is None`` test). The implementations live elsewhere and import their libraries only
when enabled: Prometheus in :mod:`msgstream.metrics`, OpenTelemetry in
:mod:`msgstream.tracing`; :func:`combine` joins several.

An :class:`Instruments` makes *probes* bound to their labels once (a producer's backend
and channel, a consumer's subscription), so the hot paths never look labels up. Every
method of the classes here does nothing: an implementation overrides what it records.
A probe must never raise into the stream: a failing probe is a bug of the probe, and the
implementations here keep their work to counters and spans.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .pack import MsgPack

__all__ = [
    "BridgeProbe",
    "ConsumeProbe",
    "Instruments",
    "OpRecord",
    "ProduceProbe",
    "StoreProbe",
    "TickProbe",
    "combine",
    "default_instruments",
    "set_default_instruments",
]


class OpRecord:
    """One timed operation (a send, a produced pack), from its start to its end."""

    __slots__ = ()

    properties: Mapping[str, str] | None = None
    """Message properties the operation's messages carry (a trace context), or None."""

    def done(self, count: int, nbytes: int) -> None:
        """The operation succeeded: ``count`` messages, ``nbytes`` payload bytes."""

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

    def received(self, count: int, nbytes: int) -> None:
        """``count`` messages of ``nbytes`` payload bytes were read (bad ones included)."""

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
    """What a :class:`~msgstream.ttstream.TtMsgStream` does, for one subscription."""

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

    def done(self, count: int, nbytes: int) -> None:
        for record in self._records:
            record.done(count, nbytes)

    def failed(self, error: BaseException) -> None:
        for record in self._records:
            record.failed(error)


class _Producers(ProduceProbe):
    def __init__(self, probes: list[ProduceProbe]) -> None:
        self._probes = probes

    def start(self) -> OpRecord:
        return _Records([p.start() for p in self._probes])


class _Consumers(ConsumeProbe):
    def __init__(self, probes: list[ConsumeProbe]) -> None:
        self._probes = probes
        self.wants_properties = any(p.wants_properties for p in probes)

    def received(self, count: int, nbytes: int) -> None:
        for p in self._probes:
            p.received(count, nbytes)

    def bad(self, error: BaseException) -> None:
        for p in self._probes:
            p.bad(error)

    def late(self, policy: str) -> None:
        for p in self._probes:
            p.late(policy)

    def acked(self) -> None:
        for p in self._probes:
            p.acked()

    def received_properties(self, msg_id: bytes, properties: Mapping[str, str]) -> None:
        for p in self._probes:
            p.received_properties(msg_id, properties)


class _Packs(PackProbe):
    def __init__(self, probes: list[PackProbe]) -> None:
        self._probes = probes

    def consumed(self, pack: MsgPack) -> None:
        for p in self._probes:
            p.consumed(pack)


class _Ticks(TickProbe):
    def __init__(self, probes: list[TickProbe]) -> None:
        self._probes = probes

    def pack(self, messages: int, lag_s: float) -> None:
        for p in self._probes:
            p.pack(messages, lag_s)

    def merged(self, packs: int) -> None:
        for p in self._probes:
            p.merged(packs)

    def channel(self, channel: str, last_tick_s: float | None, buffered: int) -> None:
        for p in self._probes:
            p.channel(channel, last_tick_s, buffered)

    def stalled(self, channel: str, behind_s: float | None) -> None:
        for p in self._probes:
            p.stalled(channel, behind_s)


class _Stores(StoreProbe):
    def __init__(self, probes: list[StoreProbe]) -> None:
        self._probes = probes

    def size(self, nbytes: int) -> None:
        for p in self._probes:
            p.size(nbytes)

    def retention_deleted(self, channel: str, count: int) -> None:
        for p in self._probes:
            p.retention_deleted(channel, count)

    def subscriptions(self, channel: str, backlogs: Mapping[str, int]) -> None:
        for p in self._probes:
            p.subscriptions(channel, backlogs)


class _Bridges(BridgeProbe):
    def __init__(self, probes: list[BridgeProbe]) -> None:
        self._probes = probes

    def batch(self, rows: int, seconds: float, *, redone: bool) -> None:
        for p in self._probes:
            p.batch(rows, seconds, redone=redone)

    def committed(self) -> None:
        for p in self._probes:
            p.committed()


class _Combined(Instruments):
    def __init__(self, parts: Sequence[Instruments]) -> None:
        self.parts = list(parts)

    def producer(self, backend: str, channel: str) -> ProduceProbe:
        return _Producers([i.producer(backend, channel) for i in self.parts])

    def produce_pack(self, backend: str) -> ProduceProbe:
        return _Producers([i.produce_pack(backend) for i in self.parts])

    def consumer(self, backend: str, channel: str, subscription: str) -> ConsumeProbe:
        return _Consumers([i.consumer(backend, channel, subscription) for i in self.parts])

    def packs(self, backend: str, subscription: str) -> PackProbe:
        return _Packs([i.packs(backend, subscription) for i in self.parts])

    def ticks(self, backend: str, subscription: str) -> TickProbe:
        return _Ticks([i.ticks(backend, subscription) for i in self.parts])

    def store(self, backend: str) -> StoreProbe:
        return _Stores([i.store(backend) for i in self.parts])

    def bridge(self, source: str) -> BridgeProbe:
        return _Bridges([i.bridge(source) for i in self.parts])


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
    are given their own. :func:`msgstream.metrics.enable` and
    :func:`msgstream.tracing.enable` call this."""
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
