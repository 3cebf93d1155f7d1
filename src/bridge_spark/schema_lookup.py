"""A collection's schema read from its channels, without Spark.

``msgstream ingest`` and ``msgstream schema`` look the schema up before anything of Spark
starts, so a missing ``CreateCollectionMsg`` is reported in a second, not after Spark's
start-up.
"""

from __future__ import annotations

from collections.abc import Sequence

from msgstream.config import Config
from msgstream.schema import CollectionSchema

from .clients import open_reader
from .cursor import reader_subscription
from .frames import FrameKind
from .planner import RowFilter, SlicePlanner


async def find_collection_schema(
    config: Config, channels: Sequence[str], collection: str | None = None
) -> CollectionSchema:
    """The schema of the first ``CreateCollectionMsg`` (of ``collection``, if given) in
    ``channels``, read from their beginning under a private subscription removed after;
    :class:`~msgstream.bridge_spark.SchemaNotFoundError` if there is none,
    ``TopicNotFoundError`` naming a missing channel."""
    reader = open_reader(config)
    planner = SlicePlanner(
        reader.client,
        channels,
        reader_subscription("msgstream-schema"),
        RowFilter(collection or "", FrameKind.CHANGES),
        timeout_s=config.msgstream.operation_timeout_s,
    )
    try:
        return await planner.find_schema(collection)
    finally:
        await planner.close()
        await reader.client.close()
