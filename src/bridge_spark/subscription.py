"""The streaming query's durable subscription: what retention keeps for the query.

Spark's checkpoint, not a subscription, decides where a query resumes. But a store or
broker deletes what no subscription still needs, so the source's driver holds one
subscription per channel under the query's name (the ``subscription`` option) from the
query's first offset on, and moves it to every offset Spark commits:

- rocksmq: a hold (:mod:`msgstream.backends.rocksmq.holds`): the driver opens the store
  read-only, so it leaves a file the writing process's retention honours;
- Kafka: the consumer group's committed offsets (Kafka's retention is by time and size
  only, but lag tools see how far the query is);
- Pulsar: a durable subscription's acknowledged position, which keeps the backlog.

Readers (the planner, the executors) read under names of their own
(:mod:`bridge_spark.cursor`), so nothing they do moves the query's subscription. Dropping
it (:func:`drop_subscription`, once the query is stopped for good) lets retention delete
what the query would have read next.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

from msgstream.backend import AdminClient, Client, ConsumedMessage, Consumer
from msgstream.backends.log_client.client import RocksmqMessageID
from msgstream.backends.rocksmq.holds import Holds
from msgstream.config import Config
from msgstream.position import SubscriptionPosition
from msgstream.scope import concurrently

from .clients import ReaderClient, open_reader, read_only_store
from .cursor import planner_subscription
from .offsets import SliceOffset


class QuerySubscription(ABC):
    """One channel set's durable subscription under the query's name."""

    def __init__(self, client: Client, channels: Sequence[str], name: str) -> None:
        self.client = client
        self.channels = list(channels)
        self.name = name

    @abstractmethod
    async def ensure(self, offset: SliceOffset) -> None:
        """Make sure the subscription exists: one that does not starts at ``offset``."""

    @abstractmethod
    async def commit(self, offset: SliceOffset) -> None:
        """Spark committed ``offset``: everything before its positions may go."""

    async def close(self) -> None:  # noqa: B027 (only consumers have something to close)
        """Let go of what the subscription holds open (it stays on the backend)."""


class _HeldSubscription(QuerySubscription):
    """rocksmq, opened read-only: holds that the writing process's retention honours."""

    def _next_id(self, position: bytes | None) -> int:
        if position is None:
            return 0  # the channel's beginning: hold everything
        return RocksmqMessageID.parse(position).value

    async def ensure(self, offset: SliceOffset) -> None:
        holds = _holds(self.client)
        for channel in self.channels:
            if holds.get(channel, self.name) is None:
                holds.put(channel, self.name, self._next_id(offset.positions[channel]))

    async def commit(self, offset: SliceOffset) -> None:
        holds = _holds(self.client)
        for channel in self.channels:
            held = holds.get(channel, self.name)
            target = self._next_id(offset.positions[channel])
            holds.put(channel, self.name, target if held is None else max(held.next_id, target))


def _holds(client: Client) -> Holds:
    store = read_only_store(client)
    assert store is not None, "holds are for a read-only rocksmq store"
    return store.holds


class _ConsumedSubscription(QuerySubscription):
    """Kafka and Pulsar: a consumer per channel under the query's name, positioned by
    acknowledgement (Kafka: the message before the position) or by seeking (Pulsar: a
    seek sets the acknowledged position; its ids have no arithmetic)."""

    def __init__(self, client: Client, channels: Sequence[str], name: str) -> None:
        super().__init__(client, channels, name)
        self._consumers: dict[str, Consumer] = {}

    async def ensure(self, offset: SliceOffset) -> None:
        missing = [channel for channel in self.channels if channel not in self._consumers]
        started = await concurrently(
            self.client.subscribe(channel, self.name, SubscriptionPosition.EARLIEST)
            for channel in missing
        )
        self._consumers.update(zip(missing, started, strict=True))
        await self.commit(offset)

    async def commit(self, offset: SliceOffset) -> None:
        await concurrently(
            self._move(channel, consumer, position)
            for channel, consumer in self._consumers.items()
            if (position := offset.positions[channel]) is not None
        )

    async def _move(self, channel: str, consumer: Consumer, position: bytes) -> None:
        msg_id = self.client.message_id_from_bytes(position)
        if self.client.backend_name == "kafka":
            from msgstream.backends.kafka.ids import KafkaMessageID

            offset_of = KafkaMessageID.of(msg_id).offset
            if offset_of > 0:
                await consumer.ack(ConsumedMessage(channel, KafkaMessageID(offset_of - 1), b""))
        else:
            await consumer.seek(msg_id, inclusive=True)

    async def close(self) -> None:
        consumers, self._consumers = self._consumers, {}
        await concurrently(consumer.close() for consumer in consumers.values())


def query_subscription(
    reader: ReaderClient, channels: Sequence[str], name: str
) -> QuerySubscription:
    """The query's subscription on the backend ``reader`` reads."""
    if read_only_store(reader.client) is not None:
        return _HeldSubscription(reader.client, channels, name)
    return _ConsumedSubscription(reader.client, channels, name)


async def drop_subscription(config: Config, channels: Sequence[str], name: str) -> None:
    """Drop a stopped query's subscription ``name`` on ``channels``, so retention no
    longer keeps what it would have read (its checkpoint then resumes only while that
    data is still there). ``config`` points at the backend, as the query's options did."""
    reader = open_reader(config)
    client = reader.client
    try:
        store = read_only_store(client)
        for channel in channels:
            if store is not None:
                store.holds.delete(channel, name)
            elif isinstance(client, AdminClient):
                ours = {name, planner_subscription(name)}
                for info in await client.list_subscriptions(channel):
                    if info.name in ours:
                        await client.delete_subscription(channel, info.name)
    finally:
        await client.close()
