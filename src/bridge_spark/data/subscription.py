"""The streaming query's durable subscription: what retention keeps for the query.

Spark's checkpoint, not a subscription, decides where a query resumes. But a store or
broker deletes what no subscription still needs, so the source's driver holds one
subscription per channel under the query's name (the ``subscription`` option) from the
query's first offset on, and moves it to every offset Spark commits. How it is held is
the backend's (its reader access's :class:`~msgstream.streams.reader_access.QueryHold`): by
default a durable subscription set by seeking (Pulsar: its acknowledged position keeps
the backlog); the embedded store's read-only driver leaves a hold file its writer's
retention honours; Kafka commits the consumer group's offsets (its retention is by time
and size only, but lag tools see how far the query is).

Readers (the planner, the executors) read under names of their own
(:mod:`bridge_spark.data.cursor`), so nothing they do moves the query's subscription. Dropping
it (:func:`drop_subscription`, once the query is stopped for good) lets retention delete
what the query would have read next.
"""

from __future__ import annotations

from collections.abc import Sequence

from msgstream.configuration.config import Config, resolve_backend
from msgstream.streams.reader_access import QueryHold, ReaderClient

from .clients import access_of, client_access
from .cursor import planner_subscription
from .offsets import SliceOffset


class QuerySubscription:
    """One channel set's durable subscription under the query's name, moved to Spark's
    offsets (a :class:`~msgstream.streams.reader_access.QueryHold` of the backend's)."""

    def __init__(self, hold: QueryHold) -> None:
        self.hold = hold

    async def ensure(self, offset: SliceOffset) -> None:
        """Make sure the subscription exists: one that does not starts at ``offset``."""
        await self.hold.ensure(offset.positions)

    async def commit(self, offset: SliceOffset) -> None:
        """Spark committed ``offset``: everything before its positions may go."""
        await self.hold.commit(offset.positions)

    async def close(self) -> None:
        """Let go of what the subscription holds open (it stays on the backend)."""
        await self.hold.close()


def query_subscription(
    reader: ReaderClient, channels: Sequence[str], name: str
) -> QuerySubscription:
    """The query's subscription on the backend ``reader`` reads."""
    client = reader.client
    return QuerySubscription(client_access(client).hold(client, channels, name))


async def drop_subscription(config: Config, channels: Sequence[str], name: str) -> None:
    """Drop a stopped query's subscription ``name`` on ``channels`` (and its planner's), so
    retention no longer keeps what it would have read (its checkpoint then resumes only
    while that data is still there). ``config`` points at the backend, as the query's
    options did."""
    access = access_of(resolve_backend(config))
    client = access.open(config).client
    try:
        for channel in channels:
            await access.drop(client, channel, {name, planner_subscription(name)})
    finally:
        await client.close()
