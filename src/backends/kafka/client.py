"""The Kafka client: one shared producer, an admin connection, consumers per subscription."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition

from msgstream.configuration.config import MsgStreamConfig
from msgstream.contract.backend import MessageID, SubscriptionInfo
from msgstream.contract.channels import validate_channel_name, validate_subscription_name
from msgstream.errors import TopicNotFoundError
from msgstream.wire.position import SubscriptionPosition

from ..broker_client import BrokerClient
from . import connect, engines
from .admin import KafkaAdmin
from .aiokafka_private import metadata_client
from .consumer import KafkaConsumer
from .deadlines import SendDeadlines
from .failures import ERRORS
from .ids import KafkaMessageID
from .producer import KafkaProducer
from .settings import KafkaConfig, consumer_kwargs

_START_AT = {
    SubscriptionPosition.EARLIEST: "earliest",
    SubscriptionPosition.LATEST: "latest",
    SubscriptionPosition.UNKNOWN: "unknown",
}


class KafkaClient(BrokerClient):
    """A connection to the Kafka cluster at ``kafka.brokers`` (opened on first use; the
    plug-in's client factory). Every channel is a one-partition topic. ``kafka.client``
    picks the engine that sends and reads (see :mod:`.engines`)."""

    backend_name = "kafka"

    def __init__(self, section: KafkaConfig, shared: MsgStreamConfig) -> None:
        self.section = section
        self.brokers = section.brokers or ""
        super().__init__(ERRORS, self.brokers, shared.operation_timeout_s, shared)
        self.admin = KafkaAdmin(section, self.deadline_s)
        self.deadlines = SendDeadlines(self.deadline_s, self.brokers)
        self._offsets: AIOKafkaConsumer | None = None
        self._lock = asyncio.Lock()
        self.engine = engines.load(section.client)
        self._shared = self.engine.producer(section, self.deadline_s, self._lock, self.check_open)
        self._consumers: set[KafkaConsumer] = set()

    def _call(self, what: str, channel: str | None = None, operation: str = "use") -> Any:
        return self.calls.call(what, channel, operation)

    async def _offsets_reader(self) -> AIOKafkaConsumer:
        """A group-less consumer used only to ask for a topic's first and last offsets."""
        async with self._lock:
            self.check_open()
            if self._offsets is None:
                kwargs = consumer_kwargs(self.section, None)
                reader = connect.construct(AIOKafkaConsumer, kwargs, "consumer")
                await connect.start_or_release(
                    reader, "connecting", kwargs, self.deadline_s, reader.stop
                )
                self._offsets = reader
            return self._offsets

    async def create_producer(self, channel: str) -> KafkaProducer:
        self.check_open()
        validate_channel_name(channel)
        await self.admin.ensure_topic(channel)
        limit = self.section.max_request_size
        topic_limit = await self.admin.max_message_bytes(channel)
        if topic_limit is not None:
            limit = min(limit, topic_limit)
        return KafkaProducer(
            channel,
            limit,
            max_message_bytes=self.max_message_bytes,
            shared=self._shared,
            deadlines=self.deadlines,
            calls=self.calls,
        )

    async def subscribe(
        self, channel: str, subname: str, position: SubscriptionPosition
    ) -> KafkaConsumer:
        return await self._consumer(channel, subname, position, keeps_position=True)

    async def seek_reader(self, channel: str, name: str) -> KafkaConsumer:
        """A consumer of ``channel`` positioned by seeks alone that commits nothing, so it
        leaves no consumer group behind (``name`` names it in errors): what a reader that
        keeps no position needs (see :mod:`.reader_access`)."""
        return await self._consumer(
            channel, name, SubscriptionPosition.UNKNOWN, keeps_position=False
        )

    async def _consumer(
        self, channel: str, subname: str, position: SubscriptionPosition, *, keeps_position: bool
    ) -> KafkaConsumer:
        self.check_open()
        validate_channel_name(channel)
        validate_subscription_name(subname)
        await self.admin.ensure_topic(channel)
        inner = self.engine.reader(self.section, channel, subname, self.calls, keeps_position)
        consumer = KafkaConsumer(
            channel,
            subname,
            inner,
            hooks=self._hooks,
            calls=self.calls,
            keeps_position=keeps_position,
        )
        try:
            await consumer.start(_START_AT[position])
        except BaseException:
            await consumer.close()
            raise
        self._consumers.add(consumer)
        return consumer

    def forget_consumer(self, consumer: Any) -> None:
        self._consumers.discard(consumer)

    def earliest_message_id(self) -> KafkaMessageID:
        return KafkaMessageID(-1)

    def message_id_from_bytes(self, data: bytes) -> KafkaMessageID:
        return KafkaMessageID.parse(data)

    async def check_topic_valid(self, channel: str) -> None:
        self.check_open()
        validate_channel_name(channel)
        if not await self.admin.topic_exists(channel):
            raise TopicNotFoundError(channel, self.backend_name, self.admin.listed_topics())

    async def _bounds(self, channel: str) -> tuple[int, int]:
        """First offset and end offset (one past the last message) of ``channel``."""
        await self.check_topic_valid(channel)
        reader = await self._offsets_reader()
        partition = TopicPartition(channel, 0)
        async with self._call(f"reading the offsets of channel {channel!r}", channel, "describe"):
            await _tracked(reader, channel)
            first = (await reader.beginning_offsets([partition]))[partition]
            end = (await reader.end_offsets([partition]))[partition]
        return first, end

    async def get_latest_msg_id(self, channel: str) -> KafkaMessageID | None:
        first, end = await self._bounds(channel)
        return None if end <= first else KafkaMessageID(end - 1)

    async def peek(self, channel: str, msg_id: MessageID) -> bytes | None:
        """The message at an offset, read by the group-less offsets consumer."""
        offset = KafkaMessageID.of(msg_id).offset
        first, end = await self._bounds(channel)
        if not first <= offset < end:
            return None
        reader = await self._offsets_reader()
        partition = TopicPartition(channel, 0)
        async with self._call(f"reading channel {channel!r}", channel, "read"):
            reader.assign([partition])
            reader.seek(partition, offset)
            found = await reader.getmany(partition, timeout_ms=int(self.deadline_s * 1000))
        for record in found.get(partition, []):
            if record.offset == offset:
                return bytes(record.value)
        return None

    async def list_channels(self) -> list[str]:
        self.check_open()
        return await self.admin.list_topics()

    async def list_subscriptions(self, channel: str) -> list[SubscriptionInfo]:
        _, end = await self._bounds(channel)
        result = []
        for group in await self.admin.groups():
            committed = await self.admin.committed(group, channel)
            if committed is None:
                continue
            result.append(
                SubscriptionInfo(
                    channel=channel,
                    name=group,
                    acked_id=KafkaMessageID(committed - 1),
                    lag=max(end - committed, 0),
                )
            )
        return result

    async def delete_channel(self, channel: str) -> None:
        self.check_open()
        validate_channel_name(channel)
        await self.admin.delete_topic(channel)

    async def delete_subscription(self, channel: str, subname: str) -> None:
        """Forget ``subname``'s acknowledgements. In Kafka a subscription is a consumer group,
        which may span channels: this deletes the group (its consumers must be closed)."""
        self.check_open()
        validate_subscription_name(subname)
        await self.admin.delete_group(subname, channel)

    async def close(self) -> None:
        if not await self._state.close_after(self._consumers):
            return
        offsets, self._offsets = self._offsets, None
        with contextlib.suppress(Exception):  # the broker may be gone: closing succeeds
            await self._shared.close()
        if offsets is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(offsets.stop(), self.deadline_s)
        self.deadlines.close()
        await self.admin.close()


_METADATA_RETRIES = 2


async def _tracked(reader: AIOKafkaConsumer, topic: str) -> None:
    """Make ``reader``'s metadata cover ``topic`` (a no-op once it does).

    An offsets request for a topic its metadata does not cover yet fails inside aiokafka
    with a stale-metadata error, which it answers by sleeping ``retry_backoff_ms`` (100
    ms) before asking again: a tenth of a second on the first offsets of every channel.
    Asking for the topic's metadata first costs one round trip instead. aiokafka has no
    public call for it; ``add_topic`` of its client is what its own offset lookups use.

    Several channels asked at once share one metadata update, and one whose request was
    sent before their topic was added ends without it: then ask again (at most twice,
    as the topic exists; aiokafka's own retry covers a topic deleted meanwhile).
    """
    client = metadata_client(reader)
    await client.add_topic(topic)
    for _ in range(_METADATA_RETRIES):
        if client.cluster.partitions_for_topic(topic) is not None:
            return
        await client.force_metadata_update()
