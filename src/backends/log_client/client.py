"""Client, producer and consumer over a :class:`LogStore` (memory and rocksmq)."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from operator import add
from types import MappingProxyType
from typing import Any

import anyio

from msgstream.configuration.limits import DEFAULT_MAX_MESSAGE_BYTES
from msgstream.configuration.plugins import backend_specs
from msgstream.contract.backend import (
    NO_PROPERTIES,
    ConsumedBatch,
    ConsumedMessage,
    MessageID,
    SubscriptionInfo,
)
from msgstream.contract.channels import validate_channel_name, validate_subscription_name
from msgstream.contract.consumer_base import ClientHooks, ClientState, ConsumerBase
from msgstream.contract.producer_base import ProducerBase
from msgstream.contract.tagged_id import MessageIdRange, TaggedMessageID
from msgstream.errors import (
    BackendUnavailableError,
    MsgStreamError,
    StreamStateError,
    TopicNotFoundError,
)
from msgstream.observability.logs import get_logger
from msgstream.observability.observe import StoreProbe
from msgstream.runtime.cooperate import cooperate, yield_due, yield_now, yielded
from msgstream.wire.position import SubscriptionPosition

from . import ops
from .store import FIRST_ID, LogStore, Properties, StoredBatch, StoredSubscription

log = get_logger(__name__)

PREFETCH = 256


class LogMessageID(TaggedMessageID):
    """The id of a message in a local log: an int64 within one channel, tagged with the
    backend (memory or rocksmq) whose store holds it."""

    __slots__ = ()

    @staticmethod
    def for_backend(backend: str) -> type[LogMessageID]:
        """The id class of the local backend called ``backend``: memory's or rocksmq's, or,
        for a plug-in whose store runs on the log client, one made (when its first client
        is) from the tag its spec registers."""
        id_type = _ID_TYPES.get(backend)
        if id_type is None:
            specs = backend_specs()
            tag = specs[backend].message_id_tag if backend in specs else None
            if tag is None or _has_own_id_class(backend):  # e.g. kafka: not a local log
                raise ValueError(f"no local backend called {backend!r}")
            namespace = {"__slots__": (), "backend": backend, "tag": tag}
            id_type = _ID_TYPES[backend] = type(f"{backend}MessageID", (LogMessageID,), namespace)
        return id_type

    def __repr__(self) -> str:
        return f"LogMessageID({self.backend}:{self.value})"

    __str__ = __repr__


def _has_own_id_class(backend: str) -> bool:
    """Whether ``backend`` has a MessageID class of its own outside the log client's."""
    pending: list[type[TaggedMessageID]] = [TaggedMessageID]
    while pending:
        cls = pending.pop()
        if cls.__dict__.get("backend") == backend and not issubclass(cls, LogMessageID):
            return True
        pending.extend(cls.__subclasses__())
    return False


class MemoryMessageID(LogMessageID):
    __slots__ = ()
    backend = "memory"
    tag = b"m"


class RocksmqMessageID(LogMessageID):
    __slots__ = ()
    backend = "rocksmq"
    tag = b"r"


_ID_TYPES: dict[str, type[LogMessageID]] = {
    c.backend: c for c in (MemoryMessageID, RocksmqMessageID)
}


def _no_message(index: int) -> ConsumedMessage:
    raise IndexError(f"message {index} of an empty batch")


@dataclass(frozen=True, slots=True)
class LogParts:
    """What a log client hands the producers and consumers it makes (never itself)."""

    store: LogStore
    state: ClientState
    """The client's open/closed state."""
    id_type: type[LogMessageID]
    """The MessageID class of the client's backend."""
    max_message_bytes: int
    blocking_writes: bool
    """True when an append may block (fsync): appends then run in a worker thread."""


