"""The store-side steps of the log client's operations, in one place.

:class:`~.client.LogClient` runs them on its own store; the owner of a shared rocksmq
store runs the very same functions for the processes attached to it, so a subscription,
a seek or an acknowledgement means the same thing whichever process asks.
"""

from __future__ import annotations

from msgstream.errors import InvalidPositionError, TopicNotFoundError
from msgstream.wire.position import SubscriptionPosition

from .store import LogStore, StoredSubscription


def open_subscription(
    store: LogStore, channel: str, subname: str, position: SubscriptionPosition
) -> int | None:
    """Where a new consumer of ``subname`` reads first (None: at no position, a seek
    follows). A missing channel is created (refused on a read-only store); a new
    subscription is saved at its start; the consumer counts as open (no idle expiry)."""
    if not store.has_channel(channel):
        if store.read_only:
            raise TopicNotFoundError(channel, store.backend_name, store.list_channels())
        store.ensure_channel(channel)
    existing = store.get_subscription(channel, subname)
    start: int | None
    if existing is not None:
        start = existing.next_id
    elif position is SubscriptionPosition.EARLIEST:
        first = store.first_id(channel)
        start = store.next_id(channel) if first is None else first
    elif position is SubscriptionPosition.LATEST:
        start = store.next_id(channel)
    else:
        start = None
    if existing is None and start is not None and not store.read_only:
        store.put_subscription(channel, subname, start)
    store.consumer_opened(channel, subname)
    return start


def seek_target(store: LogStore, channel: str, subname: str, msg_id: int, inclusive: bool) -> int:
    """Where a consumer reads next after seeking to ``msg_id`` (``inclusive``): from there,
    or from the first retained message if that is later. A position past the channel's
    end is refused (it would silently swallow the messages sent until the end reached
    it). A subscription that was never saved is saved there."""
    target = msg_id if inclusive else msg_id + 1
    end = store.next_id(channel)
    if target > end:
        last = store.last_id(channel)
        raise InvalidPositionError(
            f"cannot seek channel {channel!r} to MessageID {msg_id} "
            f"({'inclusive' if inclusive else 'exclusive'}): past the channel's end "
            + ("(it is empty" if last is None else f"(its last message is id {last}")
            + f"; the next message will get id {end})"
        )
    next_read = max(target, store.first_readable(channel))
    if store.get_subscription(channel, subname) is None:
        store.put_subscription(channel, subname, next_read)
    return next_read


def check_channel(store: LogStore, channel: str) -> None:
    if not store.has_channel(channel):
        raise TopicNotFoundError(channel, store.backend_name, store.list_channels())


def latest_id(store: LogStore, channel: str) -> int | None:
    """The id of the channel's last message (None: it holds none)."""
    check_channel(store, channel)
    return store.last_id(channel)


def retained(store: LogStore, channel: str) -> tuple[int, int] | None:
    """The first retained id and how many are retained from it on (None: none)."""
    first, last = store.first_id(channel), store.last_id(channel)
    if first is None or last is None:
        return None
    return first, last - first + 1


def peek(store: LogStore, channel: str, msg_id: int) -> bytes | None:
    """The payload of message ``msg_id`` (None when it is not stored)."""
    records = store.read(channel, msg_id, 1)
    return records[0].payload if records and records[0].msg_id == msg_id else None


def subscriptions(store: LogStore, channel: str) -> tuple[int, list[StoredSubscription]]:
    """The channel's next id and its subscriptions (holds included)."""
    check_channel(store, channel)
    return store.next_id(channel), store.list_subscriptions(channel)
