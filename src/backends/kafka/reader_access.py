"""How processes that only read Kafka do it (Kafka's
:class:`~msgstream.streams.reader_access.ReaderAccess`): an ordinary client, a query's
position held as its consumer group's committed offset, and seek readers that leave no
consumer group behind (a Spark task reads one slice and is gone: making, committing and
deleting a group for it cost round trips to the group coordinator and group rights on
the cluster).

Kafka's retention is by time and size only, so the committed offsets keep nothing; they
show lag tools how far the query is.

Readers fetch what every consumer fetches (``max_partition_fetch_bytes`` 1 MiB, or
``kafka.max_request_size`` if larger), not more: aiokafka receives a fetch response
whole into a growing buffer, and in a new process (Spark forks one for every query's
planner) a 7.5 MiB response cost several times a 1 MiB one to receive
(docs/benchmarks/spark.md).
"""

from __future__ import annotations

from collections.abc import Sequence

from msgstream.contract.backend import Client, ConsumedMessage, Consumer
from msgstream.streams.reader_access import QueryHold, ReaderAccess, SubscriptionHold

from .client import KafkaClient
from .ids import KafkaMessageID


class CommittedOffsetHold(SubscriptionHold):
    """The query's consumer group, its offset committed at the position: acknowledging
    the message before it (an acknowledged offset is the last one consumed)."""

    async def move(self, channel: str, consumer: Consumer, position: bytes) -> None:
        offset = KafkaMessageID.of(self.client.message_id_from_bytes(position)).offset
        if offset > 0:
            await consumer.ack(ConsumedMessage(channel, KafkaMessageID(offset - 1), b""))


class KafkaReaderAccess(ReaderAccess):
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


READER_ACCESS = KafkaReaderAccess()
