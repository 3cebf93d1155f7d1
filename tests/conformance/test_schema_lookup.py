"""A collection's schema as its channels declare it (:mod:`msgstream.streams.schema_lookup`), on
every backend: what ``msgstream produce`` checks its rows against and the Spark bridge
builds its frames from."""

from __future__ import annotations

import logging

import pytest

from harness import BackendHarness
from msgstream import (
    CollectionSchema,
    CreateCollectionMsg,
    DataType,
    FieldSchema,
    TimeTickMsg,
    TopicNotFoundError,
    encode,
)
from msgstream.contract.backend import AdminClient, Client
from msgstream.streams.schema_lookup import DeclaredSchema, find_collection_schema

TIMEOUT_S = 10.0


def schema(name: str, *extra: str) -> CollectionSchema:
    fields = [FieldSchema("id", DataType.INT64, is_primary=True)]
    fields += [FieldSchema(f, DataType.VARCHAR, nullable=True) for f in extra]
    return CollectionSchema(name, tuple(fields))


def create(collection: CollectionSchema, ts: int) -> bytes:
    return encode(
        CreateCollectionMsg(
            msg_id=ts, timestamp=ts, source_id=1, collection_name=collection.name,
            schema=collection,
        )
    )  # fmt: skip


def tick(ts: int) -> bytes:
    return encode(TimeTickMsg(msg_id=ts, timestamp=ts, source_id=1))


async def write(client: Client, channel: str, payloads: list[bytes]) -> None:
    """Create ``channel`` and send ``payloads`` to it (none: it stays empty)."""
    producer = await client.create_producer(channel)
    if payloads:  # Kafka's send_many([]) never completes
        await producer.send_many(payloads)
    await producer.close()


async def lookup_subscriptions(client: Client, channels: list[str]) -> list[str]:
    """The lookup's private subscriptions left on ``channels`` (it removes them)."""
    if not isinstance(client, AdminClient):
        return []
    return [
        info.name
        for channel in channels
        for info in await client.list_subscriptions(channel)
        if info.name.startswith("msgstream-schema-")
    ]


async def test_the_first_create_of_the_collection_in_channel_order(
    backend: BackendHarness,
) -> None:
    client = backend.client()
    a, b, empty = backend.channels(3, "lookup")
    orders_a, orders_b, other = schema("orders", "a"), schema("orders", "b"), schema("other")
    await write(client, a, [tick(1), create(other, 2), tick(3), create(orders_a, 4)])
    await write(client, b, [create(orders_b, 5)])
    await write(client, empty, [])

    async def find(channels: list[str], collection: str | None) -> DeclaredSchema | None:
        return await find_collection_schema(client, channels, collection, timeout_s=TIMEOUT_S)

    assert await find([a, b], "orders") == DeclaredSchema(orders_a, a)
    assert await find([b, a], "orders") == DeclaredSchema(orders_b, b)
    assert await find([empty, a], None) == DeclaredSchema(other, a)  # any collection
    assert await find([a, b, empty], "nothing") is None
    assert await lookup_subscriptions(client, [a, b, empty]) == []


async def test_a_missing_channel_is_named_or_declares_nothing(backend: BackendHarness) -> None:
    client = backend.client()
    present, ghost = backend.channels(2, "lookup")
    orders = schema("orders")
    await write(client, present, [create(orders, 1)])
    with pytest.raises(TopicNotFoundError) as missing:
        await find_collection_schema(client, [present, ghost], "orders", timeout_s=TIMEOUT_S)
    assert missing.value.channel == ghost
    found = await find_collection_schema(
        client, [ghost, present], "orders", timeout_s=TIMEOUT_S, missing_ok=True
    )
    assert found == DeclaredSchema(orders, present)
    with pytest.raises(TopicNotFoundError):  # the lookup created nothing
        await client.check_topic_valid(ghost)


async def test_an_undecodable_message_is_logged_and_skipped(
    backend: BackendHarness, caplog: pytest.LogCaptureFixture
) -> None:
    client = backend.client()
    channel = backend.channel("lookup")
    orders = schema("orders")
    await write(client, channel, [tick(1), b"not a message", create(orders, 2)])
    with caplog.at_level(logging.WARNING, logger="msgstream.schema_lookup"):
        found = await find_collection_schema(client, [channel], "orders", timeout_s=TIMEOUT_S)
    assert found == DeclaredSchema(orders, channel)
    warnings = [r.getMessage() for r in caplog.records if r.name == "msgstream.schema_lookup"]
    assert len(warnings) == 1
    assert warnings[0].startswith(
        f"skipping undecodable message on channel {channel!r} at MessageID "
    )
