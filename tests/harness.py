"""Test-side view of one backend (imported by conftest and the conformance tests)."""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass, field

from msgstream import Client, Config, new_client

_counter = itertools.count()


@dataclass
class BackendHarness:
    """How a test reaches one backend: its config, fresh clients, fresh channel names."""

    name: str
    config: Config
    clients: list[Client] = field(default_factory=list)

    def client(self) -> Client:
        client = new_client(self.config)
        self.clients.append(client)
        return client

    def channel(self, prefix: str = "ch") -> str:
        return f"{prefix}-{os.getpid()}-{next(_counter)}"

    def channels(self, count: int, prefix: str = "ch") -> list[str]:
        base = self.channel(prefix)
        return [f"{base}-{i}" for i in range(count)]

    async def close(self) -> None:
        for client in self.clients:
            await client.close()
