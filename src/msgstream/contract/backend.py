"""The backend contract: what every broker adapter provides to the streams.

The streams only ever talk to these protocols, so caller code never changes between
brokers. Backends live in the separate ``backends`` package and are imported lazily by
:mod:`msgstream.streams.factory`; nothing here imports a broker library.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from bisect import bisect_right
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar, NamedTuple, Protocol, Self, runtime_checkable

from ..configuration.plugins import tag_owner
from ..errors import ForeignMessageIdError, InvalidPositionError
from ..observability.observe import StoreProbe
from ..wire.position import SubscriptionPosition


class MessageID(ABC):
    """A broker-specific message id, totally ordered within one channel.

    The one design every backend's ids follow. A backend subclasses this and gives its
    name (``backend``), one sort key per id (``sort_key``: what ids of one channel are
    ordered by), ``to_bytes`` and ``parse`` (its inverse). The rest is derived here, the
    same for every backend: ids are equal when they have the same backend and sort key
    (ids of two backends never are), hash by their key, and order by it; ordering ids of
    two backends raises :class:`ForeignMessageIdError`, ordering against anything else
    ``TypeError``.
    """

    __slots__ = ()
    backend: ClassVar[str]

    @property
    @abstractmethod
    def sort_key(self) -> Any:
        """What ids of one channel are ordered, compared and hashed by."""

    @abstractmethod
    def to_bytes(self) -> bytes:
        """The serialised id (what positions carry)."""

    @classmethod
    @abstractmethod
    def parse(cls, data: bytes) -> Self:
        """The id whose ``to_bytes()`` is ``data``; ``ForeignMessageIdError`` when another
        backend made it, ``InvalidPositionError`` when it is no id at all."""

    @classmethod
    def of(cls, msg_id: object) -> Self:
        """``msg_id`` as an id of this class (read back from its bytes if need be), or a
        clear error when another backend made it or it is no MessageID."""
        if isinstance(msg_id, cls):
            return msg_id
        return cls.parse(message_id_bytes(cls.backend, msg_id))

    def _key_of(self, other: object) -> Any:
        """The sort key of ``other``, an id of the same backend."""
        if type(other) is type(self):  # the usual case, first: ids are compared often
            return other.sort_key
        if isinstance(other, MessageID):
            if other.backend == self.backend:
                return other.sort_key
            raise ForeignMessageIdError(self.backend, other.backend)
        raise TypeError(f"cannot order a {self.backend} MessageID and a {type(other).__name__}")

    def __eq__(self, other: object) -> bool:
        if type(other) is type(self) or isinstance(other, MessageID):
            return other.backend == self.backend and bool(other.sort_key == self.sort_key)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.sort_key)

    def __lt__(self, other: object) -> bool:
        return bool(self.sort_key < self._key_of(other))

    def __le__(self, other: object) -> bool:
        return bool(self.sort_key <= self._key_of(other))

    def __gt__(self, other: object) -> bool:
        return bool(self.sort_key > self._key_of(other))

    def __ge__(self, other: object) -> bool:
        return bool(self.sort_key >= self._key_of(other))


TAGGED_ID_SIZE = 9
"""Backends whose spec has a ``message_id_tag`` serialise a MessageID as that byte plus an
int64: another backend can name the owner of such an id in its error instead of calling
it garbage."""


def tagged_id_owner(data: bytes) -> str | None:
    """The registered backend that serialised ``data``, if it is a tagged 9-byte id."""
    return tag_owner(data[:1]) if len(data) == TAGGED_ID_SIZE else None


def message_id_bytes(backend: str, msg_id: object) -> bytes:
    """``msg_id.to_bytes()`` for ``backend`` to parse; ``ForeignMessageIdError`` when the id
    says another backend made it, ``InvalidPositionError`` when it is no MessageID."""
    owner = getattr(msg_id, "backend", None)
    if isinstance(owner, str) and owner != backend:
        raise ForeignMessageIdError(backend, owner)
    to_bytes = getattr(msg_id, "to_bytes", None)
    if callable(to_bytes):
        data = to_bytes()
        if isinstance(data, bytes):
            return data
    raise InvalidPositionError(f"{msg_id!r} is not a MessageID")


NO_PROPERTIES: Mapping[str, str] = MappingProxyType({})
"""The properties of a message that has none: one shared, read-only mapping."""


class ConsumedMessage(NamedTuple):
    """One raw message as read from a channel (a named tuple: one is made per message)."""

    channel: str
    msg_id: MessageID
    payload: bytes
    properties: Mapping[str, str] = NO_PROPERTIES


class ConsumedBatch:
    """Messages read from one channel in one go, column by column.

    What :meth:`BatchConsumer.receive_batch_nowait` returns: the payloads and each
    message's ``MessageID.to_bytes()``, in channel order, without an object per message.
    ``message(i)`` rebuilds the full :class:`ConsumedMessage` (MessageID, properties) for
    the rare paths that need it, such as reporting an undecodable payload.
    """

    __slots__ = ("_message", "channel", "id_bytes", "payloads")

    def __init__(
        self,
        channel: str,
        payloads: list[bytes],
        id_bytes: list[bytes],
        message: Callable[[int], ConsumedMessage],
    ) -> None:
        self.channel = channel
        self.payloads = payloads
        self.id_bytes = id_bytes
        self._message = message

    def __len__(self) -> int:
        return len(self.payloads)

    def message(self, index: int) -> ConsumedMessage:
        return self._message(index)

    def first(self, count: int) -> ConsumedBatch:
        """The first ``count`` messages (this batch if it has no more)."""
        if count >= len(self.payloads):
            return self
        return ConsumedBatch(
            self.channel, self.payloads[:count], self.id_bytes[:count], self._message
        )

    def upto(
        self, last: MessageID, parse: Callable[[bytes], MessageID]
    ) -> tuple[ConsumedBatch, bool]:
        """The messages up to and including MessageID ``last``, and whether ``last`` is
        reached (the batch holds it, or a message past it); ``parse`` reads an id's bytes.
        Ids rise within a batch, so one binary search finds the cut."""
        ids = self.id_bytes
        kept = bisect_right(ids, last, key=parse)
        if kept < len(ids):
            return self.first(kept), True
        return self, bool(ids) and parse(ids[-1]) == last

    @classmethod
    def of(cls, channel: str, messages: Sequence[ConsumedMessage]) -> ConsumedBatch:
        """A batch of messages received one by one (the fallback of every backend)."""
        return cls(
            channel,
            [m.payload for m in messages],
            [m.msg_id.to_bytes() for m in messages],
            messages.__getitem__,
        )


@dataclass(frozen=True, slots=True)
class SubscriptionInfo:
    """What ``inspect`` shows of one subscription."""

    channel: str
    name: str
    acked_id: MessageID | None
    lag: int | None
    last_active_ms: int | None = None


class Producer(Protocol):
    channel: str

    async def send(self, payload: bytes, properties: Mapping[str, str] | None = None) -> MessageID:
        """Send one message; return its id once the broker acknowledged it."""
        ...

    async def send_many(
        self, payloads: Sequence[bytes], properties: Mapping[str, str] | None = None
    ) -> Sequence[MessageID]:
        """Send messages in order; return their ids once all are acknowledged (a list, or
        a lighter sequence such as :class:`~msgstream.contract.tagged_id.MessageIdRange`)."""
        ...

    async def close(self) -> None: ...


class Consumer(Protocol):
    channel: str
    subname: str

    async def receive(self) -> ConsumedMessage:
        """Wait for and return the next message."""
        ...

    def receive_nowait(self, max_messages: int) -> list[ConsumedMessage]:
        """Return up to ``max_messages`` already-available messages without waiting."""
        ...

    async def seek(self, msg_id: MessageID, inclusive: bool) -> None:
        """Move the read cursor to ``msg_id`` (inclusive) or just after it."""
        ...

    async def seek_to_earliest(self) -> None: ...

    async def ack(self, msg: ConsumedMessage) -> None:
        """Acknowledge ``msg`` and everything before it in this subscription."""
        ...

    async def get_latest_msg_id(self) -> MessageID | None:
        """The id of the last message in the channel, or None if it is empty."""
        ...

    async def check_topic_valid(self) -> None:
        """Raise ``TopicNotFoundError`` if the channel does not exist."""
        ...

    async def close(self) -> None: ...


class BatchConsumer(Consumer, Protocol):
    """A consumer that can also hand over what it has read as one columnar batch.

    Optional: streams use it when a consumer has it and fall back to ``receive_nowait``
    otherwise. It saves a ``ConsumedMessage`` and a ``MessageID`` object per message on
    the read path of a stream.
    """

    def receive_batch_nowait(self, max_messages: int) -> ConsumedBatch:
        """Up to ``max_messages`` already-available messages, without waiting (possibly
        none); the same messages, in the same order, ``receive_nowait`` would return."""
        ...


class Client(Protocol):
    """A connection to one broker (or embedded store).

    ``inline_sends`` is True when a send completes without waiting on I/O (an embedded
    store written from the event loop): the stream then sends buckets one after another
    instead of paying for a task per bucket, which is equivalent.
    """

    backend_name: str
    inline_sends: bool

    async def create_producer(self, channel: str) -> Producer: ...

    async def subscribe(
        self, channel: str, subname: str, position: SubscriptionPosition
    ) -> Consumer: ...

    def earliest_message_id(self) -> MessageID:
        """An id that sorts before every message of any channel."""
        ...

    def message_id_from_bytes(self, data: bytes) -> MessageID:
        """Rebuild a MessageID; raise ``ForeignMessageIdError`` for another backend's id."""
        ...

    async def check_topic_valid(self, channel: str) -> None:
        """Raise ``TopicNotFoundError`` if ``channel`` does not exist (never creates it)."""
        ...

    async def get_latest_msg_id(self, channel: str) -> MessageID | None:
        """The id of the last message of ``channel`` (None when it is empty); raise
        ``TopicNotFoundError`` if it does not exist."""
        ...

    async def close(self) -> None: ...


