"""What a backend offers processes that read it while another one writes: its reader access.

The Spark bridge reads channels from processes of its own -- the driver's planner, each
executor task -- next to the process that produces, and keeps what a streaming query
has not committed from retention. How depends on the backend, so it is part of the
backend's plug-in spec (:attr:`~msgstream.configuration.plugins.BackendSpec.reader_access`, a
``"module:attribute"`` naming a :class:`ReaderAccess`), and the bridge names no backend.
A reader access says

- how such a process opens the backend (:meth:`ReaderAccess.open`, a :class:`ReaderClient`),
  and how a configuration is made to mean the same in a process with another working
  directory or environment (:meth:`ReaderAccess.resolved`);
- how a query's position is kept from retention (:meth:`ReaderAccess.hold`, a
  :class:`QueryHold`) and let go of for good (:meth:`ReaderAccess.drop`);
- how a reader that seeks where it likes and keeps no position (the bridge's planner and
  tasks, a schema lookup) gets its consumer and leaves nothing behind
  (:meth:`ReaderAccess.seek_reader`, :meth:`ReaderAccess.close_seek_reader`): by default a
  private subscription, released after (:meth:`ReaderAccess.release`).

A position here is the serialised MessageID of the first message still needed (None:
the channel's beginning). The default, :data:`SUBSCRIPTIONS`, needs nothing beyond the
protocols of :mod:`msgstream.contract.backend`: an ordinary client, and a durable subscription per
channel moved by seeking. A backend that cannot be read this way declares
``reader_access=None``; one whose channels exist only in the process that made them
declares ``in_process=True``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from importlib import import_module

from ..configuration.config import Config
from ..configuration.plugins import backend_names, backend_spec
from ..contract.backend import AdminClient, Client, Consumer
from ..errors import BackendUnavailableError
from ..runtime.scope import concurrently
from ..wire.position import SubscriptionPosition
from .raw_read import release_subscription

__all__ = [
    "SUBSCRIPTIONS",
    "Positions",
    "QueryHold",
    "ReaderAccess",
    "ReaderClient",
    "SubscriptionHold",
    "reader_access",
]

Positions = Mapping[str, bytes | None]
"""Per channel, the serialised MessageID of the first message still needed (None: the
channel's beginning)."""


def _nothing() -> None:
    return None


@dataclass
class ReaderClient:
    """A client opened for reading what another process writes."""

    client: Client
    refresh: Callable[[], None] = _nothing
    """Make messages written by other processes since the last call visible."""


class QueryHold(ABC):
    """What retention keeps for one query on ``channels``, under the query's ``name``:
    everything from the positions it was last moved to on. The query resumes from
    positions of its own (Spark's checkpoint); the hold only keeps their data there.

    """

    def __init__(self, client: Client, channels: Sequence[str], name: str) -> None:
        self.client = client
        self.channels = list(channels)
        self.name = name

    @abstractmethod
    async def ensure(self, positions: Positions) -> None:
        """Make sure the hold exists: one that does not yet starts at ``positions``."""

    @abstractmethod
    async def commit(self, positions: Positions) -> None:
        """The query is done with everything before ``positions``: it may go."""

    async def close(self) -> None:  # noqa: B027 (a hold may keep nothing open)
        """Let go of what the hold keeps open (the hold itself stays on the backend)."""


class SubscriptionHold(QueryHold):
    """A durable subscription per channel under the query's name, set to a position by
    :meth:`move`: here a seek, which needs no arithmetic on a backend's ids. Where a seek
    also moves the acknowledged position (Pulsar), retention may then delete what comes
    before it; where it does not, the subscription keeps the channel from where it was
    made, which loses nothing."""

    def __init__(self, client: Client, channels: Sequence[str], name: str) -> None:
        super().__init__(client, channels, name)
        self._consumers: dict[str, Consumer] = {}

    async def ensure(self, positions: Positions) -> None:
        missing = [channel for channel in self.channels if channel not in self._consumers]
        started = await concurrently(
            self.client.subscribe(channel, self.name, SubscriptionPosition.EARLIEST)
            for channel in missing
        )
        self._consumers.update(zip(missing, started, strict=True))
        await self.commit(positions)

    async def commit(self, positions: Positions) -> None:
        await concurrently(
            self.move(channel, consumer, position)
            for channel, consumer in self._consumers.items()
            if (position := positions[channel]) is not None
        )

    async def move(self, channel: str, consumer: Consumer, position: bytes) -> None:
        """Let retention delete what comes before ``position`` on ``channel``."""
        await consumer.seek(self.client.message_id_from_bytes(position), inclusive=True)

    async def close(self) -> None:
        consumers, self._consumers = self._consumers, {}
        await concurrently(consumer.close() for consumer in consumers.values())


class ReaderAccess:
    """How processes that only read a backend open it, hold a query's data and clean
    up. This class is the default (:data:`SUBSCRIPTIONS`); a backend overrides what it
    does its own way."""

    def resolved(self, config: Config) -> Config:
        """``config`` made to mean the same in a process with another working directory
        or environment (e.g. a relative store path made absolute)."""
        return config

    def open(self, config: Config) -> ReaderClient:
        """A client for reading the channels ``config`` points at."""
        from .factory import new_client  # the factory comes after the plug-ins

        return ReaderClient(new_client(config))

    def hold(self, client: Client, channels: Sequence[str], name: str) -> QueryHold:
        """The hold of query ``name`` on ``channels``, through ``client`` (one that
        :meth:`open` made)."""
        return SubscriptionHold(client, channels, name)

    async def seek_reader(self, client: Client, channel: str, name: str) -> Consumer:
        """A consumer of ``channel`` (through ``client``) that a reader positions by seeking
        and that keeps no position for it. The default is a subscription called ``name``
        at no position; :meth:`close_seek_reader` removes it."""
        return await client.subscribe(channel, name, SubscriptionPosition.UNKNOWN)

    async def close_seek_reader(self, client: Client, consumer: Consumer, name: str) -> None:
        """Close ``consumer`` (from :meth:`seek_reader` under ``name``) and remove what it
        left on the backend (a failure to remove is logged, not raised)."""
        await consumer.close()
        await self.release(client, consumer.channel, name)

    async def release(self, client: Client, channel: str, name: str) -> None:
        """Remove a reader's private subscription ``name`` of ``channel`` where the backend
        keeps one. A failure is logged, not raised: the read itself succeeded."""
        await release_subscription(client, channel, name)

    async def drop(self, client: Client, channel: str, names: Collection[str]) -> None:
        """Delete the holds and subscriptions called ``names`` on ``channel`` (a client
        without the admin API keeps none to delete)."""
        if isinstance(client, AdminClient):
            for info in await client.list_subscriptions(channel):
                if info.name in names:
                    await client.delete_subscription(channel, info.name)


SUBSCRIPTIONS = ReaderAccess()
"""The default reader access: an ordinary client, and subscriptions moved by seeking."""


def reader_access(backend: str) -> ReaderAccess | None:
    """The reader access backend ``backend`` declares (None: it offers none). A client
    of no registered backend (one made by hand) is read through :data:`SUBSCRIPTIONS`."""
    if backend not in backend_names():
        return SUBSCRIPTIONS
    declared = backend_spec(backend).reader_access
    if declared is None:
        return None
    module, _, attribute = declared.partition(":")
    access = getattr(import_module(module), attribute, None)
    if not isinstance(access, ReaderAccess):
        raise BackendUnavailableError(
            f"backend {backend!r}: its reader_access {declared!r} is not a ReaderAccess"
        )
    return access
