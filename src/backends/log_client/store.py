"""The storage interface under the in-process backends (memory, rocksmq), and its wake-up
signal."""

from __future__ import annotations

import asyncio
import contextlib
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from msgstream.contract.backend import NO_PROPERTIES

Properties = Mapping[str, str]


class Record(NamedTuple):
    """One stored message (a named tuple: one is made per message read)."""

    msg_id: int
    payload: bytes
    properties: Properties


class StoredBatch(NamedTuple):
    """Records read in one go, column by column (see :meth:`LogStore.read_batch`)."""

    ids: list[bytes]
    """Each record's id as 8 big-endian bytes (signed), the form a MessageID carries."""
    payloads: list[bytes]
    properties: list[Properties] | None
    """Each record's properties, or None when no record of the batch has any."""
    next_id: int
    """The id after the last record read."""


@dataclass(frozen=True, slots=True)
class StoredSubscription:
    """A persisted subscription cursor: the next id to deliver after the last ack."""

    name: str
    next_id: int
    last_active_ms: int


def now_ms() -> int:
    return time.time_ns() // 1_000_000


FIRST_ID = 1
"""Ids start at 1 in every channel; 0 sorts before everything (the earliest id)."""


class LogStore(ABC):
    """Channels of id-ordered records plus subscription cursors.

    Appends wake consumers of the same process through per-channel events: a waiter
    takes the channel's event (creating it if needed), re-checks the log, then waits;
    ``notify`` removes the event and sets it, so the next waiter gets a fresh one and
    no wake-up is lost. An append made in another thread (a shared store's owner serves
    other processes from a thread of its own) wakes them with :meth:`notify_threadsafe`;
    a :attr:`watcher` hears of every ``notify`` (that thread's waiters).
    """

    backend_name: str
    read_only: bool = False
    watcher: Callable[[str], None] | None = None
    """Called with the channel on every :meth:`notify`, when set."""

    def __init__(self) -> None:
        self._events: dict[str, _Wakeup] = {}

    # --- channels -------------------------------------------------------------------
    @abstractmethod
    def has_channel(self, channel: str) -> bool: ...

    @abstractmethod
    def ensure_channel(self, channel: str) -> None: ...

    @abstractmethod
    def list_channels(self) -> list[str]: ...

    @abstractmethod
    def delete_channel(self, channel: str) -> None: ...

    # --- records --------------------------------------------------------------------
    @abstractmethod
    def append(self, channel: str, payloads: Sequence[bytes], properties: Properties) -> range:
        """Store payloads in order; return their ids (consecutive: a channel's ids have no
        gaps). Durable when it returns."""

    def append_one(self, channel: str, payload: bytes) -> int:
        """:meth:`append` of one payload without properties, returning its id: a send of
        one message. Stores override it when one write costs them less than a batch."""
        return self.append(channel, (payload,), NO_PROPERTIES)[0]

    @abstractmethod
    def read(self, channel: str, from_id: int, limit: int) -> list[Record]:
        """Up to ``limit`` records with id >= ``from_id``, in order."""

    def read_batch(self, channel: str, from_id: int, limit: int) -> StoredBatch | None:
        """What :meth:`read` returns, as columns (None when there is nothing). Stores
        override it when they can build the columns without a record per message."""
        records = self.read(channel, from_id, limit)
        if not records:
            return None
        properties = [r.properties for r in records]
        return StoredBatch(
            [r.msg_id.to_bytes(8, "big", signed=True) for r in records],
            [r.payload for r in records],
            properties if any(properties) else None,
            records[-1].msg_id + 1,
        )

    @abstractmethod
    def first_id(self, channel: str) -> int | None:
        """The smallest retained id, or None if the channel holds nothing."""

    @abstractmethod
    def next_id(self, channel: str) -> int:
        """The id the next append will get."""

    def first_readable(self, channel: str) -> int:
        """The smallest id a read can still return: ids below it were deleted by retention,
        and every id from it up to :meth:`next_id` is stored. Reads start no earlier."""
        return FIRST_ID

    # --- subscriptions --------------------------------------------------------------
    @abstractmethod
    def get_subscription(self, channel: str, name: str) -> StoredSubscription | None: ...

    @abstractmethod
    def put_subscription(self, channel: str, name: str, next_id: int) -> None: ...

    @abstractmethod
    def list_subscriptions(self, channel: str) -> list[StoredSubscription]: ...

    @abstractmethod
    def delete_subscription(self, channel: str, name: str) -> None: ...

    def advance_subscription(self, channel: str, name: str, next_id: int) -> None:
        """Move subscription ``name`` to ``next_id`` unless it already stands there or
        further (acknowledgements are cumulative: a cursor never moves back). Stores
        written from several threads override it to do this atomically."""
        current = self.get_subscription(channel, name)
        if current is None or next_id > current.next_id:
            self.put_subscription(channel, name, next_id)

    @abstractmethod
    def close(self) -> None: ...

    def consumer_opened(self, channel: str, name: str) -> None:  # noqa: B027 (optional hook)
        """An open consumer keeps its subscription alive (no idle expiry)."""

    def consumer_closed(self, channel: str, name: str) -> None:  # noqa: B027 (optional hook)
        """The counterpart of :meth:`consumer_opened`."""

    # --- wake-ups -------------------------------------------------------------------
    def last_id(self, channel: str) -> int | None:
        last = self.next_id(channel) - 1
        first = self.first_id(channel)
        return last if first is not None and last >= first else None

    def notify(self, channel: str) -> None:
        """Wake every waiter of ``channel`` (after an append, a delete or a close), from
        the thread of the waiters' event loop."""
        event = self._events.pop(channel, None)
        if event is not None:
            event.set()
        watcher = self.watcher
        if watcher is not None:
            watcher(channel)

    def notify_threadsafe(self, channel: str) -> None:
        """:meth:`notify`'s wake-up of this process's waiters, from any thread."""
        event = self._events.pop(channel, None)
        if event is not None:
            with contextlib.suppress(RuntimeError):  # its loop is closed: nobody waits
                event.loop.call_soon_threadsafe(event.set)

    async def wait_for_append(self, channel: str, next_id: int) -> None:
        """Return once the channel holds an id >= ``next_id`` or ``notify`` was called."""
        event = self._events.get(channel)
        if event is None:
            event = self._events[channel] = _Wakeup()
        if self.next_id(channel) > next_id:
            return
        await event.wait()


class _Wakeup(asyncio.Event):
    """A channel's wake-up event, which knows its event loop (to be set from another
    thread)."""

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.get_running_loop()
