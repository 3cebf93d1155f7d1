"""The Kafka client library under the backend: ``kafka.client`` picks an engine.

An engine is the one place that talks to a Kafka client library on the data path: it
sends records and returns their offsets (:class:`ProducerEngine`), and reads one
channel's partition for one subscription (:class:`ReaderEngine`). Everything else --
size limits, headers as properties, offsets as MessageIDs, the committed-offset rules,
the deadline of every send, the error table -- is the backend's, once, for both engines.

- ``aiokafka`` (the default): pure-Python asyncio client, on the event loop.
- ``confluent``: confluent-kafka (librdkafka), driven from one delivery thread per client
  and one fetch thread per consumer (``msgstream[kafka-confluent]``).

Both raise aiokafka's exception classes (the confluent engine converts librdkafka's error
codes to them, see :mod:`.confluent`), so the backend has one table of failures. Topic
administration and offset queries stay on aiokafka's admin and offsets clients whichever
engine sends and reads.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from importlib import import_module
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from aiokafka import errors as kafka_errors

if TYPE_CHECKING:
    import asyncio

    from ...broker_errors import BrokerCalls
    from ..deadlines import PendingSend
    from ..settings import KafkaConfig

__all__ = [
    "COORDINATOR_MOVING",
    "Engine",
    "Fetched",
    "Headers",
    "ProducerBase",
    "ProducerEngine",
    "ReaderEngine",
    "load",
]

COORDINATOR_MOVING: tuple[type[Exception], ...] = (
    kafka_errors.NotCoordinatorForGroupError,
    kafka_errors.CoordinatorNotAvailableError,
    kafka_errors.CoordinatorLoadInProgressError,
)
"""A consumer group's coordinator is moving or loading (a broker just started or lost
leadership): both engines ask again, within the caller's deadline, instead of failing."""

Headers = list[tuple[str, bytes]] | None
"""A record's headers: message properties as ``(key, UTF-8 value)`` pairs; None for none."""


class Fetched(NamedTuple):
    """Records read from a partition in one fetch, column by column, in offset order."""

    offsets: list[int]
    payloads: list[bytes]
    headers: list[Any]
    """Per record: a sequence of ``(key, bytes)`` pairs, or None/empty for none."""


class ProducerEngine(Protocol):
    """A client's one producer, shared by every channel (started on first use)."""

    async def send(self, topic: str, payload: bytes, headers: Headers, watch: PendingSend) -> int:
        """Send one record to partition 0 of ``topic``; its offset once acknowledged.
        ``watch.future`` is set to the future the deadline may fail."""
        ...

    async def send_many(
        self, topic: str, payloads: Sequence[bytes], headers: Headers, watch: PendingSend
    ) -> list[int]:
        """Send records in order; their offsets once all are acknowledged."""
        ...

    def too_large(self, exc: BaseException) -> bool:
        """Whether ``exc`` is the broker's (or the library's) "record too large"."""
        ...

    async def close(self) -> None:
        """Flush what is pending (bounded by the deadline) and stop."""
        ...


class ReaderEngine(Protocol):
    """One subscription's reader of one channel's partition, assigned explicitly; the
    subscription name is its consumer group (commits only, no membership)."""

    async def start(self) -> None: ...

    async def committed(self) -> int | None:
        """The group's committed offset (the next to read), None if it has none."""
        ...

    async def first_offset(self) -> int: ...

    async def end_offset(self) -> int:
        """One past the partition's last offset."""
        ...

    def end_seen(self) -> int | None:
        """The end offset as the last fetch response reported it (the high watermark),
        without asking the broker; None if no fetch has reported one. Ends only grow, so
        an offset at or below it is inside the partition."""
        ...

    async def position(self, offset: int) -> None:
        """Read from ``offset`` next (anything fetched before is dropped)."""
        ...

    async def fetch(self, max_records: int) -> Fetched:
        """Wait (a second at most) for records and return them (possibly none). If the
        caller is cancelled, what the fetch returns is kept for the next call."""
        ...

    def ready(self) -> Fetched | None:
        """Records already fetched in the background, without waiting; None if none."""
        ...

    async def commit(self, offset: int) -> None: ...

    async def stop(self) -> None: ...


class ProducerBase:
    """What both engines' shared producers start from: the client's ``kafka`` section, the
    deadline of one operation, the lock that makes starting happen once, and the client's
    open check (a closed client starts nothing)."""

    def __init__(
        self,
        section: KafkaConfig,
        deadline_s: float,
        lock: asyncio.Lock,
        check_open: Callable[[], None],
    ) -> None:
        self._section = section
        self._deadline_s = deadline_s
        self._lock = lock
        self._check_open = check_open


class Engine(NamedTuple):
    """What the client needs of an engine: its shared producer and its readers."""

    name: str
    producer: Callable[[KafkaConfig, float, asyncio.Lock, Callable[[], None]], Any]
    """``producer(section, deadline_s, lock, check_open)``: the client's shared producer
    (a :class:`ProducerEngine`)."""
    reader: Callable[[KafkaConfig, str, str, BrokerCalls, bool], ReaderEngine]
    """``reader(section, channel, subname, calls, grouped)``: a :class:`ReaderEngine`;
    one not ``grouped`` (a seek reader's) never commits nor asks for committed offsets,
    so its library need not look up a group coordinator."""


def load(name: str) -> Engine:
    """The engine called ``name`` (``kafka.client``); imports its library now."""
    module = import_module(f".{name}", __name__)
    engine: Engine = module.ENGINE
    return engine
