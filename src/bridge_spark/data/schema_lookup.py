"""A collection's schema read from its channels, without Spark.

``msgstream ingest`` and ``msgstream schema`` look the schema up before anything of Spark
starts, so a missing ``CreateCollectionMsg`` is reported in a second, not after Spark's
start-up. The lookup itself is the core's (:mod:`msgstream.streams.schema_lookup`); the bridge
reads through its own client (rocksmq read-only, next to a running producer) and makes
"none found" an error.
"""

from __future__ import annotations

from collections.abc import Sequence

from msgstream.configuration.config import Config
from msgstream.contract.backend import Client
from msgstream.streams.schema_lookup import find_collection_schema as find_declared_schema
from msgstream.wire.schema import CollectionSchema

from ..errors import SchemaNotFoundError
from .clients import open_reader
from .cursor import reader_subscription


async def schema_in_channels(
    client: Client,
    channels: Sequence[str],
    collection: str | None,
    *,
    query: str,
    timeout_s: float,
) -> CollectionSchema:
    """The schema of the first ``CreateCollectionMsg`` (of ``collection``, if given) in
    ``channels``, read from their beginning through ``client`` by a seek reader named
    after ``query``; :class:`SchemaNotFoundError` if there is
    none, ``TopicNotFoundError`` naming a missing channel."""
    found = await find_declared_schema(
        client,
        channels,
        collection,
        timeout_s=timeout_s,
        subscription=reader_subscription(query),
    )
    if found is None:
        which = f"collection {collection!r}" if collection else "any collection"
        raise SchemaNotFoundError(
            f"no CreateCollectionMsg for {which} in channels {list(channels)}; "
            "give the collection schema explicitly"
        )
    return found.schema


async def find_collection_schema(
    config: Config, channels: Sequence[str], collection: str | None = None
) -> CollectionSchema:
    """:func:`schema_in_channels` through a reader client of ``config``, closed after."""
    reader = open_reader(config)
    try:
        return await schema_in_channels(
            reader.client,
            channels,
            collection,
            query="msgstream-schema",
            timeout_s=config.msgstream.operation_timeout_s,
        )
    finally:
        await reader.client.close()
