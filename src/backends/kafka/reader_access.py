"""How processes that only read Kafka do it (Kafka's
:class:`~msgstream.streams.reader_access.ReaderAccess`): large fetches, a query's position
held as its consumer group's committed offset, and seek readers that leave no consumer
group behind (a Spark task reads one slice and is gone: making, committing and deleting
a group for it cost round trips to the group coordinator and group rights on the cluster).

Kafka's retention is by time and size only, so the committed offsets keep nothing; they
show lag tools how far the query is.
"""

from __future__ import annotations

from collections.abc import Sequence

from msgstream.configuration.config import Config
from msgstream.contract.backend import Client, ConsumedMessage, Consumer
from msgstream.streams.reader_access import QueryHold, ReaderAccess, ReaderClient, SubscriptionHold

from .client import KafkaClient
from .ids import KafkaMessageID
from .settings import KafkaConfig

FETCH_BYTES = 16 << 20
"""A reader's fetch size per partition (unless ``kafka.consumer`` sets
``max_partition_fetch_bytes``): it reads whole slices, and aiokafka's 1 MiB default
made a 10 MiB channel ten round trips to the broker (docs/benchmarks/code-notes.md)."""


class CommittedOffsetHold(SubscriptionHold):
    """The query's consumer group, its offset committed at the position: acknowledging
    the message before it (an acknowledged offset is the last one consumed)."""

    async def move(self, channel: str, consumer: Consumer, position: bytes) -> None:
        offset = KafkaMessageID.of(self.client.message_id_from_bytes(position)).offset
        if offset > 0:
            await consumer.ack(ConsumedMessage(channel, KafkaMessageID(offset - 1), b""))


class KafkaReaderAccess(ReaderAccess):
    def open(self, config: Config) -> ReaderClient:
        """A client with large fetches (:data:`FETCH_BYTES`)."""
        return super().open(_large_fetches(config))

    def hold(self, client: Client, channels: Sequence[str], name: str) -> QueryHold:
        return CommittedOffsetHold(client, channels, name)

    async def seek_reader(self, client: Client, channel: str, name: str) -> Consumer:
        """A consumer that commits nothing (:meth:`KafkaClient.seek_reader`)."""
        if not isinstance(client, KafkaClient):
            return await super().seek_reader(client, channel, name)
        return await client.seek_reader(channel, name)

    async def close_seek_reader(self, client: Client, consumer: Consumer, name: str) -> None:
        if isinstance(client, KafkaClient):
            await consumer.close()  # it made no consumer group: nothing to remove
        else:
            await super().close_seek_reader(client, consumer, name)


def _large_fetches(config: Config) -> Config:
    kafka = config.section(KafkaConfig)
    if "max_partition_fetch_bytes" in kafka.consumer:
        return config
    consumer = {**kafka.consumer, "max_partition_fetch_bytes": FETCH_BYTES}
    return config.replace(kafka=kafka.replace(consumer=consumer))


READER_ACCESS = KafkaReaderAccess()