@runtime_checkable
class AdminClient(Client, Protocol):
    """Optional management calls used by ``msgstream inspect`` and retention tools: a
    client has them when ``isinstance(client, AdminClient)``."""

    async def list_channels(self) -> list[str]: ...

    async def list_subscriptions(self, channel: str) -> list[SubscriptionInfo]: ...

    async def delete_channel(self, channel: str) -> None: ...

    async def delete_subscription(self, channel: str, subname: str) -> None: ...


@runtime_checkable
class ObservableClient(Client, Protocol):
    """A client with state of its own worth watching (an embedded store's size,
    retention, subscriptions): the factory hands it a probe when metrics are on."""

    def observe(self, probe: StoreProbe) -> None:
        """Report to ``probe`` from now on (as the client's maintenance runs)."""
        ...


@runtime_checkable
class PeekClient(Client, Protocol):
    """A client that can read one stored message by its id without a subscription:
    ``msgstream inspect`` reads the timestamps of the newest and the acknowledged
    messages to show how far behind (in time) a subscription and a channel are."""

    async def peek(self, channel: str, msg_id: MessageID) -> bytes | None:
        """The payload of the message ``msg_id`` of ``channel`` (None when it is gone)."""
        ...


@runtime_checkable
class RetainedMessagesClient(Client, Protocol):
    """A client that knows which messages of a channel it still holds (an embedded log,
    whose ids count messages): ``msgstream inspect`` shows the first id and the count."""

    async def retained_messages(self, channel: str) -> tuple[MessageID, int] | None:
        """The first retained message's id and how many messages are retained from it on
        (None when the channel holds none)."""
        ...