class LogProducer(ProducerBase):
    def __init__(self, channel: str, parts: LogParts) -> None:
        super().__init__(channel, parts.max_message_bytes)
        self._parts = parts

    async def send(self, payload: bytes, properties: Mapping[str, str] | None = None) -> MessageID:
        parts = self._parts
        if (
            properties
            or parts.blocking_writes
            or self._closed
            or parts.state.closed
            or len(payload) > self._fits
        ):  # send_many's checks raise what they find, in its order
            return (await self.send_many((payload,), properties))[0]
        # The latency path, one message: send_many's steps, one write, no sequences.
        store = parts.store
        try:
            first = store.append_one(self.channel, payload)
        except MsgStreamError:
            raise
        except Exception as exc:
            raise self._write_failed(exc, 1) from exc
        store.notify(self.channel)
        if yield_due():  # the append completed inline: let other tasks run now and then
            await yield_now()
        return parts.id_type(first)

    async def send_many(
        self, payloads: Sequence[bytes], properties: Mapping[str, str] | None = None
    ) -> Sequence[MessageID]:
        parts = self._parts
        self._check_open()
        parts.state.check_open()
        self._check_sizes(payloads)
        props = MappingProxyType(dict(properties)) if properties else NO_PROPERTIES
        if parts.blocking_writes:
            ids = await anyio.to_thread.run_sync(self._append, payloads, props)
        else:
            ids = self._append(payloads, props)
        parts.store.notify(self.channel)
        await cooperate()  # the append completed inline: let other tasks run now and then
        return MessageIdRange(parts.id_type, ids)

    def _append(self, payloads: Sequence[bytes], props: Properties) -> range:
        """Store ``payloads`` (in a worker thread when writes block); a failure that is
        not msgstream's own becomes BackendUnavailableError (nothing was stored). The
        caller then wakes the channel's readers, from the loop's thread."""
        try:
            ids = self._parts.store.append(self.channel, payloads, props)
        except MsgStreamError:
            raise
        except Exception as exc:
            raise self._write_failed(exc, len(payloads)) from exc
        return ids

    def _write_failed(self, exc: Exception, count: int) -> BackendUnavailableError:
        """A store's own failure to write ``count`` messages (the disk is full, say):
        nothing of the call was stored."""
        return BackendUnavailableError(
            f"{self._parts.store.backend_name}: writing {count} message(s) to channel "
            f"{self.channel!r} failed: {exc}"
        )


