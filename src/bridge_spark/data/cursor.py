"""Raw reading of one channel between two points, on the public backend API.

The planner and the Spark executors need messages' headers (type and time range) far
more often than their bodies, so they read raw payloads through a backend ``Consumer``
and decode only what they keep. A :class:`RawCursor` reads from a position (inclusive,
or the channel's beginning) up to the channel's newest MessageID as of the call, so a
read never waits for messages that do not exist yet.

A cursor seeks where it likes and keeps no position, so it never reads under the query's
own subscription (which follows Spark's commits, see :mod:`bridge_spark.data.subscription`)
but through its backend's seek reader
(:meth:`~msgstream.streams.reader_access.ReaderAccess.seek_reader`), named after the query --
the driver's planner under one name per query (:func:`planner_subscription`: where a seek
reader is a subscription, its process may be killed before it closes, so a leftover is
one name that :func:`~bridge_spark.data.subscription.drop_subscription` drops too), each
executor task under its own (:func:`reader_subscription`) -- and closes it when done,
which removes whatever it left on the backend.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncGenerator, Iterator
from contextlib import aclosing
from dataclasses import dataclass

from msgstream.contract.backend import Client, ConsumedBatch, ConsumedMessage, Consumer, MessageID
from msgstream.errors import CodecError, ReadIncompleteError
from msgstream.observability.logs import fields, get_logger
from msgstream.streams.raw_read import read_through

from ..errors import SliceIncompleteError
from .clients import client_access

log = get_logger(__name__)

DEFAULT_TIMEOUT_S = 30.0


@dataclass(slots=True)
class SkipStats:
    """Messages a bridge reader could not use: counted and logged, never silent."""

    undecodable: int = 0
    late: int = 0


def log_undecodable(channel: str, raw: ConsumedMessage, exc: CodecError, stats: SkipStats) -> None:
    stats.undecodable += 1
    log.warning(
        "skipping undecodable message on channel %r at MessageID %r: %s",
        channel,
        raw.msg_id,
        exc,
        extra=fields(channel=channel),
    )


class RawCursor:
    """One channel, read raw. Open with :meth:`open`, then :meth:`read` ranges."""

    def __init__(
        self, client: Client, channel: str, subscription: str, timeout_s: float = DEFAULT_TIMEOUT_S
    ) -> None:
        self.client = client
        self.channel = channel
        self.subscription = subscription
        self.timeout_s = timeout_s
        self._consumer: Consumer | None = None

    async def open(self) -> None:
        """Open the seek reader (every read seeks first). ``TopicNotFoundError`` names a
        channel that does not exist."""
        await self.client.check_topic_valid(self.channel)
        self._consumer = await client_access(self.client).seek_reader(
            self.client, self.channel, self.subscription
        )

    async def close(self) -> None:
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            await client_access(self.client).close_seek_reader(
                self.client, consumer, self.subscription
            )

    def _require(self) -> Consumer:
        if self._consumer is None:
            raise RuntimeError(f"cursor of channel {self.channel!r} is not open")
        return self._consumer

    async def latest(self) -> MessageID | None:
        return await self.client.get_latest_msg_id(self.channel)

    async def read(self, start: bytes | None) -> AsyncGenerator[ConsumedBatch, None]:
        """Batches of raw messages from ``start`` (inclusive; None: the beginning) up to
        and including the newest message that existed when the read began, as columns
        (payloads and MessageID bytes; ``message(i)`` rebuilds one in full)."""
        consumer = self._require()
        last = await self.latest()
        if last is None:
            return
        if start is None:
            await consumer.seek_to_earliest()
        else:
            first = self.client.message_id_from_bytes(start)
            if last < first:
                return
            await consumer.seek(first, inclusive=True)
        reading = read_through(consumer, last, self.client.message_id_from_bytes, self.timeout_s)
        try:
            async with aclosing(reading):
                async for batch in reading:
                    yield batch
        except ReadIncompleteError as exc:
            raise SliceIncompleteError(str(exc)) from None


def messages(batch: ConsumedBatch) -> Iterator[ConsumedMessage]:
    """Each message of ``batch`` in full, in order."""
    return map(batch.message, range(len(batch)))


def planner_subscription(query: str) -> str:
    """The subscription name the driver's planner reads under."""
    return f"{query}.planner"


def reader_subscription(query: str) -> str:
    """A reader's private subscription name, derived from the query's."""
    return f"{query}.reader-{secrets.token_hex(4)}"
