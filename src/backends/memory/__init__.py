"""The ``memory`` backend: same semantics as rocksmq, nothing persisted.

Clients opened with the same ``name`` in one process share their channels, so a
producer and a consumer made by different clients meet, as with a real broker.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field

from msgstream.configuration.config import MsgStreamConfig

from ..log_client import LogClient, LogStore, Record, StoredSubscription
from ..log_client.store import FIRST_ID, Properties, now_ms
from .settings import MemoryConfig


@dataclass
class _Channel:
    ids: list[int] = field(default_factory=list)
    records: list[Record] = field(default_factory=list)
    next_id: int = FIRST_ID
    subscriptions: dict[str, StoredSubscription] = field(default_factory=dict)


class MemoryStore(LogStore):
    backend_name = "memory"

    def __init__(self, name: str = "default") -> None:
        super().__init__()
        self.name = name
        self._channels: dict[str, _Channel] = {}

    def has_channel(self, channel: str) -> bool:
        return channel in self._channels

    def ensure_channel(self, channel: str) -> None:
        self._channels.setdefault(channel, _Channel())

    def list_channels(self) -> list[str]:
        return sorted(self._channels)

    def delete_channel(self, channel: str) -> None:
        self._channels.pop(channel, None)

    def _channel(self, channel: str) -> _Channel:
        try:
            return self._channels[channel]
        except KeyError:
            from msgstream.errors import TopicNotFoundError

            raise TopicNotFoundError(channel, self.backend_name, self.list_channels()) from None

    def append(self, channel: str, payloads: Sequence[bytes], properties: Properties) -> range:
        state = self._channel(channel)
        first = state.next_id
        ids = range(first, first + len(payloads))
        state.ids.extend(ids)
        state.records.extend(Record(i, p, properties) for i, p in zip(ids, payloads, strict=True))
        state.next_id = first + len(payloads)
        return ids

    def read(self, channel: str, from_id: int, limit: int) -> list[Record]:
        state = self._channel(channel)
        start = bisect.bisect_left(state.ids, from_id)
        return state.records[start : start + limit]

    def first_id(self, channel: str) -> int | None:
        state = self._channel(channel)
        return state.ids[0] if state.ids else None

    def next_id(self, channel: str) -> int:
        state = self._channels.get(channel)
        return state.next_id if state is not None else FIRST_ID

    def get_subscription(self, channel: str, name: str) -> StoredSubscription | None:
        state = self._channels.get(channel)
        return None if state is None else state.subscriptions.get(name)

    def put_subscription(self, channel: str, name: str, next_id: int) -> None:
        self._channel(channel).subscriptions[name] = StoredSubscription(name, next_id, now_ms())

    def list_subscriptions(self, channel: str) -> list[StoredSubscription]:
        return sorted(self._channel(channel).subscriptions.values(), key=lambda s: s.name)

    def delete_subscription(self, channel: str, name: str) -> None:
        state = self._channels.get(channel)
        if state is not None:
            state.subscriptions.pop(name, None)

    def close(self) -> None:
        """Channels live as long as the process; closing a client keeps them."""


_STORES: dict[str, MemoryStore] = {}


def memory_store(name: str = "default") -> MemoryStore:
    """The process-wide store called ``name``."""
    store = _STORES.get(name)
    if store is None:
        store = _STORES[name] = MemoryStore(name)
    return store


def new_client(section: MemoryConfig, shared: MsgStreamConfig) -> LogClient:
    """A client of the process-wide store ``memory.name`` (the plug-in's client factory)."""
    return LogClient(memory_store(section.name), max_message_bytes=shared.max_message_bytes)