class LogConsumer(ConsumerBase):
    """Reads one channel for one subscription. ``ack`` is cumulative and persisted."""

    def __init__(
        self,
        channel: str,
        subname: str,
        next_id: int | None,
        parts: LogParts,
        hooks: ClientHooks,
    ) -> None:
        super().__init__(channel, subname, hooks)
        self._store = parts.store
        self._id_type = parts.id_type
        self._next_read: int | None = next_id
        self._buffer: deque[ConsumedMessage] = deque()

    def _read_from(self) -> int:
        """Where the next read starts; raises if the subscription cannot be read."""
        if self._next_read is None:
            raise self._unpositioned()
        if not self._store.has_channel(self.channel):
            store = self._store
            raise TopicNotFoundError(self.channel, store.backend_name, store.list_channels())
        return self._next_read

    def _fill(self, limit: int) -> None:
        records = self._store.read(self.channel, self._read_from(), limit)
        if not records:
            self._skip_deleted()
            return
        id_type = self._id_type
        channel = self.channel
        make = tuple.__new__  # ConsumedMessage(...) without its Python-level __new__: hot path
        self._buffer.extend(
            make(ConsumedMessage, (channel, id_type(i), payload, props))
            for i, payload, props in records
        )
        self._next_read = records[-1].msg_id + 1

    def _skip_deleted(self) -> None:
        """After a read found nothing: nothing is stored from the read position up to the
        channel's end, so the next message is at least ``first_readable``. Without this,
        a position below it (an empty channel read from id 0, messages deleted by
        retention) would look readable forever and ``receive`` would spin."""
        assert self._next_read is not None
        self._next_read = max(self._next_read, self._store.first_readable(self.channel))

    async def receive(self) -> ConsumedMessage:
        while True:
            await cooperate()  # a buffered message is served inline: yield now and then
            self._check_open()
            if not self._buffer:
                self._fill(PREFETCH)
            if self._buffer:
                return self._buffer.popleft()
            assert self._next_read is not None
            await self._store.wait_for_append(self.channel, self._next_read)
            yielded()

    def receive_nowait(self, max_messages: int) -> list[ConsumedMessage]:
        self._check_open()
        if len(self._buffer) < max_messages:
            self._fill(max(PREFETCH, max_messages - len(self._buffer)))
        count = min(max_messages, len(self._buffer))
        return [self._buffer.popleft() for _ in range(count)]

    def receive_batch_nowait(self, max_messages: int) -> ConsumedBatch:
        """What ``receive_nowait`` returns, as one columnar batch (see
        :class:`msgstream.contract.backend.BatchConsumer`)."""
        self._check_open()
        if self._buffer:  # prefetched by receive(): hand those over first
            count = min(max_messages, len(self._buffer))
            return ConsumedBatch.of(self.channel, [self._buffer.popleft() for _ in range(count)])
        stored = self._store.read_batch(self.channel, self._read_from(), max_messages)
        if stored is None:
            self._skip_deleted()
            return ConsumedBatch(self.channel, [], [], _no_message)
        self._next_read = stored.next_id
        tag = self._id_type.tag
        return ConsumedBatch(
            self.channel,
            stored.payloads,
            list(map(add, repeat(tag), stored.ids)),
            self._message_of(stored),
        )

    def _message_of(self, stored: StoredBatch) -> Callable[[int], ConsumedMessage]:
        """Rebuilds message ``i`` of ``stored`` in full (for error reports)."""
        channel, id_type = self.channel, self._id_type

        def message(index: int) -> ConsumedMessage:
            msg_id = id_type(int.from_bytes(stored.ids[index], "big", signed=True))
            props = stored.properties[index] if stored.properties else NO_PROPERTIES
            return ConsumedMessage(channel, msg_id, stored.payloads[index], props)

        return message

    async def seek(self, msg_id: MessageID, inclusive: bool) -> None:
        """Read from ``msg_id`` (``inclusive``) or after it next. A position before the
        first retained message starts there; one past the channel's end is refused (it
        would silently swallow the messages sent until the end reached it)."""
        self._check_open()
        own = self._id_type.of(msg_id)
        next_read = ops.seek_target(self._store, self.channel, self.subname, own.value, inclusive)
        self._buffer.clear()
        self._next_read = next_read

    async def seek_to_earliest(self) -> None:
        await self.seek(self._id_type(FIRST_ID - 1), inclusive=True)

    async def ack(self, msg: ConsumedMessage) -> None:
        """Acknowledge ``msg`` and everything before it. The persisted cursor only moves
        forward (seek to replay older messages)."""
        self._check_open()
        self._check_ack_channel(msg)
        resume_at = self._id_type.of(msg.msg_id).value + 1
        self._store.advance_subscription(self.channel, self.subname, resume_at)

    async def close(self) -> None:
        if self._begin_close():
            self._store.consumer_closed(self.channel, self.subname)
            self._store.notify(self.channel)


