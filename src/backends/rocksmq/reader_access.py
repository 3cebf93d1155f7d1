"""How processes that only read an embedded store do it (rocksmq's
:class:`~msgstream.streams.reader_access.ReaderAccess`).

They open the store read-only (a RocksDB secondary instance), also when other processes
share it (``rocksmq.sharing: auto``): Spark's Python workers come and go (Spark kills them
with SIGKILL), and one attached to a shared store could be the one to take it over when
no service owns it, opening RocksDB and serving the others for the length of a task. A
read-only store never owns, never writes, and sees what the owner wrote when it catches
up, which :attr:`~msgstream.streams.reader_access.ReaderClient.refresh` does. It keeps no
subscription either: a query's data is held by a *hold* (:mod:`.holds`), a file the
owner's retention honours, and a reader's private subscription leaves nothing to release.
A client that is not on a read-only store is read as any backend is.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from msgstream.configuration.config import Config
from msgstream.contract.backend import Client
from msgstream.streams.reader_access import Positions, QueryHold, ReaderAccess, ReaderClient

from ..log_client.client import RocksmqMessageID
from .client import new_client
from .holds import Holds
from .settings import RocksmqConfig
from .store import RocksStore


def read_only_store(client: Client) -> RocksStore | None:
    """The read-only store ``client`` reads, if that is what it reads."""
    store = getattr(client, "store", None)
    return store if isinstance(store, RocksStore) and store.read_only else None


class StoreHold(QueryHold):
    """A query's holds on a read-only store: the writing process's retention honours them."""

    def __init__(self, client: Client, holds: Holds, channels: Sequence[str], name: str) -> None:
        super().__init__(client, channels, name)
        self.holds = holds

    @staticmethod
    def _next_id(position: bytes | None) -> int:
        if position is None:
            return 0  # the channel's beginning: hold everything
        return RocksmqMessageID.parse(position).value

    async def ensure(self, positions: Positions) -> None:
        for channel in self.channels:
            if self.holds.get(channel, self.name) is None:
                self.holds.put(channel, self.name, self._next_id(positions[channel]))

    async def commit(self, positions: Positions) -> None:
        for channel in self.channels:
            held = self.holds.get(channel, self.name)
            target = self._next_id(positions[channel])
            self.holds.put(
                channel, self.name, target if held is None else max(held.next_id, target)
            )


class StoreReaderAccess(ReaderAccess):
    def resolved(self, config: Config) -> Config:
        """The store's path made explicit (``~`` and the default depend on the environment)."""
        section = config.section(RocksmqConfig)
        return config.replace(rocksmq=section.replace(path=section.resolved_path()))

    def open(self, config: Config) -> ReaderClient:
        """The store, read-only; :attr:`~ReaderClient.refresh` catches up with its writer."""
        client = new_client(config.section(RocksmqConfig), config.msgstream, read_only=True)
        store = read_only_store(client)  # read-only: always a client on its own store
        assert store is not None
        return ReaderClient(client, store.catch_up)

    def hold(self, client: Client, channels: Sequence[str], name: str) -> QueryHold:
        store = read_only_store(client)
        if store is None:
            return super().hold(client, channels, name)
        return StoreHold(client, store.holds, channels, name)

    async def release(self, client: Client, channel: str, name: str) -> None:
        if read_only_store(client) is None:
            await super().release(client, channel, name)

    async def drop(self, client: Client, channel: str, names: Collection[str]) -> None:
        store = read_only_store(client)
        if store is None:
            await super().drop(client, channel, names)
            return
        for name in names:
            store.holds.delete(channel, name)


READER_ACCESS = StoreReaderAccess()
