"""Reading what a channel holds now, raw: payloads up to the MessageID newest at the start.

A caller that needs messages' headers far more often than their bodies (the Spark
bridge's planner and executors, a lookup of a collection's schema) reads raw payloads
through a backend ``Consumer`` under a private subscription, decodes only what it keeps,
and removes that subscription when done. :func:`read_through` reads from the consumer's
position up to a MessageID known to exist, so a read never waits for messages that do not
exist yet; :func:`release_subscription` removes the private subscription.
"""

from __future__ import annotations

import asyncio
import bisect
from collections.abc import AsyncGenerator, Callable

from ..contract.backend import AdminClient, Client, ConsumedBatch, Consumer, MessageID
from ..errors import ReadIncompleteError
from ..observability.logs import fields, get_logger
from .reader import batch_reader

log = get_logger(__name__)

READ_BATCH = 512
"""Messages asked for per receive."""


async def read_through(
    consumer: Consumer,
    last: MessageID,
    parse: Callable[[bytes], MessageID],
    timeout_s: float,
) -> AsyncGenerator[ConsumedBatch, None]:
    """Batches of raw messages from ``consumer``'s position (seek first) up to and
    including MessageID ``last``, as columns (payloads and MessageID bytes;
    ``message(i)`` rebuilds one in full); ``parse`` reads a MessageID from its bytes.
    :class:`ReadIncompleteError` if nothing arrives within ``timeout_s`` while messages up
    to ``last`` are still due."""
    channel = consumer.channel
    receive_batch = batch_reader(consumer)  # columns, no object per message, if it can
    while True:
        if receive_batch is not None:
            batch = receive_batch(READ_BATCH)
        else:
            batch = ConsumedBatch.of(channel, consumer.receive_nowait(READ_BATCH))
        if not len(batch):
            try:
                async with asyncio.timeout(timeout_s):
                    batch = ConsumedBatch.of(channel, [await consumer.receive()])
            except TimeoutError:
                raise ReadIncompleteError(
                    f"channel {channel!r}: messages up to MessageID {last!r} exist "
                    f"but none arrived within {timeout_s:g} s"
                ) from None
        ids = batch.id_bytes
        if last <= parse(ids[-1]):
            cut = bisect.bisect_left(ids, last, key=parse)
            yield batch.first(cut + 1)
            return
        yield batch


async def release_subscription(client: Client, channel: str, name: str) -> None:
    """Remove a reader's private subscription ``name`` of ``channel`` (a client without
    the admin API keeps none to remove). A failure is logged, not raised: the read itself
    succeeded."""
    if not isinstance(client, AdminClient):
        return
    try:
        await client.delete_subscription(channel, name)
    except Exception as exc:  # a leftover reader subscription must not fail the read
        log.warning(
            "could not remove reader subscription %r of channel %r (%s); remove it with "
            "the backend's tools, it may keep data from retention",
            name,
            channel,
            exc,
            extra=fields(channel=channel, subscription=name),
        )