class LogClient:
    """A client of a log store (memory or rocksmq). Several clients may share one store."""

    def __init__(
        self,
        store: LogStore,
        *,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        blocking_writes: bool = False,
        on_use: Callable[[], None] | None = None,
        on_close: Callable[[], None] | None = None,
        on_observe: Callable[[StoreProbe], None] | None = None,
    ) -> None:
        """``on_use`` runs on each producer or subscription made (inside the event loop:
        where background maintenance can start); ``on_close`` once, when closed;
        ``on_observe`` with the probe :meth:`observe` is given (the store's maintenance
        reports to it)."""
        self.store = store
        self.backend_name = store.backend_name
        self.id_type = LogMessageID.for_backend(store.backend_name)
        self.max_message_bytes = max_message_bytes
        self.blocking_writes = blocking_writes
        """True when an append may block (fsync): appends then run in a worker thread."""
        self.inline_sends = not blocking_writes
        self._consumers: set[LogConsumer] = set()
        self._state = ClientState(f"{self.backend_name} client")
        self._hooks = ClientHooks(
            self._state, self.get_latest_msg_id, self.check_topic_valid, self.forget
        )
        self._parts = LogParts(store, self._state, self.id_type, max_message_bytes, blocking_writes)
        self._on_use = on_use
        self._on_close = on_close
        self._on_observe = on_observe

    def observe(self, probe: StoreProbe) -> None:
        """Hand ``probe`` to whatever maintains the store (nothing for a memory store)."""
        if self._on_observe is not None:
            self._on_observe(probe)

    def check_open(self) -> None:
        self._state.check_open()

    async def create_producer(self, channel: str) -> LogProducer:
        self.check_open()
        if self._on_use is not None:
            self._on_use()
        validate_channel_name(channel)
        self._require_writable(channel)
        self.store.ensure_channel(channel)
        return LogProducer(channel, self._parts)

    def _require_writable(self, channel: str) -> None:
        if self.store.read_only:
            raise StreamStateError(
                f"the {self.backend_name} store is open read-only; cannot write to {channel!r}"
            )

    async def subscribe(
        self, channel: str, subname: str, position: SubscriptionPosition
    ) -> LogConsumer:
        self.check_open()
        if self._on_use is not None:
            self._on_use()
        validate_channel_name(channel)
        validate_subscription_name(subname)
        start = ops.open_subscription(self.store, channel, subname, position)
        consumer = LogConsumer(channel, subname, start, self._parts, self._hooks)
        self._consumers.add(consumer)
        return consumer

    def forget(self, consumer: Any) -> None:
        self._consumers.discard(consumer)

    def earliest_message_id(self) -> LogMessageID:
        return self.id_type(FIRST_ID - 1)

    def message_id_from_bytes(self, data: bytes) -> LogMessageID:
        return self.id_type.parse(data)

    async def get_latest_msg_id(self, channel: str) -> LogMessageID | None:
        self.check_open()
        validate_channel_name(channel)
        last = ops.latest_id(self.store, channel)
        return None if last is None else self.id_type(last)

    async def check_topic_valid(self, channel: str) -> None:
        self.check_open()
        validate_channel_name(channel)
        ops.check_channel(self.store, channel)

    async def list_channels(self) -> list[str]:
        self.check_open()
        return self.store.list_channels()

    async def retained_messages(self, channel: str) -> tuple[LogMessageID, int] | None:
        self.check_open()
        found = ops.retained(self.store, channel)
        return None if found is None else (self.id_type(found[0]), found[1])

    async def peek(self, channel: str, msg_id: MessageID) -> bytes | None:
        self.check_open()
        return ops.peek(self.store, channel, int(self.id_type.of(msg_id)))

    async def list_subscriptions(self, channel: str) -> list[SubscriptionInfo]:
        self.check_open()
        validate_channel_name(channel)
        end, subs = ops.subscriptions(self.store, channel)
        return subscription_infos(channel, self.id_type, end, subs)

    async def delete_channel(self, channel: str) -> None:
        self.check_open()
        self._require_writable(channel)
        validate_channel_name(channel)
        self.store.delete_channel(channel)
        self.store.notify(channel)

    async def delete_subscription(self, channel: str, subname: str) -> None:
        self.check_open()
        self._require_writable(channel)
        self.store.delete_subscription(channel, subname)

    async def close(self) -> None:
        if not await self._state.close_after(self._consumers):
            return
        if self._on_close is not None:
            self._on_close()


def subscription_infos(
    channel: str, id_type: type[LogMessageID], end: int, subs: list[StoredSubscription]
) -> list[SubscriptionInfo]:
    """What ``inspect`` shows of a channel's subscriptions, given its next id."""
    return [
        SubscriptionInfo(
            channel=channel,
            name=sub.name,
            acked_id=id_type(sub.next_id - 1),
            lag=max(end - sub.next_id, 0),
            last_active_ms=sub.last_active_ms,
        )
        for sub in subs
    ]
