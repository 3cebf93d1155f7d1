"""Topic and consumer-group management for the Kafka backend (one admin client per client).

Topic existence is checked by listing topics, never by a metadata request for the topic:
aiokafka's metadata requests allow auto-creation, so asking about a missing topic could
create it on a broker with ``auto.create.topics.enable``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from aiokafka import TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.protocol.admin import DeleteGroupsRequest

from msgstream.errors import BackendUnavailableError

from . import connect
from .aiokafka_private import admin_request_sender
from .failures import ANY_CHANNEL, broker_call, refusal_of_code
from .settings import KafkaConfig, admin_kwargs, topic_configs

_TOPIC_ALREADY_EXISTS = 36
_UNKNOWN_TOPIC = 3
_GROUP_ID_NOT_FOUND = 69
_NON_EMPTY_GROUP = 68
_INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})


class KafkaAdmin:
    def __init__(self, section: KafkaConfig, deadline_s: float) -> None:
        self._section = section
        self._brokers = section.brokers or ""
        self._deadline = deadline_s
        self._client: AIOKafkaAdminClient | None = None
        self._lock = asyncio.Lock()
        self._known_topics: set[str] = set()
        self._default_replication: int | None = None

    def _call(self, what: str, topic: str | None = None, operation: str = "describe") -> Any:
        """A broker call; an ACL refusal names ``operation`` on ``topic`` (else any)."""
        return broker_call(what, self._brokers, self._deadline, topic, operation)

    async def _admin(self) -> AIOKafkaAdminClient:
        async with self._lock:
            if self._client is None:
                kwargs = admin_kwargs(self._section)
                client = AIOKafkaAdminClient(**kwargs)
                await connect.start_or_release(
                    client, "connecting", kwargs, self._deadline, client.close
                )
                self._client = client
            return self._client

    async def list_topics(self) -> list[str]:
        admin = await self._admin()
        async with self._call("listing topics"):
            topics = await admin.list_topics()
        self._known_topics = set(topics)
        return self.listed_topics()

    def listed_topics(self) -> list[str]:
        """The topics of the last listing, and those created or deleted here since (no
        internal topic): what a topic found missing is compared with, no round trip."""
        return sorted(t for t in self._known_topics if t not in _INTERNAL_TOPICS)

    async def topic_exists(self, topic: str) -> bool:
        if topic in self._known_topics:
            return True
        return topic in await self.list_topics()

    async def ensure_topic(self, topic: str) -> None:
        """Create ``topic`` with one partition unless it exists (races are fine)."""
        if await self.topic_exists(topic):
            return
        section = self._section
        configs = topic_configs(section)
        new = NewTopic(topic, 1, await self._replication_factor(), topic_configs=configs)
        admin = await self._admin()
        what = f"creating topic {topic!r}"
        async with self._call(what, topic, "create"):
            response = await admin.create_topics([new])
        for name, code, *message in response.topic_errors:
            if code not in (0, _TOPIC_ALREADY_EXISTS):
                detail = message[0] if message else ""
                refused = refusal_of_code(code, detail, what, self._brokers, name, "create")
                if refused is not None:
                    raise refused
                raise BackendUnavailableError(
                    f"kafka at {self._brokers}: creating topic {name!r} failed: "
                    f"error code {code} {detail}".rstrip()
                )
        self._known_topics.add(topic)
        await self._wait_until_visible(topic)

    async def _wait_until_gone(self, topic: str) -> None:
        """A deleted topic takes a moment to leave the brokers' metadata; until it has,
        listing the channels or checking this one would still find it."""
        await self._wait_for(topic, "to be deleted", _absent)

    async def _wait_until_visible(self, topic: str) -> None:
        """A created topic takes a moment to reach every broker's metadata."""
        await self._wait_for(topic, "to appear", _present)

    async def _wait_for(
        self, topic: str, what: str, seen: Callable[[list[dict[str, Any]]], bool]
    ) -> None:
        """Describe ``topic`` every 50 ms until ``seen`` holds of the answer (the call's
        deadline bounds it)."""
        admin = await self._admin()
        async with self._call(f"waiting for topic {topic!r} {what}", topic):
            while True:
                if seen(await admin.describe_topics([topic])):
                    return
                await asyncio.sleep(0.05)  # metadata has no change notification to wait on

    async def delete_topic(self, topic: str) -> None:
        admin = await self._admin()
        what = f"deleting topic {topic!r}"
        async with self._call(what, topic, "delete"):
            response = await admin.delete_topics([topic])
        self._known_topics.discard(topic)
        for name, code, *_ in response.topic_error_codes:
            if code not in (0, _UNKNOWN_TOPIC):
                refused = refusal_of_code(code, "", what, self._brokers, name, "delete")
                if refused is not None:
                    raise refused
                raise BackendUnavailableError(
                    f"kafka at {self._brokers}: deleting topic {name!r} failed: error code {code}"
                )
        await self._wait_until_gone(topic)

    async def _replication_factor(self) -> int:
        """``kafka.replication_factor``, where -1 means the brokers' own
        ``default.replication.factor``: aiokafka's ``NewTopic`` refuses -1 itself, so the
        value is read from a broker once (1, Kafka's default, if it does not say)."""
        wanted = self._section.replication_factor
        if wanted != -1:
            return wanted
        if self._default_replication is None:
            admin = await self._admin()
            async with self._call("reading the brokers' default.replication.factor"):
                cluster = await admin.describe_cluster()
                node = min(int(b["node_id"]) for b in cluster["brokers"])
                wanted_key = {"default.replication.factor": None}
                resource = ConfigResource(ConfigResourceType.BROKER, str(node), wanted_key)
                responses = await admin.describe_configs([resource])
            found = 1
            for response in responses:
                for _code, _message, _type, _name, entries, *_ in response.resources:
                    for name, value, *_ in entries:
                        if name == "default.replication.factor" and value is not None:
                            found = int(value)
            self._default_replication = found
        return self._default_replication

    async def max_message_bytes(self, topic: str) -> int | None:
        """The topic's ``max.message.bytes``, or None when the broker does not say."""
        admin = await self._admin()
        resource = ConfigResource(ConfigResourceType.TOPIC, topic, {"max.message.bytes": None})
        try:
            async with self._call(f"reading the config of topic {topic!r}", topic):
                responses = await admin.describe_configs([resource])
        except BackendUnavailableError:
            return None
        for response in responses:
            for _code, _message, _type, _name, entries, *_ in response.resources:
                for name, value, *_ in entries:
                    if name == "max.message.bytes" and value is not None:
                        return int(value)
        return None

    async def groups(self) -> list[str]:
        admin = await self._admin()
        async with self._call("listing consumer groups"):
            listed = await admin.list_consumer_groups()
        return sorted(str(group[0]) for group in listed)

    async def committed(self, group: str, topic: str) -> int | None:
        """The offset ``group`` committed on ``topic`` (the next one it will read)."""
        admin = await self._admin()
        partition = TopicPartition(topic, 0)
        async with self._call(f"reading offsets of subscription {group!r}", topic):
            offsets = await admin.list_consumer_group_offsets(group, partitions=[partition])
        found = offsets.get(partition)
        return None if found is None or found.offset < 0 else int(found.offset)

    async def delete_group(self, group: str, channel: str | None = None) -> None:
        """Forget a subscription's committed offsets (its consumers must be closed).
        ``channel``: the one an ACL refusal names (a group may span channels).

        aiokafka has no public call for DeleteGroups, so the request goes through the
        admin client's request sender to the group's coordinator.
        """
        admin = await self._admin()
        what = f"deleting subscription {group!r}"
        async with self._call(what, channel, "delete"):
            coordinator = await admin.find_coordinator(group)
            send = admin_request_sender(admin)
            response = await send(DeleteGroupsRequest([group]), coordinator)
        for name, code in response.results:
            if code == _NON_EMPTY_GROUP:
                raise BackendUnavailableError(
                    f"kafka: subscription {name!r} still has live consumers; close them first"
                )
            refused = refusal_of_code(
                code, "", what, self._brokers, channel or ANY_CHANNEL, "delete"
            )
            if refused is not None:
                raise refused
            if code not in (0, _GROUP_ID_NOT_FOUND):
                raise BackendUnavailableError(
                    f"kafka at {self._brokers}: deleting subscription {name!r} failed: "
                    f"error code {code}"
                )

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.close()


def _present(described: list[dict[str, Any]]) -> bool:
    return any(t["error_code"] == 0 and t["partitions"] for t in described)


def _absent(described: list[dict[str, Any]]) -> bool:
    return all(t["error_code"] == _UNKNOWN_TOPIC for t in described)
